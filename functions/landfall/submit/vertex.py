"""Renders the Vertex AI ``CustomJob`` a released job becomes on the managed engine (issue #57), and reads its state.

For teams without a cluster: the same trainer, the same arguments as the TFJob's, run by Vertex AI custom training,
which sets ``TF_CONFIG`` on every replica itself (``TF_CONFIG`` below, its published mapping). What is rendered:

- ``custom_job``: the ``CustomJob`` resource as the REST API takes it (``projects.locations.customJobs.create``'s
  body; it parses as ``google.cloud.aiplatform_v1.types.CustomJob``, tested):
  - ``displayName``: the job's derived name (``jobmeta.job_name``): a retried request finds its job by it, and by
    the ``landfall-job`` label, instead of making a second (the API names a CustomJob itself; it takes no id);
  - ``labels``: the dataset's, the request's and the job's, under Vertex AI's label rules (``LABEL_RULES``);
  - ``jobSpec.workerPoolSpecs``: pool 0 the chief (one replica), pool 1 the other ``workers - 1`` (absent for one
    worker); each on ``machine_type`` (or the published machine for the accelerator and GPU count, ``MACHINES``) with
    ``gpus_per_worker`` accelerators of the GKE name's Vertex AI type (``ACCELERATORS``), running the trainer image
    with the TFJob's command, arguments and environment (``jobmeta.container``);
  - ``jobSpec.serviceAccount``: the training account (``trainer_service_account``; a bare name is taken as an account
    of the project); ``jobSpec.baseOutputDirectory``: the job's directory;
  - ``jobSpec.scheduling``: ``timeout`` the deadline (``active_deadline_seconds``), ``strategy`` from the capacity
    mode (``STRATEGIES``: ``STANDARD``, ``SPOT``, ``FLEX_START`` with its ``maxWaitDuration``), and
    ``restartJobOnWorkerRestart``: a worker restarted by the service restarts every replica (MultiWorkerMirrored
    training cannot take one leaving and joining), and they resume from the last epoch's backup.
- ``render``: that body in the envelope every engine's readers share (``metadata``: the name, labels and
  annotations of ``landfall.submit.jobmeta``; ``spec``: the body; ``status.state``: the job's ``JobState``).

The rules are the platform's, written down as data with their sources (read 2026-12-05); ``STATES`` maps each
``JobState`` to the states Landfall's views and reconciler read. The jobs live behind the ``customjobs`` backend
(``landfall.submit.backends.customjobs``: Google's ``JobServiceClient``); on a laptop ``landfall.local.vertex_server``
answers for the service and runs the replicas; deployed, no cluster is needed (docs/deploying.md).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from landfall.submit import jobmeta
from landfall.submit.config import JobConfig

API_VERSION = "aiplatform.googleapis.com/v1"
GROUP, VERSION, PLURAL, KIND = "aiplatform.googleapis.com", "v1", "customjobs", "CustomJob"
INSTALL = "the Vertex AI API (aiplatform.googleapis.com): no cluster"

DOCS = {
    "pools": "https://cloud.google.com/vertex-ai/docs/training/distributed-training (read 2026-12-05)",
    "compute": "https://cloud.google.com/vertex-ai/docs/training/configure-compute (read 2026-12-05)",
    "labels": "https://cloud.google.com/vertex-ai/docs/general/resource-labels (read 2026-12-05)",
    "scheduling": "https://cloud.google.com/vertex-ai/docs/reference/rest/v1/CustomJobSpec#Scheduling "
                  "(read 2026-12-05; google-cloud-aiplatform 2.7.0's aiplatform_v1.Scheduling.Strategy)",
    "states": "https://cloud.google.com/vertex-ai/docs/reference/rest/v1/JobState (read 2026-12-05; "
              "google-cloud-aiplatform 2.7.0's aiplatform_v1.JobState)",
}

# workerPoolSpecs[i] -> the task type Vertex AI gives its replicas in TF_CONFIG (DOCS["pools"]: the first pool is
# the primary replica, "chief"; the second the workers; the third parameter servers; the fourth evaluators).
TF_CONFIG = ("chief", "worker", "ps", "evaluator")

# The GKE accelerator names Landfall's config uses (``accelerator``) -> Vertex AI's AcceleratorType.
ACCELERATORS = {
    "nvidia-l4": "NVIDIA_L4",
    "nvidia-tesla-t4": "NVIDIA_TESLA_T4",
    "nvidia-tesla-v100": "NVIDIA_TESLA_V100",
    "nvidia-tesla-a100": "NVIDIA_TESLA_A100",
    "nvidia-a100-80gb": "NVIDIA_A100_80GB",
    "nvidia-h100-80gb": "NVIDIA_H100_80GB",
}
# (Vertex AI accelerator, GPUs per replica) -> the machine type it attaches to (DOCS["compute"]: G2 carries L4,
# A2 highgpu the A100 40 GB, A2 ultragpu the A100 80 GB, A3 highgpu the H100; T4 and V100 attach to N1), the one
# Landfall picks when ``machine_type`` is empty. A pair not listed is refused before anything is sent.
MACHINES = {
    ("NVIDIA_L4", 1): "g2-standard-8", ("NVIDIA_L4", 2): "g2-standard-24", ("NVIDIA_L4", 4): "g2-standard-48",
    ("NVIDIA_L4", 8): "g2-standard-96",
    ("NVIDIA_TESLA_T4", 1): "n1-standard-8", ("NVIDIA_TESLA_T4", 2): "n1-standard-16",
    ("NVIDIA_TESLA_T4", 4): "n1-standard-32",
    ("NVIDIA_TESLA_V100", 1): "n1-standard-8", ("NVIDIA_TESLA_V100", 2): "n1-standard-16",
    ("NVIDIA_TESLA_V100", 4): "n1-standard-32", ("NVIDIA_TESLA_V100", 8): "n1-standard-64",
    ("NVIDIA_TESLA_A100", 1): "a2-highgpu-1g", ("NVIDIA_TESLA_A100", 2): "a2-highgpu-2g",
    ("NVIDIA_TESLA_A100", 4): "a2-highgpu-4g", ("NVIDIA_TESLA_A100", 8): "a2-highgpu-8g",
    ("NVIDIA_A100_80GB", 1): "a2-ultragpu-1g", ("NVIDIA_A100_80GB", 2): "a2-ultragpu-2g",
    ("NVIDIA_A100_80GB", 4): "a2-ultragpu-4g", ("NVIDIA_A100_80GB", 8): "a2-ultragpu-8g",
    ("NVIDIA_H100_80GB", 8): "a3-highgpu-8g",
}
CPU_MACHINE = "n1-standard-4"  # a replica without GPUs (gpus_per_worker 0)

# capacity mode -> Scheduling.Strategy (DOCS["scheduling"]); FLEX_START takes maxWaitDuration (0: wait forever).
STRATEGIES = {"standard": "STANDARD", "spot": "SPOT", "flex_start": "FLEX_START"}

# Resource labels (DOCS["labels"]): at most 64; keys and values at most 63 characters of lower-case letters, digits,
# underscores and dashes; a key starts with a lower-case letter; a value may be empty.
LABEL_RULES = {"max_labels": 64, "key": r"^[a-z][a-z0-9_-]{0,62}$", "value": r"^[a-z0-9_-]{0,63}$"}
JOB_LABEL, DATASET_LABEL, REQUEST_LABEL, MANAGED_LABEL = "landfall-job", "landfall-dataset", "landfall-request", \
    "managed-by"

# JobState (DOCS["states"]) -> the state the views and the reconciler read; QUEUED and PAUSED wait for capacity.
STATES = {
    "JOB_STATE_UNSPECIFIED": "Pending",
    "JOB_STATE_QUEUED": "Suspended",
    "JOB_STATE_PENDING": "Created",
    "JOB_STATE_RUNNING": "Running",
    "JOB_STATE_UPDATING": "Running",
    "JOB_STATE_CANCELLING": "Running",
    "JOB_STATE_PAUSED": "Suspended",
    "JOB_STATE_SUCCEEDED": "Succeeded",
    "JOB_STATE_FAILED": "Failed",
    "JOB_STATE_CANCELLED": "Failed",
    "JOB_STATE_EXPIRED": "Failed",
    "JOB_STATE_PARTIALLY_SUCCEEDED": "Failed",
}
FINISHED = ("Succeeded", "Failed")


def label_value(text: str) -> str:
    """``text`` as a Vertex AI label value: lower-case, other characters as ``-``, at most 63 (a digest keeps a long
    one unique)."""
    value = re.sub(r"[^a-z0-9_-]", "-", str(text).lower())
    return value if len(value) <= 63 else value[:52] + "-" + hashlib.sha256(str(text).encode()).hexdigest()[:10]


def labels_for(name: str, dataset: str, request_id: str) -> dict[str, str]:
    return {MANAGED_LABEL: "landfall", JOB_LABEL: label_value(name), DATASET_LABEL: label_value(dataset),
            REQUEST_LABEL: label_value(request_id)}


def machine_spec(cfg: JobConfig) -> dict[str, Any]:
    """The replicas' ``machineSpec``; ``ValueError`` for an accelerator or a machine and GPU count Vertex AI has
    not published (``ACCELERATORS``, ``MACHINES``)."""
    if not cfg.gpus_per_worker:
        return {"machineType": cfg.machine_type or CPU_MACHINE}
    kind = ACCELERATORS.get(cfg.accelerator)
    if kind is None:
        raise ValueError(f"accelerator {cfg.accelerator!r} has no Vertex AI type (one of {sorted(ACCELERATORS)})")
    machine = cfg.machine_type or MACHINES.get((kind, cfg.gpus_per_worker))
    if machine is None or (kind, cfg.gpus_per_worker) not in MACHINES:
        counts = sorted(n for k, n in MACHINES if k == kind)
        raise ValueError(f"{cfg.gpus_per_worker} x {kind} per replica: Vertex AI attaches {counts} to a machine")
    return {"machineType": machine, "acceleratorType": kind, "acceleratorCount": cfg.gpus_per_worker}


def service_account(cfg: JobConfig) -> str:
    """The training account's email: ``trainer_service_account`` as it is when it is one, else an account of the
    project of that name."""
    account = cfg.trainer_service_account
    return account if "@" in account else f"{account}@{cfg.project}.iam.gserviceaccount.com"


def custom_job(cfg: JobConfig, *, name: str, dataset: str, request_id: str, inputs_uri: str,
               runs_prefix: str = "runs/") -> dict[str, Any]:
    """The ``CustomJob`` body (REST JSON) of the released job ``name`` that trains on ``inputs_uri``."""
    c = jobmeta.container(cfg, name, inputs_uri, runs_prefix)
    container = {"imageUri": c["image"], "command": list(c["command"]), "args": list(c["args"]),
                 "env": [{"name": e["name"], "value": e["value"]} for e in c["env"]]}
    machine = machine_spec(cfg)
    pools = [{"machineSpec": machine, "replicaCount": "1", "containerSpec": container}]
    if cfg.workers > 1:
        pools.append({"machineSpec": machine, "replicaCount": str(cfg.workers - 1), "containerSpec": container})
    # MultiWorkerMirroredStrategy cannot take a worker leaving and joining: a restarted worker (a Spot VM
    # reclaimed, a VM lost) restarts every replica, which resume from the last epoch's backup (DOCS["scheduling"]).
    scheduling: dict[str, Any] = {"timeout": f"{cfg.active_deadline_seconds}s",
                                  "strategy": STRATEGIES[cfg.capacity], "restartJobOnWorkerRestart": True}
    if cfg.capacity == "flex_start":
        scheduling["maxWaitDuration"] = f"{cfg.flex_max_wait_seconds}s"
    return {
        "displayName": name,
        "labels": labels_for(name, dataset, request_id),
        "jobSpec": {
            "workerPoolSpecs": pools,
            "serviceAccount": service_account(cfg),
            "baseOutputDirectory": {"outputUriPrefix": jobmeta.job_dir(cfg.bucket, name, runs_prefix)},
            "scheduling": scheduling,
        },
    }


def tf_config(addresses: list[list[str]], pool: int, index: int) -> str:
    """``TF_CONFIG`` as Vertex AI sets it on replica ``index`` of worker pool ``pool`` of a job whose pools' replicas
    listen at ``addresses`` (one list per pool): each pool under its task type (``TF_CONFIG``), the replica's task,
    and ``environment: cloud``. What the local runner of a CustomJob gives each replica's process."""
    import json

    cluster = {TF_CONFIG[i]: list(a) for i, a in enumerate(addresses) if a}
    return json.dumps({"cluster": cluster, "task": {"type": TF_CONFIG[pool], "index": index},
                       "environment": "cloud"})


