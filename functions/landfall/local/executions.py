"""Cloud Run on one machine: the local operator runs the job executions that ``LocalJobs`` records.

On ``landfall up`` the arrival function runs with ``LANDFALL_JOBS_BACKEND=local``: a large object's
execution is recorded as ``<state>/cloudrun/executions/<execution>.json`` (``landfall.arrival.cloudrun``:
job, task count, env overrides) instead of being started on Cloud Run. Each operator tick
(``landfall.local.tfjob_controller``) plays Cloud Run's part for them, as it plays the training operator's for TFJobs:

- every task of a new execution starts at once (parallelism = task count) as its own process group:
  ``sys.executable -m landfall.arrival.task`` with the operator's environment, the execution's env
  overrides, and ``CLOUD_RUN_JOB``, ``CLOUD_RUN_EXECUTION``, ``CLOUD_RUN_TASK_INDEX``,
  ``CLOUD_RUN_TASK_COUNT`` and ``CLOUD_RUN_TASK_ATTEMPT`` as Cloud Run sets them;
- a task that exits non-zero (or dies by a signal) is started again up to ``max_retries`` times (the
  job's ``max_retries``, 3 in infra/); past that the execution is ``Failed``, after all tasks succeed
  ``Succeeded``;
- status: ``<execution>.status.json`` (state, per task attempts and exit codes); logs:
  ``<state>/logs/cloudrun/<execution>/task-<i>.log``, every attempt appended with a header;
- stopping the operator stops the running tasks; an unfinished execution found without its processes
  (the operator was restarted) starts its unfinished tasks again, as a new attempt.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, TextIO

from landfall.local import leash

log = logging.getLogger("landfall.local.executions")

TASK_COMMAND = (sys.executable, "-m", "landfall.arrival.task")
FINISHED = ("Succeeded", "Failed")


@dataclasses.dataclass
class Task:
    index: int
    attempt: int
    proc: subprocess.Popen[bytes]
    log: TextIO


@dataclasses.dataclass
class Running:
    record: dict[str, Any]
    status: dict[str, Any]
    tasks: dict[int, Task]


class LocalCloudRun:
    def __init__(self, state_dir: str | os.PathLike[str], env: dict[str, str] | None = None,
                 command: tuple[str, ...] | list[str] = TASK_COMMAND, max_retries: int = 3):
        self.root = Path(state_dir)
        self.env = dict(os.environ if env is None else env)
        self.command = list(command)
        self.max_retries = max_retries
        self.running: dict[str, Running] = {}
        self.finished: set[str] = set()  # not read again each tick

    @property
    def dir(self) -> Path:
        return self.root / "cloudrun" / "executions"

    def status_path(self, execution: str) -> Path:
        return self.dir / f"{execution}.status.json"

    def log_path(self, execution: str, index: int) -> Path:
        return self.root / "logs" / "cloudrun" / execution / f"task-{index}.log"

    def status(self, execution: str) -> dict[str, Any] | None:
        try:
            return json.loads(self.status_path(execution).read_text())
        except (FileNotFoundError, ValueError):
            return None

    def executions(self) -> list[str]:
        if not self.dir.is_dir():
            return []
        return sorted(p.name[:-len(".json")] for p in self.dir.glob("*.json") if not p.name.endswith(".status.json"))

    def _save(self, execution: str, status: dict[str, Any]) -> None:
        path = self.status_path(execution)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(status, indent=2))
        os.replace(tmp, path)

    # -- tasks -------------------------------------------------------------------------------------------
    def _start_task(self, execution: str, run: Running, index: int) -> None:
        record, tasks = run.record, run.status["tasks"]
        attempt = int(tasks[str(index)]["attempts"])
        env = {**self.env, **{k: str(v) for k, v in (record.get("env") or {}).items()},
               "CLOUD_RUN_JOB": str(record["job"]).rsplit("/", 1)[-1], "CLOUD_RUN_EXECUTION": execution,
               "CLOUD_RUN_TASK_INDEX": str(index), "CLOUD_RUN_TASK_COUNT": str(record["task_count"]),
               "CLOUD_RUN_TASK_ATTEMPT": str(attempt)}
        path = self.log_path(execution, index)
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(path, "a")  # noqa: SIM115 (kept open while the task runs)
        fh.write(f"=== task {index}/{record['task_count']} attempt {attempt}\n")
        fh.flush()
        proc = leash.popen(self.command, env=env, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        run.tasks[index] = Task(index, attempt, proc, fh)
        tasks[str(index)].update(attempts=attempt + 1, state="Running", pid=proc.pid, exitCode=None)

    def _begin(self, execution: str) -> None:
        record = json.loads((self.dir / f"{execution}.json").read_text())
        count = int(record["task_count"])
        status = self.status(execution) or {
            "name": record["name"], "state": "Running",
            "tasks": {str(i): {"attempts": 0, "state": "Pending", "exitCode": None} for i in range(count)}}
        run = Running(record, status, {})
        for i in range(count):
            if status["tasks"][str(i)]["state"] != "Succeeded":
                self._start_task(execution, run, i)
        status["state"] = "Running"
        self.running[execution] = run
        self._save(execution, status)
        log.info("execution %s: %d tasks running", execution, count, extra={"fields": {"execution": record["name"]}})

    def _poll(self, execution: str, run: Running) -> None:
        changed = False
        for index, task in list(run.tasks.items()):
            code = task.proc.poll()
            if code is None:
                continue
            changed = True
            task.log.close()
            del run.tasks[index]
            entry = run.status["tasks"][str(index)]
            entry["exitCode"] = code
            if code == 0:
                entry["state"] = "Succeeded"
            elif int(entry["attempts"]) <= self.max_retries:
                entry["state"] = "Retrying"
                self._start_task(execution, run, index)
            else:
                entry["state"] = "Failed"
        states = {t["state"] for t in run.status["tasks"].values()}
        if "Failed" in states:
            self._stop(run)
            run.status["state"] = "Failed"
        elif states == {"Succeeded"}:
            run.status["state"] = "Succeeded"
        if changed or run.status["state"] in FINISHED:
            self._save(execution, run.status)
        if run.status["state"] in FINISHED:
            level = logging.ERROR if run.status["state"] == "Failed" else logging.INFO
            log.log(level, "execution %s %s", execution, run.status["state"].lower(),
                    extra={"fields": {"execution": run.record["name"], "tasks": run.status["tasks"]}})
            del self.running[execution]
            self.finished.add(execution)

    def _stop(self, run: Running) -> None:
        for task in run.tasks.values():
            leash.stop_group(task.proc)
            with contextlib.suppress(OSError):
                task.log.close()
        run.tasks.clear()

    def tick(self) -> None:
        for execution in self.executions():
            if execution in self.finished:
                continue
            run = self.running.get(execution)
            if run is not None:
                self._poll(execution, run)
                continue
            status = self.status(execution)
            if status is None or status.get("state") not in FINISHED:
                self._begin(execution)
            else:
                self.finished.add(execution)

    def stop_all(self) -> None:
        for run in self.running.values():
            self._stop(run)
        self.running.clear()
