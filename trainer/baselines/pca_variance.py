"""``pca_variance``: PCA as ``trainer.baselines.pca`` fits it, keeping as many components as explain ``VARIANCE`` of
the fitted windows' variance (scikit-learn's ``n_components=0.95`` rule) instead of the model's code size. On the
multivariate dev set the code size (32) keeps a quarter to three quarters of the variance of 38-channel server
windows, and the variance rule changes Landfall's PCA by recording and by seed (``landfall bench pca-gap``,
docs/benchmarks.md: mean VUS-PR 0.478 -> 0.517 over the six at seed 0, 0.508 -> 0.475 at seed 2): a candidate the
selection weighs only where a deployment opts in (``LANDFALL_DETECTORS=trainer.baselines.pca_variance``), not a
default: registered by default it won the surrogate by 0.002 on a gait recording and then flagged 15 % of a clean
arrival (tests/trainer/test_champion_view.py).

A detector module of ``trainer.baselines``: it reconstructs and serves as ``pca`` does.
"""

from __future__ import annotations

import numpy as np

from trainer.baselines import pca

NAME = "pca_variance"
DESCRIPTION = "principal components of the standardised windows, as many as explain 95% of their variance"
VARIANCE = 0.95


class Detector(pca.Detector):
    name = NAME
    description = DESCRIPTION

    def fit(self, z: np.ndarray, code_size: int) -> Detector:
        self.fitted_on = len(z)
        self.centre = z.mean(axis=0)
        values, vectors = pca.spectrum(z - self.centre)
        explained = np.cumsum(np.clip(values, 0.0, None))
        total = explained[-1] if len(explained) and explained[-1] > 0 else 1.0
        k = int(np.searchsorted(explained / total, VARIANCE) + 1)
        k = max(1, min(k, z.shape[1], max(1, len(z) - 1)))
        self.components = vectors[:, :k].T
        return self