def parent(cfg: JobConfig) -> str:
    """Where the job is created: ``projects/<project>/locations/<region>``."""
    return f"projects/{cfg.project}/locations/{cfg.region}"


def render(cfg: JobConfig, *, name: str, dataset: str, request_id: str, inputs_uri: str,
           after: str | None = None, released_at: str | None = None, runs_prefix: str = "runs/") -> dict[str, Any]:
    """The released job as every engine's readers see it: the ``CustomJob`` body in ``spec``, with the name,
    labels and annotations of ``landfall.submit.jobmeta`` in ``metadata``."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "namespace": parent(cfg), "labels": jobmeta.labels(cfg, dataset, request_id),
                     "annotations": jobmeta.annotations_for(cfg, inputs_uri, after, released_at)},
        "spec": custom_job(cfg, name=name, dataset=dataset, request_id=request_id, inputs_uri=inputs_uri,
                           runs_prefix=runs_prefix),
    }


# -- reading ---------------------------------------------------------------------------------------------------
def containers_of(job: dict[str, Any]) -> list[dict[str, Any]]:
    """Each pool's container in the readers' shape (``image``, ``command``, ``args``, ``env``)."""
    out = []
    for pool in job["spec"]["jobSpec"]["workerPoolSpecs"]:
        c = pool["containerSpec"]
        out.append({"name": jobmeta.CONTAINER, "image": c["imageUri"], "command": list(c.get("command") or []),
                    "args": list(c.get("args") or []), "env": list(c.get("env") or [])})
    return out


def workers_of(job: dict[str, Any]) -> int:
    return sum(int(pool.get("replicaCount") or 0) for pool in job["spec"]["jobSpec"]["workerPoolSpecs"])


def job_state(job: dict[str, Any]) -> str:
    """The job's ``JobState`` name (``JOB_STATE_UNSPECIFIED`` before the service set one)."""
    return str((job.get("status") or {}).get("state") or "JOB_STATE_UNSPECIFIED")


def state(job: dict[str, Any]) -> str:
    return STATES.get(job_state(job), "Pending")


def is_suspended(job: dict[str, Any]) -> bool:
    """Waiting for capacity (queued, or paused), not finished."""
    return state(job) == "Suspended"


def conditions(job: dict[str, Any]) -> list[dict[str, Any]]:
    """One condition, the state's, with the service's error when it failed."""
    error = (job.get("status") or {}).get("error") or {}
    return [{"type": state(job), "status": "True", "reason": job_state(job),
             **({"message": str(error.get("message"))} if error else {})}]


def is_finished(job: dict[str, Any]) -> bool:
    return state(job) in FINISHED
