"""A detector that ships outside Landfall, as a plug-in module (``LANDFALL_DETECTORS=tests.trainer.plugin_detector``
or ``trainer.judging.baselines.register``): the smallest real example of the extension point, used by
tests/trainer/test_detector_registry.py. Each window is reconstructed as the mean of its ``K`` nearest training
windows (a k-NN detector; TSB-AD's KNN scores the distance to the k-th neighbour). Nothing else in Landfall names it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainer.judging.baselines.space import Space

K = 3


class Detector:
    name = "knn_mean"
    description = f"each window reconstructed as the mean of its {K} nearest training windows (standardised)"

    def __init__(self) -> None:
        self.sample: np.ndarray | None = None

    def fit(self, z: np.ndarray, space: Space) -> Detector:
        self.sample = z[:: max(1, -(-len(z) // 2048))]
        return self

    def reconstruct(self, z: np.ndarray) -> np.ndarray:
        assert self.sample is not None
        d = (self.sample ** 2).sum(axis=1)[None, :] - 2.0 * z @ self.sample.T
        near = np.argsort(d, axis=1, kind="stable")[:, :K]
        return self.sample[near].mean(axis=1)

    def serving(self, module: Any) -> Any:
        import tensorflow as tf

        assert self.sample is not None
        module.sample = tf.Variable(self.sample.astype(np.float32), trainable=False, name="sample")
        module.norms = tf.Variable((self.sample ** 2).sum(axis=1).astype(np.float32)[None], trainable=False,
                                   name="norms")

        def reconstruct(z: Any) -> Any:
            distance = module.norms - 2.0 * tf.matmul(z, module.sample, transpose_b=True)
            _, near = tf.math.top_k(-distance, k=K)
            return tf.reduce_mean(tf.gather(module.sample, near), axis=1)

        return reconstruct

    def describe(self) -> dict[str, Any]:
        return {"training_instances": len(self.sample) if self.sample is not None else None}
