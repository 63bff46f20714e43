"""``cblof``: the cluster-based local outlier factor on single rows, as TSB-AD-M runs CBLOF on multivariate
recordings (``n_clusters=4, alpha=0.6``, ``beta=5``, unweighted): each row z-scored across its channels (``ddof =
1``), the training rows clustered by k-means (seed 0); the largest clusters holding ``ALPHA`` of the rows (or
followed by one ``BETA`` times smaller) are *large*; a row nearest a large cluster's centre scores its distance to it,
a row nearest a small one its distance to the nearest large centre.

A row detector (``trainer.judging.baselines.rowwise``): served as the centres and which are large.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainer.judging.baselines.rowwise import (
    RowDetector,
    squared_distances,
    squared_distances_tf,
    squared_norms,
    zscore_across,
    zscore_across_tf,
)

NAME = "cblof"
DESCRIPTION = ("k-means clusters of single rows z-scored across channels, a row's distance to its large cluster "
               "(TSB-AD-M's CBLOF)")
TSB_AD = "CBLOF"  # its row in TSB-AD-M's published table (landfall bench published)
TSB_AD_FIT = "series"  # what TSB-AD fitted it on there: the whole series
CLUSTERS, ALPHA, BETA = 4, 0.6, 5.0  # TSB-AD-M's multivariate setting, CBLOF's beta
SEED = 0


def large_clusters(sizes: np.ndarray) -> np.ndarray:
    """Which clusters are large (pyod's CBLOF rule): the first ``i`` by size, ``i`` the first count both holding
    ``ALPHA`` of the rows and followed by a cluster ``BETA`` times smaller, else the first of either, else all."""
    order = np.argsort(-sizes, kind="stable")
    total = sizes.sum()
    alpha = [i for i in range(1, len(sizes)) if sizes[order[:i]].sum() >= total * ALPHA]
    beta = [i for i in range(1, len(sizes)) if sizes[order[i]] and sizes[order[i - 1]] / sizes[order[i]] >= BETA]
    both = sorted(set(alpha) & set(beta))
    cut = (both or alpha or beta or [len(sizes)])[0]
    large = np.zeros(len(sizes), bool)
    large[order[:cut]] = True
    return large


class Detector(RowDetector):
    name = NAME
    description = DESCRIPTION

    def __init__(self) -> None:
        super().__init__()
        self.centres: np.ndarray | None = None  # [k, F]
        self.large: np.ndarray | None = None  # [k] bool

    def fit_rows(self, rows: np.ndarray) -> None:
        from sklearn.cluster import KMeans

        z = zscore_across(rows)
        k = max(1, min(CLUSTERS, len(np.unique(z, axis=0))))
        km = KMeans(n_clusters=k, n_init=1, random_state=SEED).fit(z)
        self.centres = np.asarray(km.cluster_centers_, np.float64)
        self.large = large_clusters(np.bincount(km.labels_, minlength=k))

    def score_rows(self, rows: np.ndarray) -> np.ndarray:
        assert self.centres is not None and self.large is not None
        z = zscore_across(rows)
        d = np.sqrt(squared_distances(z, self.centres))
        near = d.argmin(axis=1)
        return np.where(self.large[near], d[np.arange(len(z)), near], d[:, self.large].min(axis=1))

    def rows_serving(self, module: Any) -> Any:
        import tensorflow as tf

        assert self.centres is not None and self.large is not None
        module.centres = tf.Variable(self.centres.astype(np.float32), trainable=False, name="centres")
        module.large = tf.Variable(self.large.astype(np.float32)[None], trainable=False, name="large")
        module.norms = tf.Variable(squared_norms(self.centres), trainable=False, name="norms")

        def score(rows: Any) -> Any:
            d = tf.sqrt(squared_distances_tf(zscore_across_tf(rows), module.centres, module.norms))
            near = tf.argmin(d, axis=1)
            own = tf.gather(d, near, batch_dims=1)
            to_large = tf.reduce_min(d + (1.0 - module.large) * 3.0e38, axis=1)
            return tf.where(tf.gather(module.large[0], near) > 0.5, own, to_large)

        return score

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "clusters": len(self.centres) if self.centres is not None else None,
                "large": int(self.large.sum()) if self.large is not None else None}
