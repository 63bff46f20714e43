"""What a detector is fitted in (``trainer.judging.baselines``' contract): the job's window shape, the model's code size
and the statistics the windows were standardised with, so a detector that works on a row's original values (a row
scorer, ``trainer.judging.baselines.rowwise``) can undo the standardisation the others work in."""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Space:
    """``shape`` ``(T, F)``; ``code_size`` the model's; ``mean`` and ``std`` (float64 ``[F]``) the per-feature
    statistics the flattened windows ``z`` were standardised with (``z = (x - mean) / std``); ``scale`` each
    feature's error unit (None: original units)."""

    shape: tuple[int, int]
    code_size: int
    mean: np.ndarray
    std: np.ndarray
    scale: np.ndarray | None = None

    @property
    def features(self) -> int:
        return int(self.shape[1])

    def original_rows(self, z: np.ndarray) -> np.ndarray:
        """Every row of the flattened standardised windows ``z`` (``[n, T x F]``) in original units, ``[n x T, F]``."""
        rows = np.asarray(z, np.float64).reshape(-1, self.features)
        return rows * self.std + self.mean
