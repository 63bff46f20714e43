"""The cluster as ``TF_CONFIG`` describes it, read without importing TensorFlow.

The Kubeflow training operator sets, on every replica of a TFJob::

    {"cluster": {"worker": ["job-worker-0.ns.svc:2222", "job-worker-1.ns.svc:2222"]},
     "task": {"type": "worker", "index": 1}}

Worker 0 is the chief (unless the job has a ``chief`` replica, which then comes first). With no
``TF_CONFIG`` the trainer is a cluster of one.

In a JobSet (``LANDFALL_ENGINE=jobset``) no operator sets ``TF_CONFIG``: the trainer builds it
(``jobset_tf_config``) from what the pod is given (``landfall.submit.jobset.pod_env``):

- ``LANDFALL_JOBSET_NAME``, ``LANDFALL_REPLICATED_JOB`` and ``LANDFALL_JOB_INDEX``: the labels
  ``jobset.sigs.k8s.io/jobset-name``, ``jobset.sigs.k8s.io/replicatedjob-name`` and
  ``jobset.sigs.k8s.io/job-index`` the JobSet controller puts on each pod, through the downward API;
- ``JOB_COMPLETION_INDEX``: the pod's index in its Indexed Job (set by the Job controller);
- ``LANDFALL_WORKERS`` and ``LANDFALL_TF_PORT`` (default 2222); ``LANDFALL_TF_SUBDOMAIN`` (default: the
  JobSet's name, JobSet's default ``network.subdomain``).

Worker ``i`` is ``<jobset>-<replicatedJob>-<jobIndex>-<i>.<subdomain>:<port>``: JobSet's pod host name with
``network.enableDNSHostnames`` (one Job, index 0: all workers are pods of that Job). A ``TF_CONFIG`` that is
set wins (TFJobs, Vertex-style clusters). ``LANDFALL_TF_ADDRESSES`` (a JSON object host name ->
``host:port``) is the local operator's stand-in for the headless Service's DNS: each built name is looked up
in it, and a name it lacks is an error, so the local run checks the names too.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping

from landfall.core.errors import Invalid

DEFAULT_PORT = 2222


def _int(env: Mapping[str, str], key: str, default: int | None = None) -> int:
    raw = env.get(key, "").strip()
    if not raw and default is not None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise Invalid(f"{key}={raw!r}: not an integer (the JobSet pod's TF_CONFIG needs it)") from None
    if value < 0:
        raise Invalid(f"{key}={raw!r}: must be >= 0")
    return value


def jobset_tf_config(env: Mapping[str, str]) -> str | None:
    """``TF_CONFIG`` for a pod of a Landfall JobSet, or ``None`` when ``env`` is not one (no
    ``LANDFALL_JOBSET_NAME``). Bad or inconsistent inputs raise ``Invalid`` (the trainer exits 2)."""
    name = env.get("LANDFALL_JOBSET_NAME", "").strip()
    if not name:
        return None
    rjob = env.get("LANDFALL_REPLICATED_JOB", "").strip() or "worker"
    job_index = _int(env, "LANDFALL_JOB_INDEX", 0)
    index = _int(env, "JOB_COMPLETION_INDEX")
    workers = _int(env, "LANDFALL_WORKERS")
    port = _int(env, "LANDFALL_TF_PORT", DEFAULT_PORT)
    subdomain = env.get("LANDFALL_TF_SUBDOMAIN", "").strip() or name
    if job_index != 0:
        raise Invalid(f"LANDFALL_JOB_INDEX={job_index}: the trainer's JobSet has one Job (replicas: 1)")
    if not 0 <= index < workers:
        raise Invalid(f"JOB_COMPLETION_INDEX={index} is not a worker of LANDFALL_WORKERS={workers}")
    if not 0 < port < 65536:
        raise Invalid(f"LANDFALL_TF_PORT={port}: not a port")
    hosts = [f"{name}-{rjob}-{job_index}-{i}.{subdomain}" for i in range(workers)]
    addresses = [f"{h}:{port}" for h in hosts]
    table = env.get("LANDFALL_TF_ADDRESSES", "").strip()
    if table:
        try:
            resolve = dict(json.loads(table))
        except (ValueError, TypeError) as exc:
            raise Invalid(f"LANDFALL_TF_ADDRESSES is not a JSON object: {exc}") from None
        missing = [h for h in hosts if h not in resolve]
        if missing:
            raise Invalid(f"LANDFALL_TF_ADDRESSES has no address for {missing[0]}")
        addresses = [str(resolve[h]) for h in hosts]
    return json.dumps({"cluster": {"worker": addresses}, "task": {"type": "worker", "index": index},
                       "environment": "cloud"})


@dataclasses.dataclass(frozen=True)
class Cluster:
    num_workers: int = 1
    worker_index: int = 0
    task_type: str = "worker"
    configured: bool = False  # TF_CONFIG was present (or built)
    built_tf_config: str = ""  # the TF_CONFIG built for a JobSet pod ("" when it was given)

    @property
    def is_chief(self) -> bool:
        return self.worker_index == 0

    def export(self) -> None:
        """Puts a built ``TF_CONFIG`` into this process's environment (TensorFlow reads it from there)."""
        if self.built_tf_config:
            os.environ["TF_CONFIG"] = self.built_tf_config

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Cluster:
        env = os.environ if env is None else env
        text = env.get("TF_CONFIG", "").strip()
        built = ""
        if not text:
            built = jobset_tf_config(env) or ""
            text = built
        if not text:
            return cls()
        try:
            raw = json.loads(text)
            spec = raw.get("cluster") or {}
            task = raw.get("task") or {}
            task_type = str(task.get("type", "worker"))
            index = int(task.get("index", 0))
            chiefs = list(spec.get("chief", []))
            workers = list(spec.get("worker", []))
        except (ValueError, TypeError, AttributeError) as exc:
            raise Invalid(f"TF_CONFIG is not valid: {exc}") from None
        if task_type not in ("worker", "chief"):
            raise Invalid(f"TF_CONFIG task type {task_type!r}: this trainer runs only worker (and chief) replicas")
        members = chiefs + workers
        position = index if task_type == "chief" else len(chiefs) + index
        if not members or not 0 <= position < len(members):
            raise Invalid(f"TF_CONFIG task {task_type}/{index} is not in its cluster {spec}")
        return cls(num_workers=len(members), worker_index=position, task_type=task_type, configured=True,
                   built_tf_config=built)
