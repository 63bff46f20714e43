"""``mcd``: a robust covariance (the Minimum Covariance Determinant, Rousseeuw 1984; scikit-learn's ``MinCovDet``,
FastMCD) of the fitted windows' principal components, the detector family TSB-AD runs as MCD and Sub-MCD (its best
on NAB 014). A window's error is its distance from normal in two orthogonal parts:

- **off the subspace**: the PCA residual, as ``pca_variance`` measures it (its components: those explaining 95 % of
  the fitted windows' variance, here at most ``CAP``);
- **within it**: the robust Mahalanobis distance of the window's code (its coordinates on those components) from the
  MCD's location, in the MCD's covariance: a window whose code is unusual for normal windows, although the subspace
  reconstructs it, scores high; outliers in the fitted sample do not inflate the covariance they are judged by.

MCD on the flattened windows themselves (``T x F`` values: 4,750 for a 38-channel server window) is out of reach,
hence the subspace: ``CAP`` components, and a systematic sample of at most ``SAMPLE`` codes, keep FastMCD to seconds.

As a reconstruction (the serving contract): with ``P`` the components ``[k, D]``, ``c = P (z - centre)`` the code,
``W`` the MCD precision's symmetric square root (``W^T W`` = the precision) and ``m`` its location,
``reconstruct(z) = centre + P^T c - P^T W (c - m)``; then ``|z - reconstruct(z)|^2 = |(I - P^T P)(z - centre)|^2 +
(c - m)^T precision (c - m)``, the two parts above (every feature standardised with the job's statistics: the
verdict's error, in ``error_scale``, is that sum up to the constant features' own units).

A detector module of ``trainer.judging.baselines``: fitted in float64 with a fixed seed (a restarted chief fits the
same), served as four variables of a SavedModel (``trainer.judging.detectors``). Not a default candidate
(``LANDFALL_DETECTORS=trainer.judging.baselines.mcd`` registers it): with it the label-free choice falls from 0.479 to
0.461 over both dev sets, although it is the best fixed detector on two server machines (docs/benchmarks.md, "A robust
covariance").
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from trainer.judging.baselines import pca_variance
from trainer.judging.baselines.space import Space

NAME = "mcd"
DESCRIPTION = ("the robust (MCD) Mahalanobis distance of the window's principal-component code, plus its PCA "
               "residual (components to 95% of the variance, at most 32)")
CAP = 32  # components at most: FastMCD's cost grows with their cube, and the served W is CAP x CAP
SAMPLE = 2_048  # codes the MCD is fitted on, at most (a systematic sample: FastMCD took 36 s on 8,000 x 32 here)
SEED = 0


class Detector:
    name = NAME
    description = DESCRIPTION

    def __init__(self) -> None:
        self.components: np.ndarray | None = None  # P [k, D] orthonormal rows
        self.centre: np.ndarray | None = None  # [D]
        self.whiten: np.ndarray | None = None  # W [k, k], W^T W = the MCD precision
        self.location: np.ndarray | None = None  # m [k]: the MCD location of the codes
        self.fitted_on = 0

    def fit(self, z: np.ndarray, space: Space) -> Detector:
        from sklearn.covariance import MinCovDet

        self.fitted_on = len(z)
        self.centre, self.components = pca_variance.leading(z, CAP)
        codes = (z - self.centre) @ self.components.T
        codes = codes[::max(1, -(-len(codes) // SAMPLE))]
        if len(codes) < 2:  # one window: no spread to estimate; its code is the location, distances unscaled
            self.location, self.whiten = codes.mean(axis=0), np.eye(codes.shape[1])
            return self
        with warnings.catch_warnings():  # FastMCD's convergence notes on near-singular codes: not the job's log
            warnings.simplefilter("ignore", RuntimeWarning)
            warnings.simplefilter("ignore", UserWarning)
            mcd = MinCovDet(random_state=SEED).fit(codes)
        precision = mcd.get_precision()
        values, vectors = np.linalg.eigh((precision + precision.T) / 2.0)
        self.whiten = (vectors * np.sqrt(np.clip(values, 0.0, None))) @ vectors.T
        self.location = mcd.location_
        return self

    def reconstruct(self, z: np.ndarray) -> np.ndarray:
        assert self.components is not None and self.centre is not None
        assert self.whiten is not None and self.location is not None
        code = (z - self.centre) @ self.components.T
        return self.centre + (code - (code - self.location) @ self.whiten.T) @ self.components

    def serving(self, module: Any) -> Any:
        import tensorflow as tf

        assert self.components is not None and self.centre is not None
        assert self.whiten is not None and self.location is not None
        module.components = tf.Variable(self.components.astype(np.float32), trainable=False, name="components")
        module.centre = tf.Variable(self.centre.astype(np.float32)[None], trainable=False, name="centre")
        module.whiten = tf.Variable(self.whiten.astype(np.float32), trainable=False, name="whiten")
        module.location = tf.Variable(self.location.astype(np.float32)[None], trainable=False, name="location")

        def reconstruct(z: Any) -> Any:
            code = tf.matmul(z - module.centre, module.components, transpose_b=True)
            inside = code - tf.matmul(code - module.location, module.whiten, transpose_b=True)
            return tf.matmul(inside, module.components) + module.centre

        return reconstruct

    def describe(self) -> dict[str, Any]:
        return {"components": len(self.components) if self.components is not None else None,
                "training_instances": self.fitted_on}
