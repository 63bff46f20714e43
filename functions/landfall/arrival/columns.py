"""What every reader yields: float32 chunks of instances, shape (k, T, F); tables become them here."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from landfall.arrival.config import ConverterConfig

Chunks = Iterator[np.ndarray]


def columns_to_instances(columns: list[pa.Array], cfg: ConverterConfig) -> np.ndarray:
    """T*F columns (C order, t-major) of one batch of rows -> (rows, T, F); nulls become NaN."""
    # Stack columns (contiguous copies), then one transposing copy into row-major instances.
    stacked = np.vstack([(c.fill_null(float("nan")) if c.null_count else c).to_numpy(zero_copy_only=False)
                         for c in columns])
    return np.ascontiguousarray(stacked.T, dtype="<f4").reshape(-1, cfg.timesteps, cfg.features)
