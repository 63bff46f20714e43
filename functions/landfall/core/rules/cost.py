"""What a job's GPUs cost: GPU-seconds and an estimate in USD from ``landfall.core.rules.accelerators.prices()``.

GPU-seconds are workers x GPUs per worker x the job's wall time (its first worker's start to its end). The
trainer's chief records them in ``metrics.json`` (``gpu_seconds``, ``accelerator``, ``estimated_cost``) and in
the result message; a job that ended without a chief to do so is estimated from its start and end times and
its resources (``cost_basis: job_object``), and one whose object is gone as well from the times its
``metrics.json`` holds (``metrics_times``) or from its release to when it was found finished, never past its
deadline (``released_to_found_ended``, an upper bound); ``landfall.submit.spend`` says which. The price table
is a stated default (see ``landfall.core.rules.accelerators``); an accelerator it does not price costs ``None``
(unknown), not 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from landfall.core.rules import accelerators
from landfall.core.rules.timestamps import epoch

BASES = ("chief", "job_object", "metrics_times", "released_to_found_ended")


def gpu_seconds(workers: int, gpus_per_worker: int, wall_s: float) -> float:
    return round(max(0, workers) * max(0, gpus_per_worker) * max(0.0, wall_s), 3)


def estimated_cost(seconds: float | None, accelerator: str, env: Mapping[str, str] | None = None) -> float | None:
    """USD for ``seconds`` GPU-seconds of ``accelerator``; 0 for no GPU time; ``None`` when it has no price."""
    if seconds is None:
        return None
    if not seconds:
        return 0.0
    price = accelerators.prices(env).get(accelerator)
    return None if price is None else round(seconds / 3600.0 * price, 6)


def fields(workers: int, gpus_per_worker: int, wall_s: float, accelerator: str, basis: str,
           env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The cost fields a ``metrics.json`` and a result message carry."""
    seconds = gpu_seconds(workers, gpus_per_worker, wall_s)
    return {"gpu_seconds": seconds, "accelerator": accelerator or None,
            "estimated_cost": estimated_cost(seconds, accelerator, env), "cost_basis": basis}


def wall_s(started_at: Any, ended_at: Any) -> float | None:
    start, end = epoch(started_at), epoch(ended_at)
    return None if start is None or end is None else max(0.0, end - start)


def queue_and_training(created_at: Any, started_at: Any, ended_at: Any, now: float) -> dict[str, Any]:
    """A job's queued time apart from its training time (issue #41): ``queued_s`` from the job object's creation (or
    its release) to the chief's first start (``metrics.json`` ``started_at``), or until ``now`` while no worker has
    started (``waiting``: Kueue holds it suspended until capacity is provisioned, or its pods wait for nodes);
    ``training_s`` from that start to the end (or ``now``). Only ``training_s`` holds GPUs: ``gpu_seconds`` starts at
    the same ``started_at``, so queued time is never costed."""
    created, started, ended = epoch(created_at), epoch(started_at), epoch(ended_at)
    queued = None if created is None else max(0.0, (started if started is not None else now) - created)
    return {"queued_s": None if queued is None else round(queued, 1), "waiting": started is None,
            "training_s": None if started is None else round(max(0.0, (ended or now) - started), 1)}
