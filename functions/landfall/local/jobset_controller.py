"""The local JobSet controller: runs the JobSets the ``local`` backend records (``LANDFALL_ENGINE=jobset``), as
the JobSet controller, the Job controller and the kubelet would together.

``JobSetOperator`` is ``landfall.local.tfjob_controller.Operator`` (the loop, reconcile, announce, Cloud Run, logs,
SIGTERM) with the JobSet's semantics instead of the TFJob's:

- **Pods.** For each replicated job, ``replicas`` Jobs; for each Job, ``parallelism`` pods (Indexed), one
  process per index. A pod gets the container's ``env``, ``valueFrom.fieldRef`` of its labels resolved as the
  downward API does (``jobset.sigs.k8s.io/jobset-name``, ``replicatedjob-name``, ``job-index``,
  ``restart-attempt``), and ``JOB_COMPLETION_INDEX``; no ``TF_CONFIG`` (an operator's own is removed): the
  trainer builds it (``trainer.training.cluster``). The headless Service's DNS is played by ``LANDFALL_TF_ADDRESSES``:
  each pod host name ``<jobset>-<rjob>-<jobIndex>-<podIndex>.<subdomain>`` -> a free loopback port.
- **A failed pod** (exit code != 0; death by signal N reads as exit code 128+N, as a container's does) is
  matched against the Job's ``podFailurePolicy`` (``onExitCodes``, ``In``/``NotIn``, ``containerName``): a
  ``FailJob`` match fails the Job with reason ``PodFailurePolicy``; otherwise it counts against
  ``backoffLimit`` (Landfall renders 0; the local controller does not recreate single pods, so any counted
  failure fails the Job with reason ``BackoffLimitExceeded``). A Job past its ``activeDeadlineSeconds``
  (from its creation: each attempt's own) fails with ``DeadlineExceeded``.
- **A failed Job** is matched against the JobSet's ``failurePolicy.rules`` in order (``onJobFailureReasons``,
  ``targetReplicatedJobs``; an empty list matches all); no match applies ``RestartJobSet``. ``FailJobSet``:
  ``Failed`` (reason ``FailJobSetFailurePolicyAction``). ``RestartJobSet``: ``Failed`` (``ReachedMaxRestarts``)
  once ``status.restartsCountTowardsMax`` reached ``maxRestarts``, else every pod is stopped and recreated and
  ``status.restarts`` and ``restartsCountTowardsMax`` go up by one. ``RestartJobSetAndIgnoreMaxRestarts``
  counts ``restarts`` only. With no ``failurePolicy``, ``Failed`` (``FailedJobs``).
- **Success**: every Job of the ``successPolicy``'s target replicated jobs (``All``) or one (``Any``) complete
  (all indexes exited 0): ``Completed`` (``AllJobsCompleted``), the other pods are stopped.
- **Conditions** as the JobSet controller writes them (``metav1.Condition``): ``Completed``, ``Failed``,
  ``Suspended`` (``SuspendedJobs`` / ``ResumeJobs``), plus ``status.terminalState``, ``restarts``,
  ``restartsCountTowardsMax`` and ``replicatedJobsStatus``; ``status.local`` as for TFJobs.
- **TTL**: ``ttlSecondsAfterFinished`` after its ``Completed``/``Failed`` transition the JobSet is deleted
  (``Operator._expire``).

Reasons and messages: kubernetes-sigs/jobset ``pkg/constants/constants.go`` and
``pkg/controllers/failure_policy.go`` (main, read 2026-12-01); Job reasons: Kubernetes ``batch/v1``
(``PodFailurePolicy``, ``BackoffLimitExceeded``, ``DeadlineExceeded``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from typing import Any

from landfall.local.emulators import free_ports
from landfall.local.tfjob_controller import Operator, RunningJob, command_of
from landfall.submit import jobmeta, jobset
from landfall.submit.backends.local import k8s_time

log = logging.getLogger("landfall.local.tfjob_controller")

# kubernetes-sigs/jobset pkg/constants (main, read 2026-12-01)
COMPLETED = ("AllJobsCompleted", "jobset completed successfully")
FAILED_JOBS = ("FailedJobs", "jobset failed due to one or more job failures")
REACHED_MAX_RESTARTS = ("ReachedMaxRestarts", "jobset failed due to reaching max number of restarts")
FAIL_ACTION = ("FailJobSetFailurePolicyAction", "applying FailJobSet failure policy action")
SUSPENDED = ("SuspendedJobs", "jobset is suspended")
RESUMED = ("ResumeJobs", "jobset is resumed")


def exit_code(returncode: int) -> int:
    """A process's return code as a container's exit code (killed by signal N: 128 + N)."""
    return 128 - returncode if returncode < 0 else returncode


def pod_failure_action(job_spec: dict[str, Any], container: str, code: int) -> str:
    """The first ``podFailurePolicy`` rule matching a container's exit code: ``FailJob``, ``Ignore``,
    ``FailIndex`` or ``Count``; ``Count`` when none matches (the default)."""
    for rule in (job_spec.get("podFailurePolicy") or {}).get("rules") or []:
        on = rule.get("onExitCodes")
        if not on or on.get("containerName") not in (None, container):
            continue
        values = set(on.get("values") or [])
        if (code in values) == (on.get("operator") == "In"):
            return str(rule["action"])
    return "Count"


def jobset_action(spec: dict[str, Any], rjob: str, reason: str) -> str | None:
    """The JobSet's ``failurePolicy`` action for a Job of ``rjob`` that failed with ``reason`` (``None``: no
    failure policy, the JobSet fails)."""
    policy = spec.get("failurePolicy")
    if policy is None:
        return None
    for rule in policy.get("rules") or []:
        reasons, targets = rule.get("onJobFailureReasons") or [], rule.get("targetReplicatedJobs") or []
        if (not reasons or reason in reasons) and (not targets or rjob in targets):
            return str(rule["action"])
    return "RestartJobSet"


class JobSetOperator(Operator):
    engine_name = "jobset"

    # -- status -----------------------------------------------------------------------------------------
    def _condition(self, job: dict[str, Any], kind: str, reason: str, message: str, status: str = "True",
                   extra: dict[str, Any] | None = None) -> dict[str, Any]:
        name = jobmeta.name_of(job)
        current = self.backend.get(name)
        conds = [dict(c) for c in jobset.conditions(current)]
        now = k8s_time()
        for c in conds:
            if c["type"] == kind:
                if c.get("status") != status:
                    c["lastTransitionTime"] = now
                c.update(status=status, reason=reason, message=message)
                break
        else:
            conds.append({"type": kind, "status": status, "reason": reason, "message": message,
                          "lastTransitionTime": now})
        patch: dict[str, Any] = {"conditions": conds, **(extra or {})}
        if kind in jobset.FINISHED:
            patch["terminalState"] = kind
        if status == "True":
            log.log(logging.ERROR if kind == "Failed" else logging.INFO, "%s: %s (%s) %s", name, kind, reason,
                    message, extra={"job": name, "dataset": current["metadata"].get("labels", {}).get(
                        jobmeta.DATASET_LABEL), "fields": {"condition": kind, "reason": reason}})
        return self.backend.patch_status(name, patch)

    def _suspended(self, job: dict[str, Any]) -> None:
        self._condition(job, "Suspended", *SUSPENDED)

    @staticmethod
    def _rjob_status(job: dict[str, Any], active: int, succeeded: int = 0, failed: int = 0) -> dict[str, Any]:
        return {"replicatedJobsStatus": [{"name": r["name"], "active": active, "ready": active,
                                          "succeeded": succeeded, "failed": failed, "suspended": 0}
                                         for r in job["spec"]["replicatedJobs"]]}

    # -- pods -------------------------------------------------------------------------------------------
    def _pods(self, job: dict[str, Any]) -> list[tuple[str, int, int, dict[str, Any], dict[str, Any]]]:
        """(replicated job, job index, pod index, Job spec, container) of every pod the JobSet makes."""
        out = []
        for rj in job["spec"]["replicatedJobs"]:
            spec = rj["template"]["spec"]
            containers = spec["template"]["spec"]["containers"]
            container = next((c for c in containers if c.get("name") == jobmeta.CONTAINER), containers[0])
            for j in range(int(rj.get("replicas", 1))):
                for i in range(int(spec.get("parallelism", 1))):
                    out.append((str(rj["name"]), j, i, spec, container))
        return out

    def _start(self, job: dict[str, Any], restarts: int, reason: str) -> None:
        name = jobmeta.name_of(job)
        subdomain = (job["spec"].get("network") or {}).get("subdomain") or name
        pods = self._pods(job)
        ports = free_ports(len(pods))
        dns = {f"{jobset.hostname(name, i, rjob, j)}.{subdomain}": f"127.0.0.1:{p}"
               for (rjob, j, i, _, _), p in zip(pods, ports, strict=True)}
        replicas = []
        for n, ((rjob, j, i, spec, container), port) in enumerate(zip(pods, ports, strict=True)):
            labels = {**(spec["template"].get("metadata") or {}).get("labels", {}),
                      jobset.JOBSET_NAME_LABEL: name, jobset.REPLICATED_JOB_LABEL: rjob,
                      jobset.JOB_INDEX_LABEL: str(j), jobset.RESTART_LABEL: str(restarts)}
            env = {k: v for k, v in self.env.items() if k != "TF_CONFIG"}
            env.update(pod_env(container, labels))
            env.update(JOB_COMPLETION_INDEX=str(i), LANDFALL_TF_ADDRESSES=json.dumps(dns))
            replicas.append(self._spawn(name, n, port, command_of(container), env,
                                        f"attempt {restarts + 1} ({reason}) pod {jobset.hostname(name, i, rjob, j)}"))
        rj = RunningJob(name, job["metadata"].get("uid", ""), replicas, time.monotonic(), time.time(), restarts)
        self.running[name] = rj
        self.backend.patch_status(name, {**self._rjob_status(job, active=1), **self._local_status(rj)})
        log.info("%s: started %d pods (%s)", name, len(replicas), reason, extra={"job": name})

    def _end(self, job: dict[str, Any], rj: RunningJob, kind: str, reason: str, message: str) -> None:
        self._stop(rj)
        codes = [r.proc.returncode for r in rj.replicas]
        done = all(c == 0 for c in codes)
        extra = {**self._rjob_status(job, active=0, succeeded=int(done), failed=int(not done)),
                 **self._local_status(rj)}
        self._condition(job, kind, reason, message, extra=extra)
        self._compact(job)  # as for a TFJob (landfall.local.tfjob_controller): the dataset's labels are the same

    def _job_failure(self, job: dict[str, Any], rj: RunningJob) -> tuple[str, str, str] | None:
        """(replicated job, Job name, failure reason) of the first failed Job of this attempt, else None."""
        pods = self._pods(job)
        for (rjob, j, i, spec, container), r in zip(pods, rj.replicas, strict=True):
            code = r.proc.poll()
            job_name = f"{jobmeta.name_of(job)}-{rjob}-{j}"
            if code not in (None, 0):
                action = pod_failure_action(spec, str(container.get("name")), exit_code(code))
                why = f"pod {i} exited with code {exit_code(code)}"
                return rjob, job_name, ("PodFailurePolicy" if action == "FailJob" else "BackoffLimitExceeded") + (
                    f": {why}")
            deadline = spec.get("activeDeadlineSeconds")
            if deadline is not None and time.monotonic() - rj.started > float(deadline):
                return rjob, job_name, f"DeadlineExceeded: active longer than {deadline}s"
        return None

    def _poll(self, job: dict[str, Any], rj: RunningJob) -> None:
        name = rj.name
        spec = job["spec"]
        failure = self._job_failure(job, rj)
        if failure is not None:
            rjob, job_name, detail = failure
            reason = detail.split(":", 1)[0]
            action = jobset_action(spec, rjob, reason)
            first = f" (first failed job: {job_name})"
            log.info("%s: Job %s failed (%s): failure policy action %s", name, job_name, detail, action,
                     extra={"job": name})
            if action is None:
                self._end(job, rj, "Failed", FAILED_JOBS[0], FAILED_JOBS[1] + first)
                return
            if action == "FailJobSet":
                self._end(job, rj, "Failed", FAIL_ACTION[0], FAIL_ACTION[1] + first)
                return
            status = job.get("status") or {}
            counted = int(status.get("restartsCountTowardsMax") or 0)
            limit = int((spec.get("failurePolicy") or {}).get("maxRestarts") or 0)
            ignore_max = action == "RestartJobSetAndIgnoreMaxRestarts"
            if not ignore_max and counted >= limit:
                self._end(job, rj, "Failed", REACHED_MAX_RESTARTS[0], REACHED_MAX_RESTARTS[1] + first)
                return
            self._stop(rj)
            restarts = int(status.get("restarts") or 0) + 1
            self.backend.patch_status(name, {"restarts": restarts,
                                             "restartsCountTowardsMax": counted + (0 if ignore_max else 1)})
            self._start(self.backend.get(name), restarts, f"restart {restarts}: {detail}")
            return
        targets = set((spec.get("successPolicy") or {}).get("targetReplicatedJobs") or
                      [r["name"] for r in spec["replicatedJobs"]])
        jobs: dict[tuple[str, int], list[int | None]] = {}
        for (rjob, j, _, _, _), r in zip(self._pods(job), rj.replicas, strict=True):
            jobs.setdefault((rjob, j), []).append(r.proc.poll())
        complete = [all(c == 0 for c in codes) for (rjob, _), codes in jobs.items() if rjob in targets]
        any_op = (spec.get("successPolicy") or {}).get("operator") == "Any"
        if complete and (any(complete) if any_op else all(complete)):
            self._end(job, rj, "Completed", *COMPLETED)

    # -- the loop ---------------------------------------------------------------------------------------
    def _tick_job(self, name: str, job: dict[str, Any]) -> None:
        suspended = any(c["type"] == "Suspended" and c.get("status") == "True" for c in jobset.conditions(job))
        if jobset.is_suspended(job):
            if not suspended:
                self._suspended(job)
            return
        if suspended:
            job = self._condition(job, "Suspended", *RESUMED, status="False")
        rj = self.running.get(name)
        if rj is None:
            status = job.get("status") or {}
            if status.get("local"):  # it ran here before this operator: recreate the pods, not counted
                self._start(job, int(status.get("restarts") or 0), "operator restarted")
            else:
                self._start(job, 0, "created")
            return
        self._poll(job, rj)


def pod_env(container: dict[str, Any], labels: dict[str, str]) -> dict[str, str]:
    """The container's ``env`` as the kubelet sets it: values, and ``fieldRef`` of ``metadata.labels['k']``."""
    out = {}
    for e in container.get("env") or []:
        if "name" not in e:
            continue
        if "value" in e:
            out[e["name"]] = str(e["value"])
            continue
        path = ((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath", "")
        with contextlib.suppress(KeyError, IndexError):
            if path.startswith("metadata.labels['") and path.endswith("']"):
                out[e["name"]] = labels[path[len("metadata.labels['"):-2]]
    return out
