"""``knn``: the mean distance of a single row to its ``NEIGHBOURS`` nearest training rows, as TSB-AD-M runs KNN on
multivariate recordings (``n_neighbors=50, method='mean'``; ``slidingWindow = 1``), each row z-scored across its
channels (``ddof = 1``) first; the training rows a systematic sample of at most ``SAMPLE`` (TSB-AD fitted on the whole
series, test region included, and excluded each row itself: here the rows scored are never the ones looked in).

A row detector (``trainer.judging.baselines.rowwise``): served as the sample and its norms.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainer.judging.baselines.rowwise import (
    RowDetector,
    sample,
    squared_distances,
    squared_distances_tf,
    squared_norms,
    zscore_across,
    zscore_across_tf,
)

NAME = "knn"
DESCRIPTION = "a single row's mean distance to its 50 nearest training rows, z-scored across channels (TSB-AD-M's KNN)"
TSB_AD = "KNN"  # its row in TSB-AD-M's published table (landfall bench published)
TSB_AD_FIT = "series"  # what TSB-AD fitted it on there: the whole series
NEIGHBOURS = 50  # TSB-AD-M's multivariate setting
SAMPLE = 4_096  # training rows looked in, at most
BLOCK = 2_048  # rows scored at once (memory: BLOCK x SAMPLE)


class Detector(RowDetector):
    name = NAME
    description = DESCRIPTION

    def __init__(self) -> None:
        super().__init__()
        self.sample: np.ndarray | None = None  # [m, F], z-scored across channels

    def fit_rows(self, rows: np.ndarray) -> None:
        self.sample = zscore_across(sample(rows, SAMPLE))

    def score_rows(self, rows: np.ndarray) -> np.ndarray:
        assert self.sample is not None
        k = min(NEIGHBOURS, len(self.sample))
        z = zscore_across(rows)
        out = np.empty(len(z), np.float64)
        for lo in range(0, len(z), BLOCK):
            q = z[lo:lo + BLOCK]
            d = squared_distances(q, self.sample)
            out[lo:lo + len(q)] = np.sqrt(np.partition(d, k - 1, axis=1)[:, :k]).mean(axis=1)
        return out

    def rows_serving(self, module: Any) -> Any:
        import tensorflow as tf

        assert self.sample is not None
        module.sample = tf.Variable(self.sample.astype(np.float32), trainable=False, name="sample")
        module.norms = tf.Variable(squared_norms(self.sample), trainable=False, name="norms")
        k = min(NEIGHBOURS, len(self.sample))

        def score(rows: Any) -> Any:
            d = squared_distances_tf(zscore_across_tf(rows), module.sample, module.norms)
            nearest, _ = tf.math.top_k(-d, k=k)
            return tf.reduce_mean(tf.sqrt(-nearest), axis=1)

        return score

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "neighbours": NEIGHBOURS}
