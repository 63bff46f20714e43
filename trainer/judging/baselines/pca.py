"""``pca``: principal components of the flattened, standardised ``T x F`` windows; a window is reconstructed as its
projection on the ``k`` leading components, ``(z - centre) C^T C + centre``. ``k`` is the model's code size (a linear
autoencoder with the model's bottleneck, so the model has to earn its non-linearity), at most the sample's rank.
TSB-AD (Liu and Paparrizos, NeurIPS 2024) finds sub-sequence PCA among the strongest detectors on its 1,070 series.

A detector module of ``trainer.judging.baselines`` (its docstring says what one provides): fitted in float64 numpy,
served as two variables of a SavedModel (``trainer.judging.detectors``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainer.judging.baselines.space import Space

NAME = "pca"
DESCRIPTION = ("principal components of the standardised windows, as many as the model's code size "
               "(a linear autoencoder)")


def spectrum(centred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The covariance's eigenvalues (largest first) and eigenvectors (columns) of centred windows ``[n, D]``: an
    eigendecomposition of the ``D x D`` covariance, or, with fewer windows than ``D`` (a short prefix of a wide
    recording: MSL's 376 windows of 6,875 values), the SVD of the windows themselves, the same subspace in a fraction
    of the time."""
    n, d = centred.shape
    if n < d:
        _, s, vt = np.linalg.svd(centred, full_matrices=False)
        return s ** 2 / max(1, n - 1), vt.T
    values, vectors = np.linalg.eigh(centred.T @ centred / max(1, n - 1))
    order = np.argsort(values)[::-1]
    return values[order], vectors[:, order]


class Detector:
    name = NAME
    description = DESCRIPTION

    def __init__(self) -> None:
        self.components: np.ndarray | None = None  # [k, D] orthonormal rows
        self.centre: np.ndarray | None = None  # [D]
        self.fitted_on = 0

    def fit(self, z: np.ndarray, space: Space) -> Detector:
        self.fitted_on = len(z)
        self.centre = z.mean(axis=0)
        _, vectors = spectrum(z - self.centre)
        k = min(max(1, int(space.code_size)), z.shape[1], max(1, len(z) - 1))
        self.components = vectors[:, :k].T
        return self

    def reconstruct(self, z: np.ndarray) -> np.ndarray:
        assert self.components is not None and self.centre is not None
        return (z - self.centre) @ self.components.T @ self.components + self.centre

    def serving(self, module: Any) -> Any:
        import tensorflow as tf

        assert self.components is not None and self.centre is not None
        module.components = tf.Variable(self.components.astype(np.float32), trainable=False, name="components")
        module.centre = tf.Variable(self.centre.astype(np.float32)[None], trainable=False, name="centre")

        def reconstruct(z: Any) -> Any:
            code = tf.matmul(z - module.centre, module.components, transpose_b=True)
            return tf.matmul(code, module.components) + module.centre

        return reconstruct

    def describe(self) -> dict[str, Any]:
        return {"components": len(self.components) if self.components is not None else None,
                "training_instances": self.fitted_on}
