"""Per-feature count, mean and sum of squared deviations (``m2``), merged exactly (Chan, Golub and LeVeque 1979).

The one merge of statistics: the converter's running statistics over an arrival's batches and parts
(``landfall.arrival.stats.RunningStats``) and the trainer's over a job's arrivals (``trainer.inputs``). The pairwise
form keeps its precision where ``E[x^2] - E[x]^2`` loses it: a feature whose mean is large against its spread (a
timestamp, a sensor's offset) would lose most of its digits to the subtraction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np


def merge(n_a: float, mean_a: np.ndarray, m2_a: np.ndarray, n_b: float, mean_b: np.ndarray,
          m2_b: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """The statistics of two parts together: ``(n, mean, m2)``, as if every row of both had been added to one."""
    total = n_a + n_b
    if not total:
        return 0, np.asarray(mean_a, np.float64), np.asarray(m2_a, np.float64)
    delta = np.asarray(mean_b, np.float64) - mean_a
    return total, mean_a + delta * n_b / total, m2_a + m2_b + delta**2 * n_a * n_b / total


def pooled(parts: Iterable[tuple[int, Sequence[float], Sequence[float]]]) -> tuple[np.ndarray, np.ndarray]:
    """The count-weighted mean and (population) standard deviation of parts given as ``(count, mean, std)``."""
    n, mean, m2 = 0.0, None, None
    for count, part_mean, part_std in parts:
        mu, sd = np.asarray(part_mean, np.float64), np.asarray(part_std, np.float64)
        if mean is None:
            mean, m2 = np.zeros_like(mu), np.zeros_like(mu)
        n, mean, m2 = merge(n, mean, m2, float(count), mu, count * sd**2)
    if mean is None or not n:
        raise ValueError("no part with a row to pool")
    return mean, np.sqrt(np.maximum(m2 / n, 0.0))
