"""``kmeans``: KMeansAD (TSB-AD's, after TimeEval): the fitted windows clustered by k-means into ``CLUSTERS``
centroids; a window is reconstructed as its nearest centroid, so its error is its distance to the nearest cluster of
normal behaviour. KMeansAD leads TSB-AD-M on MSL, SMAP and Genesis. Here the windows are the standardised ones the
other detectors see (TSB-AD also z-normalises each window on its own; that scale-free distance is not a
reconstruction the serving contract can carry, so it is left out).

A detector module of ``trainer.judging.baselines``: scikit-learn's ``KMeans`` (k-means++, a fixed seed, so a restarted
chief fits the same centroids). It is the nearest neighbour (``trainer.judging.baselines.nearest_neighbour``) among the
centroids instead of a sample of windows, so it reconstructs and serves as that one does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainer.judging.baselines import nearest_neighbour
from trainer.judging.baselines.space import Space

NAME = "kmeans"
DESCRIPTION = "each window reconstructed as its nearest of 20 k-means centroids of the training windows (KMeansAD)"
CLUSTERS = 20  # TSB-AD's KMeansAD default (k=20)
SEED = 0


class Detector(nearest_neighbour.Detector):
    name = NAME
    description = DESCRIPTION

    def __init__(self) -> None:
        super().__init__()
        self.fitted_on = 0

    def fit(self, z: np.ndarray, space: Space) -> Detector:
        from sklearn.cluster import KMeans

        self.fitted_on = len(z)
        k = min(CLUSTERS, len(z))
        self.sample = KMeans(n_clusters=k, n_init=1, random_state=SEED).fit(z).cluster_centers_.astype(np.float64)
        return self

    def describe(self) -> dict[str, Any]:
        return {"clusters": len(self.sample) if self.sample is not None else None, "training_instances": self.fitted_on}
