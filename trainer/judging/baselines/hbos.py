"""``hbos``: the histogram-based outlier score on single rows, as TSB-AD-M runs HBOS on multivariate recordings
(``n_bins=30, tol=0.5``, ``alpha=0.1``; ``slidingWindow = 1``): each row z-scored across its channels (``ddof = 1``),
then per channel a histogram of the training rows (``BINS`` equal-width bins, densities), and a row's score the sum
over channels of ``-log2(density + ALPHA)`` of the bin its value falls in (a value past the histogram's range by
more than ``TOL`` of a bin width: the rarest bin's). Here the score is offset by each channel's most common bin
(``sum(max_c - log2(density_c + ALPHA))``), the same order and at least 0.

A row detector (``trainer.judging.baselines.rowwise``): served as the bin edges and their log densities.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainer.judging.baselines.rowwise import RowDetector, zscore_across, zscore_across_tf

NAME = "hbos"
DESCRIPTION = "per-channel histograms of single rows z-scored across their channels (TSB-AD-M's HBOS)"
TSB_AD = "HBOS"  # its row in TSB-AD-M's published table (landfall bench published)
TSB_AD_FIT = "series"  # what TSB-AD fitted it on there: the whole series
BINS, TOL, ALPHA = 30, 0.5, 0.1  # TSB-AD-M's multivariate setting and HBOS's alpha


class Detector(RowDetector):
    name = NAME
    description = DESCRIPTION

    def __init__(self) -> None:
        super().__init__()
        self.edges: np.ndarray | None = None  # [F, BINS + 1]
        self.logs: np.ndarray | None = None  # [F, BINS]: log2(density + ALPHA)

    def fit_rows(self, rows: np.ndarray) -> None:
        z = zscore_across(rows)
        edges, logs = [], []
        for c in range(z.shape[1]):
            lo, hi = float(z[:, c].min()), float(z[:, c].max())
            if hi - lo <= 1e-9 * max(1.0, abs(lo)):  # one value (to rounding): numpy's own range for it
                lo, hi = lo - 0.5, hi + 0.5
            hist, edge = np.histogram(z[:, c], bins=BINS, range=(lo, hi), density=True)
            edges.append(edge)
            logs.append(np.log2(np.nan_to_num(hist) + ALPHA))
        self.edges, self.logs = np.asarray(edges, np.float64), np.asarray(logs, np.float64)

    def score_rows(self, rows: np.ndarray) -> np.ndarray:
        assert self.edges is not None and self.logs is not None
        z = zscore_across(rows)
        out = np.zeros(len(z), np.float64)
        for c in range(z.shape[1]):
            edge, logs, v = self.edges[c], self.logs[c], z[:, c]
            index = np.digitize(v, edge, right=True)
            width = edge[1] - edge[0]
            got = logs[np.clip(index - 1, 0, BINS - 1)]
            low = (index == 0) & (edge[0] - v > width * TOL)
            high = (index == BINS + 1) & (v - edge[-1] > width * TOL)
            got = np.where(low | high, logs.min(), got)
            out += logs.max() - got
        return out

    def rows_serving(self, module: Any) -> Any:
        import tensorflow as tf

        assert self.edges is not None and self.logs is not None
        module.edges = tf.Variable(self.edges.astype(np.float32), trainable=False, name="edges")
        module.logs = tf.Variable(self.logs.astype(np.float32), trainable=False, name="logs")
        width = (self.edges[:, 1] - self.edges[:, 0]).astype(np.float32)

        def score(rows: Any) -> Any:
            v = tf.transpose(zscore_across_tf(rows))  # [F, m]
            index = tf.searchsorted(module.edges, v, side="left")  # np.digitize(right=True)
            got = tf.gather(module.logs, tf.clip_by_value(index - 1, 0, BINS - 1), batch_dims=1)
            tol = (width * TOL)[:, None]
            low = (index == 0) & (module.edges[:, :1] - v > tol)
            high = (index == BINS + 1) & (v - module.edges[:, -1:] > tol)
            lowest = tf.reduce_min(module.logs, axis=1, keepdims=True)
            got = tf.where(low | high, lowest + tf.zeros_like(got), got)
            return tf.reduce_sum(tf.reduce_max(module.logs, axis=1, keepdims=True) - got, axis=0)

        return score
