"""``kmeans_znorm``: KMeansAD as TSB-AD-M runs it (``n_clusters=10``; ``KMeansAD``, after TimeEval): each window, in
original units, z-normalised over all of its ``T x F`` values (``ddof = 1``; a constant window: zeros), so a window is
judged by its shape, not its level; k-means (``CLUSTERS`` centroids, seed 0) of the training windows; a window's score
its distance to the nearest centroid; a row's the mean of the windows over it (``unit`` ``mean``: TSB-AD's mapping).
TSB-AD-M's best on Genesis and MSL (published 0.891 and 0.996, with its window of 40 rows; here the job's window).
``kmeans`` clusters the standardised windows instead and reconstructs.

A scoring detector of ``trainer.judging.baselines`` (every row of a window gets the window's score); served as the
centroids.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from landfall.core.rules.series_windows import MEAN
from trainer.judging.baselines.rowwise import squared_distances
from trainer.judging.baselines.space import Space

NAME = "kmeans_znorm"
DESCRIPTION = ("each window z-normalised over its values, its distance to the nearest of 10 k-means centroids "
               "(TSB-AD-M's KMeansAD)")
TSB_AD = "KMeansAD"  # its row in TSB-AD-M's published table (landfall bench published)
TSB_AD_FIT = "series"  # what TSB-AD fitted it on there: the whole series
CLUSTERS = 10  # TSB-AD-M's multivariate setting
SEED = 0
BLOCK = 4_096  # windows scored at once


def znorm(x: np.ndarray) -> np.ndarray:
    """Each flattened window ``[n, D]`` z-normalised over its ``D`` values (``ddof = 1``; constant: zeros)."""
    x = np.asarray(x, np.float64)
    centred = x - x.mean(axis=1, keepdims=True)
    sd = np.sqrt((centred ** 2).sum(axis=1, keepdims=True) / max(1, x.shape[1] - 1))
    return np.divide(centred, sd, out=np.zeros_like(centred), where=sd > 0)


class Detector:
    name = NAME
    description = DESCRIPTION
    unit = MEAN

    def __init__(self) -> None:
        self.space: Space | None = None
        self.centroids: np.ndarray | None = None  # [k, D]
        self.fitted_on = 0

    def original(self, z: np.ndarray) -> np.ndarray:
        assert self.space is not None
        return self.space.original_rows(z).reshape(len(z), -1)

    def fit(self, z: np.ndarray, space: Space) -> Detector:
        from sklearn.cluster import KMeans

        self.space = space
        self.fitted_on = len(z)
        w = znorm(self.original(z))
        k = max(1, min(CLUSTERS, len(w)))
        self.centroids = np.asarray(KMeans(n_clusters=k, n_init=1, random_state=SEED).fit(w).cluster_centers_,
                                    np.float64)
        return self

    def row_scores(self, z: np.ndarray) -> np.ndarray:
        assert self.centroids is not None and self.space is not None
        out = np.empty(len(z), np.float64)
        for lo in range(0, len(z), BLOCK):
            w = znorm(self.original(z[lo:lo + BLOCK]))
            out[lo:lo + len(w)] = np.sqrt(squared_distances(w, self.centroids).min(axis=1))
        return np.repeat(out[:, None], self.space.shape[0], axis=1)

    def serving(self, module: Any) -> Any:
        import tensorflow as tf

        assert self.centroids is not None and self.space is not None
        t, f = self.space.shape
        d = t * f
        module.window_mean = tf.Variable(np.tile(self.space.mean, t).astype(np.float32)[None], trainable=False,
                                         name="window_mean")
        module.window_std = tf.Variable(np.tile(self.space.std, t).astype(np.float32)[None], trainable=False,
                                        name="window_std")
        module.centroids = tf.Variable(self.centroids.astype(np.float32), trainable=False, name="centroids")
        k = len(self.centroids)

        def row_scores(z: Any) -> Any:
            x = z * module.window_std + module.window_mean
            centred = x - tf.reduce_mean(x, axis=1, keepdims=True)
            sd = tf.sqrt(tf.reduce_sum(centred ** 2, axis=1, keepdims=True) / float(max(1, d - 1)))
            w = tf.math.divide_no_nan(centred, sd)
            # each centroid's distance from the differences (no |w|^2 + |c|^2 - 2wc: it cancels in float32)
            dist = tf.stack([tf.reduce_sum((w - module.centroids[j][None]) ** 2, axis=1) for j in range(k)], axis=1)
            near = tf.sqrt(tf.reduce_min(dist, axis=1, keepdims=True))
            return tf.tile(near, [1, t])

        return row_scores

    def describe(self) -> dict[str, Any]:
        return {"clusters": len(self.centroids) if self.centroids is not None else None,
                "training_instances": self.fitted_on}
