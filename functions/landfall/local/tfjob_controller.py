"""The local operator: runs the TFJobs recorded by the ``local`` backend, as the training operator would.

Started by ``landfall operator --state DIR`` (``landfall up`` starts it as a subprocess with the same
environment as the functions; SIGTERM or SIGINT stops it: it stops its replicas' process groups and exits
0, leaving no process behind). Each tick (``--poll-s``, default 0.5 s) it:

1. releases the next job of every dataset whose requests wait and whose job ended
   (``landfall.submit.coalesce.reconcile``);
2. starts every released TFJob that is not finished and not running here: one process per ``Worker``
   replica, the container's ``command`` + ``args`` (``python`` maps to this interpreter, so the image's
   ``python -m trainer.task`` runs as ``sys.executable -m trainer.task``), the operator's environment
   plus the container's ``env`` plus ``TF_CONFIG`` built as the training operator builds it:
   ``{"cluster": {"worker": ["127.0.0.1:<port>", ...]}, "task": {"type": "worker", "index": i},
   "environment": "cloud"}`` with free loopback ports. Each replica is its own process group; its
   stdout and stderr go to ``DIR/logs/<job>/worker-<i>.log`` (every attempt appended, with a header);
3. applies ``restartPolicy: ExitCode`` as the training operator does: exit 0 of worker 0 succeeds the
   job (the other workers get ``SUCCESS_GRACE_S`` to finish, then ``cleanPodPolicy: Running`` stops
   them); an exit code 1-127 fails it (permanent); 128 and up, or death by a signal, restarts *all*
   replicas (new ports, the trainer resumes from its BackupAndRestore backup) until ``backoffLimit``
   restarts were spent (then ``Failed``, reason ``BackoffLimitExceeded``);
4. enforces ``activeDeadlineSeconds`` from the job's first start (``Failed``, ``DeadlineExceeded``);
5. stops the replicas of a job that was suspended or deleted;
6. plays Cloud Run for the arrival stage's large objects: runs the job executions recorded in the same
   state folder (``landfall.local.executions``: one process per task, ``python -m landfall.arrival.task``).

Status is recorded in the TFJob object as the training operator records it: ``status.conditions``
(``Created``, ``Running``, ``Restarting``, ``Succeeded``, ``Failed``, ``Suspended``; one entry per type,
updated in place, at most one of Running/Restarting true), ``startTime``, ``completionTime``,
``replicaStatuses.Worker`` (active/succeeded/failed), plus ``status.local`` (restarts, and per replica
pid, port, log path and exit code) for ``landfall status`` and the tests. A job found ``Running`` with no
replicas here (the operator was stopped) is restarted, without counting against ``backoffLimit``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from landfall.core.errors import LandfallError, NotFound
from landfall.core.rules import timestamps
from landfall.core.services.storage import Storage
from landfall.local import leash
from landfall.local.emulators import free_ports
from landfall.submit import coalesce, engine, jobmeta, tfjob
from landfall.submit.backends.local import LocalBackend, k8s_time
from landfall.submit.config import JobConfig

log = logging.getLogger("landfall.local.tfjob_controller")

SUCCESS_GRACE_S = 15.0


def command_of(container: dict[str, Any]) -> list[str]:
    """The container's command and args on this machine (the image's entry point is ``python -m trainer.task``)."""
    command = list(container.get("command") or ["python", "-m", "trainer.task"])
    if Path(command[0]).name in ("python", "python3"):
        command[0] = sys.executable
    return command + [str(a) for a in container.get("args") or []]


def tf_config(ports: list[int], index: int) -> str:
    return json.dumps({"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                       "task": {"type": "worker", "index": index}, "environment": "cloud"})


@dataclasses.dataclass
class Replica:
    index: int
    port: int
    proc: subprocess.Popen[bytes]
    log: TextIO
    log_path: Path


@dataclasses.dataclass
class RunningJob:
    name: str
    uid: str
    replicas: list[Replica]
    started: float  # monotonic, of this attempt
    deadline_from: float  # wall-clock epoch of the job's first start
    restarts: int
    success_at: float | None = None


class Operator:
    engine_name = "tfjob"

    def __init__(self, state_dir: str | os.PathLike[str], namespace: str = "landfall-training",
                 config: JobConfig | None = None, storage: Storage | None = None, poll_s: float = 0.5,
                 env: dict[str, str] | None = None):
        self.backend = LocalBackend(state_dir, namespace, self.engine_name)
        self.state_dir = Path(state_dir)
        self.config = config
        self.storage = storage
        self.poll_s = poll_s
        self.env = dict(os.environ if env is None else env)
        self.running: dict[str, RunningJob] = {}
        self.stopping = threading.Event()
        from landfall.local.executions import LocalCloudRun

        self.cloud_run = LocalCloudRun(state_dir, self.env)

    # -- status -----------------------------------------------------------------------------------------
    def _set_condition(self, job: dict[str, Any], kind: str, reason: str, message: str,
                       extra: dict[str, Any] | None = None, status: str = "True") -> dict[str, Any]:
        name = jobmeta.name_of(job)
        current = self.backend.get(name)
        conds = [dict(c) for c in tfjob.conditions(current)]
        now = k8s_time()
        exclusive = {"Running": ("Restarting",), "Restarting": ("Running",),
                     "Succeeded": ("Running", "Restarting"), "Failed": ("Running", "Restarting")}
        for c in conds:
            if c["type"] in exclusive.get(kind, ()) and c.get("status") == "True" and status == "True":
                c.update(status="False", lastUpdateTime=now, lastTransitionTime=now)
        for c in conds:
            if c["type"] == kind:
                if c.get("status") != status:
                    c["lastTransitionTime"] = now
                c.update(status=status, reason=reason, message=message, lastUpdateTime=now)
                break
        else:
            conds.append({"type": kind, "status": status, "reason": reason, "message": message,
                          "lastUpdateTime": now, "lastTransitionTime": now})
        patch: dict[str, Any] = {"conditions": conds, **(extra or {})}
        if kind != "Suspended" or status == "True":
            level = logging.ERROR if kind == "Failed" else logging.INFO
            log.log(level, "%s: %s (%s) %s", name, kind, reason, message,
                    extra={"job": name, "dataset": current["metadata"].get("labels", {}).get(jobmeta.DATASET_LABEL),
                           "fields": {"condition": kind, "reason": reason}})
        return self.backend.patch_status(name, patch)

    def _local_status(self, rj: RunningJob) -> dict[str, Any]:
        return {"local": {"restarts": rj.restarts, "replicas": [
            {"index": r.index, "pid": r.proc.pid, "port": r.port, "log": str(r.log_path),
             "exitCode": r.proc.returncode} for r in rj.replicas]}}

    # -- replicas ---------------------------------------------------------------------------------------
    def _start(self, job: dict[str, Any], restarts: int, reason: str) -> None:
        name = jobmeta.name_of(job)
        worker = job["spec"]["tfReplicaSpecs"]["Worker"]
        n = int(worker.get("replicas", 1))
        containers = worker["template"]["spec"]["containers"]
        container = next((c for c in containers if c.get("name") == jobmeta.CONTAINER), containers[0])
        command = command_of(container)
        ports = free_ports(n)
        status = job.get("status") or {}
        if not status.get("startTime"):
            status = self._set_condition(job, "Created", "TFJobCreated", f"TFJob {name} is created.")["status"]
        replicas = []
        for i in range(n):
            env = dict(self.env)
            env.update({e["name"]: str(e.get("value", "")) for e in container.get("env") or [] if "name" in e})
            if container.get("name") == jobmeta.CONTAINER:  # the training operator sets TF_CONFIG on this name only
                env["TF_CONFIG"] = tf_config(ports, i)
            replicas.append(self._spawn(name, i, ports[i], command, env,
                                        f"attempt {restarts + 1} ({reason}) TF_CONFIG={env.get('TF_CONFIG')}"))
        start_time = status.get("startTime") or k8s_time()
        first = _epoch(start_time)
        rj = RunningJob(name, job["metadata"].get("uid", ""), replicas, time.monotonic(), first, restarts)
        self.running[name] = rj
        extra = {"startTime": start_time, "replicaStatuses": {"Worker": {"active": n, "succeeded": 0, "failed": 0}},
                 **self._local_status(rj)}
        self._set_condition(job, "Running", "TFJobRunning", f"TFJob {name} is running ({reason}).", extra)

    def _spawn(self, name: str, index: int, port: int, command: list[str], env: dict[str, str],
               header: str) -> Replica:
        """One replica (or pod): its own process group, stdout and stderr appended to its log after ``header``."""
        env.setdefault("LANDFALL_JOB_NAME", name)
        path = self.backend.log_path(name, index)
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(path, "a")  # noqa: SIM115 (kept open while the replica runs)
        fh.write(f"=== {k8s_time()} {header}\n")
        fh.flush()
        proc = leash.popen(command, env=env, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        return Replica(index, port, proc, fh, path)

    def _stop(self, rj: RunningJob) -> None:
        threads = [threading.Thread(target=leash.stop_group, args=(r.proc,)) for r in rj.replicas]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for r in rj.replicas:
            with contextlib.suppress(OSError):
                r.log.close()
        self.running.pop(rj.name, None)

    def _finish(self, job: dict[str, Any], rj: RunningJob, kind: str, reason: str, message: str) -> None:
        self._stop(rj)
        codes = [r.proc.returncode for r in rj.replicas]
        extra = {"completionTime": k8s_time(),
                 "replicaStatuses": {"Worker": {"active": 0, "succeeded": sum(c == 0 for c in codes),
                                                "failed": sum(c not in (0, None) for c in codes)}},
                 **self._local_status(rj)}
        self._set_condition(job, kind, reason, message, extra)
        self._compact(job)

    def _compact(self, job: dict[str, Any]) -> None:
        """As the Cloud Run job does past its thresholds: compacts the dataset of a job that just ended."""
        dataset = job["metadata"].get("labels", {}).get(jobmeta.DATASET_LABEL)
        if self.config is None or self.storage is None or not self.config.bucket or not dataset:
            return
        try:
            from landfall.arrival.config import ConverterConfig
            from landfall.local import compactor

            compactor.run(self.storage, self.config.bucket, dataset, ConverterConfig.load().shard_target_bytes,
                           policy=self.config.concurrency, if_needed=True)
        except Exception:  # compaction is an optimisation: it must never stop the jobs this operator runs
            log.exception("compacting %s failed (will retry after its next job)", dataset)

    def _poll(self, job: dict[str, Any], rj: RunningJob) -> None:
        name = rj.name
        run = job["spec"].get("runPolicy") or {}
        deadline = run.get("activeDeadlineSeconds")
        if deadline is not None and time.time() - rj.deadline_from > float(deadline):
            self._finish(job, rj, "Failed", "DeadlineExceeded",
                         f"TFJob {name} has failed because it was active longer than {deadline}s.")
            return
        codes = {r.index: r.proc.poll() for r in rj.replicas}
        for index, code in sorted(codes.items()):
            if code is None or code == 0:
                continue
            if 1 <= code <= 127:
                self._finish(job, rj, "Failed", "TFJobFailed",
                             f"TFJob {name} has failed because worker-{index} exited with code {code} (permanent).")
                return
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
            limit = int(run.get("backoffLimit", 0) if run.get("backoffLimit") is not None else 6)
            if rj.restarts >= limit:
                self._finish(job, rj, "Failed", "BackoffLimitExceeded",
                             f"TFJob {name} has failed: worker-{index} {how} and the backoff limit {limit} is reached.")
                return
            self._set_condition(job, "Restarting", "TFJobRestarting",
                                f"TFJob {name} is restarting because worker-{index} {how} (retryable).",
                                self._local_status(rj))
            self._stop(rj)
            self._start(self.backend.get(name), rj.restarts + 1, f"worker-{index} {how}")
            return
        if codes.get(0) == 0 and rj.success_at is None:
            rj.success_at = time.monotonic()
        all_done = all(c == 0 for c in codes.values())  # non-zero codes were handled above
        if all_done or (rj.success_at is not None and time.monotonic() - rj.success_at > SUCCESS_GRACE_S):
            self._finish(job, rj, "Succeeded", "TFJobSucceeded", f"TFJob {name} successfully completed.")

    # -- the loop ---------------------------------------------------------------------------------------
    def tick(self) -> None:
        if self.config is not None and self.storage is not None:
            try:
                coalesce.reconcile(self.backend, self.storage, self.config)
            except LandfallError as exc:
                log.warning("reconcile failed (will retry): %s", exc)
            except Exception:  # a bug or an odd object must not stop the jobs this operator runs
                log.exception("reconcile failed (will retry)")
        if self.config is not None and self.storage is not None and os.environ.get("PUBSUB_EMULATOR_HOST"):
            try:  # as the reconciler does: announce the jobs that ended with no chief to do so
                from landfall.core.services.pubsub import PubSub
                from landfall.reconcile import announce

                if getattr(self, "_pubsub", None) is None:
                    self._pubsub = PubSub(self.config.project)
                announce.announce_finished(self.backend, self.storage, self._pubsub, self.config)
            except Exception as exc:  # a missing topic or an odd record must not stop the jobs
                log.debug("announcing results failed (will retry): %s", exc)
        try:
            self.cloud_run.tick()
        except Exception:  # an odd record must not stop the TFJobs this operator runs
            log.exception("local Cloud Run tick failed (will retry)")
        jobs = {jobmeta.name_of(j): j for j in self.backend.list()}
        for name, rj in list(self.running.items()):
            job = jobs.get(name)
            if job is None or job["metadata"].get("uid") != rj.uid:
                log.info("%s was deleted; stopping its replicas", name, extra={"job": name})
                self._stop(rj)
            elif engine.is_suspended(job):
                self._stop(rj)
                self._suspended(job)
        for name, job in jobs.items():
            try:
                if engine.is_finished(job):
                    self._expire(job)
                else:
                    self._tick_job(name, job)
            except NotFound:
                continue  # deleted meanwhile

    def _suspended(self, job: dict[str, Any]) -> None:
        self._set_condition(job, "Suspended", "TFJobSuspended", f"TFJob {jobmeta.name_of(job)} is suspended.")

    @staticmethod
    def finished_at(job: dict[str, Any]) -> float | None:
        """When the job finished (``status.completionTime``, else its finishing condition's transition)."""
        status = job.get("status") or {}
        if status.get("completionTime"):
            return _epoch(str(status["completionTime"]))
        for c in engine.conditions(job):
            if c.get("status") == "True" and c.get("type") in ("Succeeded", "Failed", "Completed"):
                return _epoch(str(c.get("lastTransitionTime") or ""))
        return None

    def _expire(self, job: dict[str, Any]) -> None:
        """``ttlSecondsAfterFinished``: the finished job is deleted that long after it finished (the TFJob's in
        ``spec.runPolicy``, the JobSet's in ``spec``), as the controllers do."""
        spec = job.get("spec") or {}
        ttl = spec.get("ttlSecondsAfterFinished", (spec.get("runPolicy") or {}).get("ttlSecondsAfterFinished"))
        done = self.finished_at(job)
        if ttl is not None and done is not None and time.time() - done >= float(ttl):
            name = jobmeta.name_of(job)
            log.info("%s: deleted %ss after it finished (ttlSecondsAfterFinished)", name, ttl, extra={"job": name})
            self.backend.delete(name)

    def _tick_job(self, name: str, job: dict[str, Any]) -> None:
        if tfjob.is_suspended(job):
            if not any(c["type"] == "Suspended" and c.get("status") == "True" for c in tfjob.conditions(job)):
                self._set_condition(job, "Suspended", "TFJobSuspended", f"TFJob {name} is suspended.")
            return
        if any(c["type"] == "Suspended" and c.get("status") == "True" for c in tfjob.conditions(job)):
            job = self._set_condition(job, "Suspended", "TFJobResumed", f"TFJob {name} is resumed.", status="False")
        rj = self.running.get(name)
        if rj is None:
            status = job.get("status") or {}
            if status.get("startTime"):
                restarts = int((status.get("local") or {}).get("restarts", 0))
                self._set_condition(job, "Restarting", "OperatorRestarted",
                                    f"TFJob {name} had no running replicas on this machine; restarting them.")
                self._start(self.backend.get(name), restarts, "operator restarted")
            else:
                self._start(job, 0, "created")
            return
        self._poll(job, rj)

    def stop_all(self) -> None:
        self.cloud_run.stop_all()
        for rj in list(self.running.values()):
            self._stop(rj)

    def run(self) -> int:
        """Ticks until SIGTERM/SIGINT (or ``stopping`` is set), then stops every replica and returns 0."""
        pid_file = self.state_dir / "operator.pid"
        pid_file.write_text(str(os.getpid()))
        log.info("local operator watching %s", self.state_dir, extra={"fields": {"state": str(self.state_dir)}})
        try:
            while not self.stopping.is_set():
                try:
                    self.tick()
                except LandfallError as exc:
                    log.warning("operator tick failed (will retry): %s", exc)
                self.stopping.wait(self.poll_s)
        finally:
            self.stop_all()
            with contextlib.suppress(FileNotFoundError):
                pid_file.unlink()
            log.info("local operator stopped")
        return 0

    def install_signal_handlers(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stopping.set())


def _epoch(ts: str) -> float:
    found = timestamps.epoch(ts)
    return time.time() if found is None else found
