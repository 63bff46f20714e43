"""``nearest_neighbour``: a window reconstructed as its nearest training window (squared Euclidean distance on the
standardised values, the first on ties) among a bounded, systematic sample of ``SAMPLE`` of the fitted windows.
TSB-AD's other strong simple detector is a nearest-neighbour distance; scored here as a reconstruction, its loss is
comparable with the model's.

A detector module of ``trainer.judging.baselines``: one matrix product of a block of ``QUERY_BLOCK`` windows against the
sample, in float64 numpy; served as the sample and its norms, variables of a SavedModel (``trainer.judging.detectors``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainer.judging.baselines.space import Space

NAME = "nearest_neighbour"
DESCRIPTION = "each window reconstructed as its nearest training window (Euclidean, standardised), from a sample"
SAMPLE = 4_096  # training windows it looks in, at most
QUERY_BLOCK = 1_024  # windows compared with the sample at once (memory: QUERY_BLOCK x SAMPLE floats)


class Detector:
    name = NAME
    description = DESCRIPTION

    def __init__(self) -> None:
        self.sample: np.ndarray | None = None  # [m, D]

    def fit(self, z: np.ndarray, space: Space) -> Detector:
        every = max(1, -(-len(z) // SAMPLE))
        self.sample = z[::every]
        return self

    def reconstruct(self, z: np.ndarray) -> np.ndarray:
        assert self.sample is not None
        near = np.empty(len(z), np.int64)
        norms = (self.sample ** 2).sum(axis=1)
        for lo in range(0, len(z), QUERY_BLOCK):
            q = z[lo:lo + QUERY_BLOCK]
            d = norms[None, :] - 2.0 * q @ self.sample.T  # + |q|^2, the same for every candidate
            near[lo:lo + len(q)] = np.argmin(d, axis=1)
        return self.sample[near]

    def serving(self, module: Any) -> Any:
        import tensorflow as tf

        assert self.sample is not None
        sample = self.sample.astype(np.float32)
        module.sample = tf.Variable(sample, trainable=False, name="sample")
        module.norms = tf.Variable((sample.astype(np.float64) ** 2).sum(axis=1).astype(np.float32)[None],
                                   trainable=False, name="norms")

        def reconstruct(z: Any) -> Any:
            distance = module.norms - 2.0 * tf.matmul(z, module.sample, transpose_b=True)
            return tf.gather(module.sample, tf.argmin(distance, axis=1))

        return reconstruct

    def describe(self) -> dict[str, Any]:
        return {"training_instances": len(self.sample) if self.sample is not None else None}
