"""``kmeans``: KMeansAD (TSB-AD's, after TimeEval): the fitted windows clustered by k-means into ``CLUSTERS``
centroids; a window is reconstructed as its nearest centroid, so its error is its distance to the nearest cluster of
normal behaviour. KMeansAD leads TSB-AD-M on MSL, SMAP and Genesis. Here the windows are the standardised ones the
other detectors see (TSB-AD also z-normalises each window on its own; that scale-free distance is not a
reconstruction the serving contract can carry, so it is left out).

A detector module of ``trainer.baselines``: scikit-learn's ``KMeans`` (k-means++, a fixed seed, so a restarted chief
fits the same centroids), served as the centroids, a variable of a SavedModel (``trainer.detectors``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

NAME = "kmeans"
DESCRIPTION = "each window reconstructed as its nearest of 20 k-means centroids of the training windows (KMeansAD)"
CLUSTERS = 20  # TSB-AD's KMeansAD default (k=20)
SEED = 0


class Detector:
    name = NAME
    description = DESCRIPTION

    def __init__(self) -> None:
        self.centroids: np.ndarray | None = None  # [k, D]
        self.fitted_on = 0

    def fit(self, z: np.ndarray, code_size: int) -> Detector:
        from sklearn.cluster import KMeans

        self.fitted_on = len(z)
        k = min(CLUSTERS, len(z))
        self.centroids = KMeans(n_clusters=k, n_init=1, random_state=SEED).fit(z).cluster_centers_.astype(np.float64)
        return self

    def reconstruct(self, z: np.ndarray) -> np.ndarray:
        assert self.centroids is not None
        d = (self.centroids ** 2).sum(axis=1)[None, :] - 2.0 * z @ self.centroids.T
        return self.centroids[np.argmin(d, axis=1)]

    def serving(self, module: Any) -> Any:
        import tensorflow as tf

        assert self.centroids is not None
        centroids = self.centroids.astype(np.float32)
        module.centroids = tf.Variable(centroids, trainable=False, name="centroids")
        module.centroid_norms = tf.Variable((self.centroids ** 2).sum(axis=1).astype(np.float32)[None],
                                            trainable=False, name="centroid_norms")

        def reconstruct(z: Any) -> Any:
            distance = module.centroid_norms - 2.0 * tf.matmul(z, module.centroids, transpose_b=True)
            return tf.gather(module.centroids, tf.argmin(distance, axis=1))

        return reconstruct

    def describe(self) -> dict[str, Any]:
        return {"clusters": len(self.centroids) if self.centroids is not None else None,
                "training_instances": self.fitted_on}
