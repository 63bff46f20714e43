"""Exact per-feature statistics of the converted values (count, mean, M2, min, max), mergeable (Chan et al.): what
the manifest's ``stats`` says, and the moments of the arrival's profile. Shared by both conversions, the ranged
tasks' parts and compaction.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from landfall.core.contracts.messages import FeatureStats
from landfall.core.rules import moments

# A batch's M2 = sum(x²) - sum(x)·mean cancels when a feature's offset dwarfs its spread (timestamps ~1e9
# of unit variance): below this fraction of the sum of squares, it is summed again around the batch mean.
_CANCELLED = 1e-6


@dataclasses.dataclass
class RunningStats:
    """Per-feature count/mean/M2 (Chan et al. merge), min and max, in float64."""

    features: int
    n: int = 0

    def __post_init__(self) -> None:
        self.mean = np.zeros(self.features)
        self.m2 = np.zeros(self.features)
        self.min = np.full(self.features, np.inf)
        self.max = np.full(self.features, -np.inf)

    def update(self, batch: np.ndarray) -> bool:
        """Adds a batch of shape (k, T, F); returns False, adding nothing, when it holds a NaN or Inf.

        A column sum (and sum of squares, in float64) is finite exactly when every value in it is,
        so the finiteness check costs no extra pass over clean data.
        """
        if not len(batch):
            return True
        # Reduce over instances with whole rows (T*F wide) as the inner loop, then fold timesteps:
        # far faster than reducing an (n*T, F) array column by column.
        rows = batch.reshape(len(batch), -1)
        with np.errstate(invalid="ignore"):  # Inf - Inf or a signalling NaN: reported by returning False
            s1 = rows.sum(axis=0, dtype=np.float64)
            s2 = np.einsum("ij,ij->j", rows, rows, dtype=np.float64)
        if not (np.isfinite(s1).all() and np.isfinite(s2).all()):
            return False
        s1 = s1.reshape(-1, self.features).sum(axis=0)
        s2 = s2.reshape(-1, self.features).sum(axis=0)
        nb = rows.shape[0] * (rows.shape[1] // self.features)
        mb = s1 / nb
        m2b = s2 - s1 * mb
        lost = m2b < _CANCELLED * s2
        if lost.any():  # only those features pay a second pass
            centered = rows.reshape(-1, self.features)[:, lost] - mb[lost]  # float64
            c1 = centered.sum(axis=0)
            m2b[lost] = np.einsum("ij,ij->j", centered, centered) - c1 * (c1 / nb)
            mb[lost] += c1 / nb
        m2b = np.maximum(m2b, 0.0)
        self.n, self.mean, self.m2 = moments.merge(self.n, self.mean, self.m2, nb, mb, m2b)
        self.min = np.minimum(self.min, rows.min(axis=0).reshape(-1, self.features).min(axis=0))
        self.max = np.maximum(self.max, rows.max(axis=0).reshape(-1, self.features).max(axis=0))
        return True

    def merge(self, other: RunningStats) -> None:
        """Adds another part's statistics (Chan et al.): as if its batches had been added here."""
        if not other.n:
            return
        self.n, self.mean, self.m2 = moments.merge(self.n, self.mean, self.m2, other.n, other.mean, other.m2)
        self.min = np.minimum(self.min, other.min)
        self.max = np.maximum(self.max, other.max)

    def to_dict(self) -> dict[str, object]:
        """Exact in JSON (floats round-trip); min/max are ``None`` while empty (JSON has no infinity)."""
        return {"n": self.n, "mean": self.mean.tolist(), "m2": self.m2.tolist(),
                "min": self.min.tolist() if self.n else None, "max": self.max.tolist() if self.n else None}

    @classmethod
    def from_dict(cls, raw: dict) -> RunningStats:
        stats = cls(len(raw["mean"]), int(raw["n"]))
        stats.mean, stats.m2 = np.array(raw["mean"], dtype=float), np.array(raw["m2"], dtype=float)
        if stats.n:
            stats.min, stats.max = np.array(raw["min"], dtype=float), np.array(raw["max"], dtype=float)
        return stats

    def result(self) -> FeatureStats:
        std = np.sqrt(self.m2 / max(self.n, 1))
        return FeatureStats(self.mean.tolist(), std.tolist(), self.min.tolist(), self.max.tolist())
