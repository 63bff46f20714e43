"""Per-feature count, mean and sum of squared deviations (``m2``), merged exactly (Chan, Golub and LeVeque 1979).

The one merge of statistics: the converter's running statistics over an arrival's batches and parts
(``landfall.arrival.stats.RunningStats``) and the trainer's over a job's arrivals (``trainer.training.inputs``). The
pairwise form keeps its precision where ``E[x^2] - E[x]^2`` loses it: a feature whose mean is large against its spread
(a timestamp, a sensor's offset) would lose most of its digits to the subtraction.
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


CONSTANT_STD = 1e-12  # a feature whose standard deviation is at most this is constant (left unscaled: std 1)
FLOOR_QUANTILE = 0.1  # a constant feature's error scale: this quantile of the varying features' standard deviations


def scaled(std: Sequence[float]) -> np.ndarray:
    """The standard deviations a model normalises with: a constant feature's (``<= CONSTANT_STD``) replaced by 1."""
    sd = np.asarray(std, np.float64)
    return np.where(sd > CONSTANT_STD, sd, 1.0)


def error_scale(std: Sequence[float]) -> np.ndarray:
    """Each feature's unit for the detection error (``core.scoring``: residuals divided by it, then squared): its
    standard deviation, so every feature counts in its own spread whatever its units (issue #55: in original units
    the server machines' channels, min-max scaled, weigh 1e-10 to 0.08 each and one channel decides); a feature
    constant in training counts in units of the ``FLOOR_QUANTILE`` quantile of the varying features' deviations,
    so that its first move later (MSL's channel 0: -1 for 500 rows, then +1 inside the anomaly) still shows, without
    its deviation being divided by zero. With no varying feature: 1 (original units)."""
    sd = np.asarray(std, np.float64)
    varying = sd > CONSTANT_STD
    floor = float(np.quantile(sd[varying], FLOOR_QUANTILE)) if varying.any() else 1.0
    return np.where(varying, sd, floor)


def scaled_row_mse(residual: np.ndarray, scale: np.ndarray | None) -> np.ndarray:
    """Each window row's MSE over its ``F`` residuals (float64 ``[n, T, F]`` to ``[n, T]``), each feature's divided by
    its ``error_scale`` first (None: original units): a row's own error in the window (``landfall score --combine
    row``). A window's error (``scaled_mse``) is the mean of its rows'."""
    if scale is not None:
        residual = residual / scale
    return (residual ** 2).mean(axis=2)


def scaled_mse(residual: np.ndarray, scale: np.ndarray | None) -> np.ndarray:
    """Each window's MSE over its ``T x F`` residuals (float64 ``[n, T, F]``), each feature's divided by its
    ``error_scale`` first (None: original units): the one definition of a detection error (``core.scoring``), the
    mean of its rows' errors (``scaled_row_mse``)."""
    return scaled_row_mse(residual, scale).mean(axis=1)
