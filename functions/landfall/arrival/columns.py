"""What every reader yields: float32 chunks of instances, shape (k, T, F); tables become them here."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from landfall.arrival.config import ConverterConfig
from landfall.core.errors import BadInput

Chunks = Iterator[np.ndarray]
F32_MAX = float(np.finfo(np.float32).max)


def out_of_range(value: float, where: str = "") -> BadInput:
    return BadInput("out_of_range", f"a value{where} is {value:g}, out of float32 range (|x| <= {F32_MAX:.4g}): "
                    "it would be stored as Inf; scale the data")


def narrowed(values: np.ndarray) -> np.ndarray:
    """``values`` as little-endian float32; a finite value past float32's range is refused (``out_of_range``),
    never stored as Inf (and so never dropped as non-finite). Checked only when the float32 result holds a
    non-finite value, which costs one pass over the chunk."""
    with np.errstate(over="ignore"):  # reported below
        out = np.ascontiguousarray(values, dtype="<f4")
    if values.dtype.itemsize > 4 and not np.isfinite(out).all():
        over = np.isfinite(values) & ~np.isfinite(out)
        if over.any():
            raise out_of_range(float(values[over][0]))
    return out


def columns_to_instances(columns: list[pa.Array], cfg: ConverterConfig) -> np.ndarray:
    """T*F columns (C order, t-major) of one batch of rows -> (rows, T, F); nulls become NaN."""
    # Stack columns (contiguous copies), then one transposing copy into row-major instances.
    stacked = np.vstack([(c.fill_null(float("nan")) if c.null_count else c).to_numpy(zero_copy_only=False)
                         for c in columns])
    return narrowed(stacked.T).reshape(-1, cfg.timesteps, cfg.features)
