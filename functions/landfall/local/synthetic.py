"""Seed-shaped synthetic data: N x T x F multivariate time series (the seed's 36 x 10 by default).

Each feature is a sum of sinusoids plus a trend and noise; an instance's channels share its random phases
(each channel at a fixed offset, as the channels of one machine move together), so a model has something to
learn; a few instances are anomalous windows (a spike or level shift), which an autoencoder reconstructs badly.
"""

from __future__ import annotations

import numpy as np


def time_series(n: int, timesteps: int = 36, features: int = 10, seed: int = 0,
                anomaly_fraction: float = 0.01) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(timesteps, dtype=np.float32)[None, :, None]
    out = np.zeros((n, timesteps, features), dtype=np.float32)
    for period in (6.0, 12.0, 36.0):
        amp = rng.uniform(0.2, 1.0, size=(1, 1, features)).astype(np.float32)
        # One machine's channels move together: each instance has one phase per period, each channel a fixed
        # offset from it (as sensors on one shaft or one circuit do), plus a little phase jitter of its own.
        offset = rng.uniform(0, 2 * np.pi, size=(1, 1, features)).astype(np.float32)
        phase = (rng.uniform(0, 2 * np.pi, size=(n, 1, 1)) + offset
                 + rng.normal(0, 0.1, size=(n, 1, features))).astype(np.float32)
        out += amp * np.sin(2 * np.pi * t / period + phase)
    out += rng.normal(0, 0.02, size=(n, 1, features)).astype(np.float32) * t  # trend
    out += rng.normal(0, 0.1, size=out.shape).astype(np.float32)  # noise
    k = int(n * anomaly_fraction)
    if k:
        idx = rng.choice(n, size=k, replace=False)
        at = rng.integers(0, timesteps, size=k)
        for i, s in zip(idx, at, strict=True):
            out[i, s:, rng.integers(features)] += rng.choice([-1, 1]) * rng.uniform(2, 4)
    return out
