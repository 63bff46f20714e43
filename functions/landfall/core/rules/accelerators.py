"""The GPU accelerators a job may ask for, and what an hour of each costs by default.

Names are GKE's ``cloud.google.com/gke-accelerator`` values (the Compute Engine GPU names, listed at
https://cloud.google.com/compute/docs/gpus, read 2026-12-01). A dataset spec or ``LANDFALL_ACCELERATOR`` naming
anything else is refused: a job asking for an accelerator no node pool has would wait in Kueue for ever.

The prices are a stated default, not a quote: rough on-demand USD per GPU-hour in us-central1 for the GPU
alone (machine, memory and disk not included), to be replaced with your own (committed-use, spot, another
region) through ``LANDFALL_GPU_PRICES`` (a JSON object of name -> USD per GPU-hour, merged over these). See
https://cloud.google.com/compute/gpus-pricing for the current list prices.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

DEFAULT_PRICES_USD_PER_GPU_HOUR: dict[str, float] = {
    "nvidia-tesla-t4": 0.35,
    "nvidia-tesla-p4": 0.60,
    "nvidia-tesla-p100": 1.46,
    "nvidia-tesla-v100": 2.48,
    "nvidia-l4": 0.56,
    "nvidia-tesla-a100": 2.93,
    "nvidia-a100-80gb": 3.93,
    "nvidia-h100-80gb": 11.06,
    "nvidia-h100-mega-80gb": 11.75,
    "nvidia-h200-141gb": 13.00,
    "nvidia-b200": 15.00,
}
ACCELERATORS: tuple[str, ...] = tuple(DEFAULT_PRICES_USD_PER_GPU_HOUR)
PRICES_ENV = "LANDFALL_GPU_PRICES"


def prices(env: Mapping[str, str] | None = None) -> dict[str, float]:
    """The price table in force: the defaults, with ``LANDFALL_GPU_PRICES`` merged over them."""
    env = os.environ if env is None else env
    table = dict(DEFAULT_PRICES_USD_PER_GPU_HOUR)
    raw = env.get(PRICES_ENV, "").strip()
    if raw:
        try:
            extra = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{PRICES_ENV}: not JSON ({exc.msg})") from None
        if not isinstance(extra, dict) or not all(
                isinstance(k, str) and isinstance(v, int | float) and not isinstance(v, bool) and v >= 0
                for k, v in extra.items()):
            raise ValueError(f"{PRICES_ENV}: must be an object of accelerator name -> USD per GPU-hour (>= 0)")
        table.update({k: float(v) for k, v in extra.items()})
    return table


def known(name: str, env: Mapping[str, str] | None = None) -> bool:
    """Whether ``name`` is an accelerator Landfall can price (and so may schedule)."""
    return name in prices(env)
