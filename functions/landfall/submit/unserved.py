"""A job whose model no verdict can serve trains it without GPUs (issue #55).

A dataset scored by each row's own error (spec ``shape.window.combine: row``, the trainer's ``--combine row``) and
without a labelled set (``--labelled``) is served the fixed choice for rows, the nearest neighbour, whatever its job
trains (``landfall.core.rules.series_windows.fixed_for_rows``, ``trainer.judging.selection.basis``; docs/benchmarks.md,
"Scored by rows"). Its model is still trained: it is recorded, warm-starts the next job and competes as soon as the
spec names a labelled set. But GPUs held for a model that cannot be served are money spent for nothing, so such a job
is rendered with ``gpus_per_worker`` 0 and one worker (the dense model trains on a CPU in seconds to minutes), unless
the dataset's spec sets ``resources.gpus_per_worker`` (or ``resources.workers``) itself: what a spec says is kept.
A job that selects by loss (``--select loss``) serves its model, so it keeps its GPUs.

The decision reads the trainer flags the job renders (the deployment's ``LANDFALL_TRAINER_ARGS``, then the spec's),
the last of each as argparse takes it, so it is what the trainer will do.
"""

from __future__ import annotations

import dataclasses

from landfall.core.artifacts.specs import DatasetSpec
from landfall.core.rules.series_windows import MEAN, fixed_for_rows
from landfall.submit.config import JobConfig
from landfall.submit.sufficient import flag_value

DETECTION = "detection"  # the trainer's --select default: the candidate that detects best is served


def unservable(cfg: JobConfig) -> bool:
    """Whether the model the job ``cfg`` renders can never be served by its verdict."""
    args = cfg.trainer_args
    return ((flag_value(args, "--select") or DETECTION) == DETECTION
            and fixed_for_rows(flag_value(args, "--combine") or MEAN, bool(flag_value(args, "--labelled"))))


def without_gpus(cfg: JobConfig, spec: DatasetSpec) -> JobConfig:
    """``cfg`` on CPUs and one worker when its model is unservable and ``spec`` does not set the resources itself."""
    if not unservable(cfg) or "gpus_per_worker" in spec.resources:
        return cfg
    workers = cfg.workers if "workers" in spec.resources else 1
    if (cfg.gpus_per_worker, cfg.workers) == (0, workers):
        return cfg
    return dataclasses.replace(cfg, gpus_per_worker=0, workers=workers)


def why(cfg: JobConfig) -> str | None:
    """One line for the job's log when its model is unservable: what it runs on, and what would change that."""
    if not unservable(cfg):
        return None
    if cfg.gpus_per_worker:
        return (f"its model cannot be served (rows scored by their own errors, no labelled set: the verdict serves the "
                f"nearest neighbour), yet the spec asks for {cfg.gpus_per_worker} GPU(s) per worker; "
                "resources.gpus_per_worker: 0 trains it on CPUs")
    return ("its model cannot be served (rows scored by their own errors, no labelled set: the verdict serves the "
            f"nearest neighbour), so it trains without GPUs on {cfg.workers} worker(s); a labelled set "
            "(verdict.labelled) or resources.gpus_per_worker brings them back")
