"""The floor: the naive baseline (the mean window) every challenger must beat, and the challenger's skill over it.

A reconstruction model is only worth promoting if it reconstructs held-out instances better than a model that
learned nothing about them. The baseline here is the simplest such model: it "reconstructs" every instance as
the training set's mean window, per timestep and per feature, in original units (``MeanWindow``). Its loss on
the held-out instances is the same metric as the verdict's (``landfall.core.scoring``: per-instance MSE over the
``T x F`` values in original units, averaged over the instances), so

    skill = 1 - challenger_loss / baseline_loss

is the fraction of the baseline's error the model removes: 0 for a model no better than the mean window
(pure-noise data, a broken scaling, a model that did not train), 1 for a perfect reconstruction, negative for
a model worse than the mean. The verdict promotes only at ``skill >= min_skill`` (``trainer.judging.verdict``).

Which training instances: the chief's share of the training split (``Plan.train_slices`` of worker 0, about
``1/num_workers`` of it), read once after training, in original units. The shares are contiguous runs of one
deterministic global order, so the mean is over a large sample of the training set and a rerun computes the
same; reading the other workers' shards would cost a second download for the same estimate. A mean over a
sample of the training data is still a fair baseline: it never sees a held-out instance.

Figures the verdict records (``metrics.json``, the result message, status, report): ``baseline_loss``,
``skill``, ``min_skill``; the baseline itself is described in ``evaluation.baseline``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import numpy as np

from landfall.core.rules import moments

NAME = "mean_window"
DESCRIPTION = "the training set's per-timestep, per-feature mean window, in original units"


@dataclasses.dataclass
class MeanWindow:
    """The running mean window over blocks of instances (float32 ``[n, T, F]``), in float64."""

    total: np.ndarray | None = None
    count: int = 0

    def add(self, block: np.ndarray) -> None:
        if not len(block):
            return
        s = np.asarray(block, np.float64).sum(axis=0)
        self.total = s if self.total is None else self.total + s
        self.count += len(block)

    @classmethod
    def of(cls, blocks: Iterable[np.ndarray]) -> MeanWindow:
        out = cls()
        for block in blocks:
            out.add(block)
        return out

    @property
    def window(self) -> np.ndarray:
        if self.total is None or not self.count:
            raise ValueError("no training instance to average")
        return self.total / self.count

    def errors(self, x: np.ndarray, scale: np.ndarray | None = None) -> np.ndarray:
        """Per-instance MSE of reconstructing ``x`` as the mean window, float64 ``[n]`` (the verdict's metric: each
        feature's residual divided by ``scale``, ``landfall.core.scoring``; None: original units)."""
        return self.row_errors(x, scale).mean(axis=1)

    def row_errors(self, x: np.ndarray, scale: np.ndarray | None = None) -> np.ndarray:
        """Each instance row's own MSE against the mean window's row, float64 ``[n, T]``."""
        return moments.scaled_row_mse(np.asarray(x, np.float64) - self.window[None], scale)


def skill(loss: float, baseline_loss: float) -> float | None:
    """``1 - loss / baseline_loss``; None when the baseline is exact (a constant dataset: nothing to learn)."""
    if not np.isfinite(loss) or not np.isfinite(baseline_loss) or baseline_loss <= 0.0:
        return None
    return float(1.0 - loss / baseline_loss)
