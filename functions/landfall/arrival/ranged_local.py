"""Runs a ranged conversion as ``N`` local processes (``python -m landfall.arrival.task``), as a Cloud Run job
execution would run its tasks: same environment variables, and a task that exits non-zero is started again
(up to ``retries`` times, Cloud Run's ``max_retries``). ``landfall convert --tasks N`` and the benchmark use it.

A local source maps onto the task's (bucket, name, generation) as ``("", path, Storage.stat(path).generation)``:
the storage wrapper reads local paths like objects, and a file changed under the tasks is seen as superseded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from landfall.arrival import ranged_parts
from landfall.core.contracts.layout import Layout, split_gs
from landfall.core.contracts.messages import Manifest
from landfall.core.errors import NotFound
from landfall.core.services.storage import Storage, is_gs


@dataclasses.dataclass
class TaskRun:
    index: int
    attempts: int = 0
    returncode: int | None = None
    outcome: str | None = None
    peak_rss_mib: float | None = None


@dataclasses.dataclass
class LocalRun:
    manifest: Manifest | None
    rejection: dict[str, Any] | None
    tasks: list[TaskRun]
    wall_s: float


def task_env(src: str, out: str, count: int, dataset: str | None, storage: Storage) -> dict[str, str]:
    bucket, name = split_gs(src) if is_gs(src) else ("", src)
    return {"LANDFALL_SOURCE_BUCKET": bucket, "LANDFALL_SOURCE_NAME": name,
            "LANDFALL_SOURCE_GENERATION": str(storage.stat(src).generation), "CLOUD_RUN_TASK_COUNT": str(count),
            "LANDFALL_TASK_OUT": out, "LANDFALL_TASK_DATASET": dataset or ""}


def run_local(src: str, out: str, *, tasks: int, dataset: str | None = None, settings: dict[str, str] | None = None,
              storage: Storage | None = None, retries: int = 3, pin: bool = False) -> LocalRun:
    """Runs the ``tasks`` processes at once; returns the manifest (or the rejection) and each task's run.

    ``pin``: task i runs on CPU ``i mod cpus`` only (Linux), as a 1-vCPU Cloud Run task would (benchmarks).
    """
    storage = storage or Storage()
    env = {**os.environ, **(settings or {}), **task_env(src, out, tasks, dataset, storage)}
    runs = [TaskRun(i) for i in range(tasks)]
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="landfall-tasks-") as logs:
        procs: dict[int, subprocess.Popen] = {}

        def launch(run: TaskRun) -> None:
            run.attempts += 1
            log = open(Path(logs) / f"task-{run.index}-{run.attempts}.log", "w+b")  # noqa: SIM115
            procs[run.index] = subprocess.Popen([sys.executable, "-m", "landfall.arrival.task"], stdout=log,
                                                stderr=subprocess.STDOUT,
                                                env={**env, "CLOUD_RUN_TASK_INDEX": str(run.index)})
            log.close()
            if pin and hasattr(os, "sched_setaffinity"):
                cpus = sorted(os.sched_getaffinity(0))
                with contextlib.suppress(OSError):  # the process may have exited already
                    os.sched_setaffinity(procs[run.index].pid, {cpus[run.index % len(cpus)]})

        try:
            for run in runs:
                launch(run)
            while procs:
                time.sleep(0.02)
                for index, proc in list(procs.items()):
                    rc = proc.poll()
                    if rc is None:
                        continue
                    del procs[index]
                    run = runs[index]
                    run.returncode = rc
                    _read_log(run, Path(logs) / f"task-{index}-{run.attempts}.log")
                    if rc != 0 and run.attempts <= retries:
                        launch(run)
        finally:  # interrupted: stop the tasks this call started
            for proc in procs.values():
                proc.kill()
                proc.wait()
    wall = time.perf_counter() - start
    bucket, name = split_gs(src) if is_gs(src) else ("", src)
    job = ranged_parts.resolve(bucket, name, 0, tasks, dataset, out, Layout())
    manifest = rejection = None
    try:
        manifest = Manifest.from_json(storage.read_bytes(job.manifest), job.manifest)
    except NotFound:
        with contextlib.suppress(NotFound):
            rejection = json.loads(storage.read_bytes(job.marker))["rejection"]
    return LocalRun(manifest, rejection, runs, wall)


def _read_log(run: TaskRun, path: Path) -> None:
    """The task's last JSON log line says its outcome and peak RSS; other lines are passed on to stderr."""
    for line in path.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            print(line, file=sys.stderr)
            continue
        if not isinstance(entry, dict):
            continue
        if entry.get("severity") in ("ERROR", "CRITICAL") or entry.get("exception"):
            print(entry.get("message"), entry.get("exception", ""), file=sys.stderr)
        run.outcome = entry.get("outcome", run.outcome)
        run.peak_rss_mib = entry.get("peak_rss_mib", run.peak_rss_mib)
