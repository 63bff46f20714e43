"""``python -m landfall.arrival.task``: one task of a ranged conversion (a Cloud Run job task, or a local process).

Environment: ``CLOUD_RUN_TASK_INDEX``, ``CLOUD_RUN_TASK_COUNT`` (set by Cloud Run); ``LANDFALL_SOURCE_BUCKET``
(empty: ``LANDFALL_SOURCE_NAME`` is a local path), ``LANDFALL_SOURCE_NAME``, ``LANDFALL_SOURCE_GENERATION``
(the execution's overrides), or ``LANDFALL_COMPACT_BUCKET`` and ``LANDFALL_COMPACT_DATASET`` (an execution
the function started to compact the dataset past the thresholds, ``landfall.arrival.compaction``);
optionally ``LANDFALL_TASK_OUT`` and ``LANDFALL_TASK_DATASET`` (``landfall convert
--tasks``: an output folder instead of the arrival's, and nothing is published). The converter's settings
come from ``ConverterConfig.load()`` (``LANDFALL_*``).

Exit 0 when the task is done: its part written, the manifest committed (and published), or the arrival
rejected for good or superseded (a retry would not help). Exit 75 on a temporary error, so Cloud Run
retries the task (``max_retries``). Logs are JSON lines (``landfall.core.logs``); the last one carries the
task's peak RSS.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from landfall.arrival import ranged
from landfall.arrival.config import ConverterConfig, with_spec
from landfall.core import logs
from landfall.core.contracts import layout
from landfall.core.contracts.layout import Layout
from landfall.core.contracts.messages import Manifest
from landfall.core.errors import BadInput, TemporaryError
from landfall.core.services.storage import Storage

log = logging.getLogger("landfall.arrival.task")
EX_TEMPFAIL = 75


def peak_rss_mib() -> float | None:
    try:
        with open("/proc/self/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        return None


def publisher() -> Callable[[Manifest], Any]:
    """What follows a committed manifest, as after an in-process conversion: ``handler.after_conversion``
    (retract older generations, publish the training request). Imported only by the committer's caller."""
    from landfall.arrival.handler import after_conversion

    return after_conversion


def spec_config(cfg: ConverterConfig, storage: Storage, env: dict[str, str]) -> ConverterConfig:
    """The task converts as the function that dispatched it would have: with the dataset's spec over ``cfg``.
    The function checked the spec before dispatching; one made unusable since fails the task (``BadInput``)."""
    bucket, lay = env.get("LANDFALL_SOURCE_BUCKET", ""), Layout.load(env)
    if not bucket:  # a local file (tests, a workstation): no bucket, no spec
        return cfg
    dataset = env.get("LANDFALL_TASK_DATASET") or layout.dataset_of(env["LANDFALL_SOURCE_NAME"], lay)
    return with_spec(cfg, storage, bucket, dataset, lay) if dataset else cfg


REQUIRED = ("LANDFALL_SOURCE_NAME", "LANDFALL_SOURCE_GENERATION")  # a conversion's; a compaction needs its own


def parser() -> argparse.ArgumentParser:
    """No arguments: a task is configured by its environment (the module's docstring). ``--help`` says so, and is
    how the converter image's build checks that its entry point imports (tests/infra/test_images.py)."""
    return argparse.ArgumentParser(prog="python -m landfall.arrival.task", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def main(env: dict[str, str] | None = None, argv: list[str] | None = None) -> int:
    parser().parse_args([] if argv is None and env is not None else argv)
    env = dict(os.environ if env is None else env)
    logs.setup()
    missing = [name for name in REQUIRED if not env.get(name)]
    if missing and not env.get("LANDFALL_COMPACT_DATASET"):  # a deploy's mistake: one line, and no retry helps
        log.error("landfall.arrival.task: %s not set: a task converts the object its execution names "
                  "(landfall.arrival.cloudrun sets them as the execution's overrides)", ", ".join(missing))
        return 2
    index, count = int(env.get("CLOUD_RUN_TASK_INDEX", "0")), int(env.get("CLOUD_RUN_TASK_COUNT", "1"))
    out = env.get("LANDFALL_TASK_OUT") or None
    fields: dict[str, Any] = {"task": index, "tasks": count}
    if env.get("LANDFALL_COMPACT_DATASET"):
        return compact_task(env)
    try:
        cfg = ConverterConfig.load(env)
        storage = Storage(cfg.project, retry_deadline_s=cfg.storage_retry_s)
        cfg = spec_config(cfg, storage, env)
        result = ranged.run_task(
            storage, cfg, bucket=env.get("LANDFALL_SOURCE_BUCKET", ""), name=env["LANDFALL_SOURCE_NAME"],
            generation=int(env["LANDFALL_SOURCE_GENERATION"]), index=index, count=count,
            dataset=env.get("LANDFALL_TASK_DATASET") or None, out=out,
            on_committed=None if out else publisher())
    except BadInput as exc:  # the dataset's spec, changed since the function dispatched the task
        log.error("task %d of %d: %s", index, count, exc, extra={"fields": fields})
        return 1
    except TemporaryError as exc:
        log.warning("task %d of %d: temporary failure, the task will be retried: %s", index, count, exc,
                    extra={"fields": {**fields, "peak_rss_mib": peak_rss_mib()}})
        return EX_TEMPFAIL
    fields.update(outcome=result.outcome, instances=result.instances, peak_rss_mib=peak_rss_mib())
    log.info("task %d of %d: %s", index, count, result.outcome, extra={"fields": fields})
    return 0


def compact_task(env: dict[str, str]) -> int:
    """Compacts ``LANDFALL_COMPACT_DATASET`` of ``LANDFALL_COMPACT_BUCKET`` if past the thresholds."""
    from landfall.arrival import compaction

    bucket, dataset = env.get("LANDFALL_COMPACT_BUCKET", ""), env["LANDFALL_COMPACT_DATASET"]
    try:
        cfg = ConverterConfig.load(env)
        storage = Storage(cfg.project, retry_deadline_s=cfg.storage_retry_s)
        if not compaction.should_compact(storage, bucket, dataset):
            log.info("compaction of %s: below the thresholds", dataset, extra={"dataset": dataset})
            return 0
        result = compaction.compact(storage, bucket, dataset, cfg.shard_target_bytes)
    except TemporaryError as exc:
        log.warning("compaction of %s: temporary failure, retried: %s", dataset, exc, extra={"dataset": dataset})
        return EX_TEMPFAIL
    log.info("compaction of %s: %s", dataset, result.detail,
             extra={"dataset": dataset, "fields": {"snapshot": result.snapshot, "shards": result.shards,
                                                   "arrivals": result.arrivals, "dropped": result.dropped}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
