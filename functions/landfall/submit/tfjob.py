"""Renders the Kubeflow ``TFJob`` (``kubeflow.org/v1``) the submit stage creates, and reads its state.

The default engine (``LANDFALL_ENGINE=tfjob``); ``landfall.submit.jobset`` is the other, and
``landfall.submit.engine`` picks between them. The names, labels and annotations below are both engines'.

Pure functions, no I/O: the consumer, ``landfall render-tfjob``, both backends and the local operator
share them, so what ``render-tfjob`` prints is exactly what is submitted.

The object
----------
- ``metadata.name``: ``<dataset-slug>-<10 hex>``, at most 47 characters, a DNS-1035 label (starts with a
  letter), so the Services and pods the training operator names ``<job>-worker-<i>`` stay valid labels
  (63 characters) for up to 9999 workers. The hash is computed by ``job_name(dataset, key)``; the key is
  the job's number in its dataset (``seq:N``), or under ``allow`` its request (see ``landfall.submit.coalesce``).
- labels: ``app.kubernetes.io/{name,managed-by,part-of}: landfall``, ``landfall.dev/dataset``,
  ``landfall.dev/request-id`` (the first request the job covers; hashed if not a valid label value), and
  ``kueue.x-k8s.io/queue-name`` when ``LANDFALL_QUEUE_NAME`` is set (Kueue then admits the job; the pod
  template carries the other labels, not this one).
- annotations: ``landfall.dev/inputs`` (``gs://BUCKET/runs/<job>/inputs.json``: the manifests and the
  requests the job covers, ``landfall.inputs/v1``), ``landfall.dev/after`` (the job it follows),
  ``landfall.dev/concurrency``, ``landfall.dev/window``, ``landfall.dev/released-at``. Nothing in the
  object grows with the arrivals or requests it covers.
- ``spec.tfReplicaSpecs.Worker``: ``replicas`` workers, ``restartPolicy: ExitCode`` (the trainer exits
  1-127 on permanent errors, 128 and up on retryable ones), one container named ``tensorflow`` (the
  training operator sets ``TF_CONFIG`` only on that name) running ``python -m trainer.task`` with
  ``--inputs`` (the inputs URI), ``--job-dir gs://BUCKET/runs/<job>``, the epochs, the batch size and
  extra trainer flags; ``LANDFALL_GPUS_PER_WORKER`` and ``LANDFALL_ACCELERATOR`` in its environment (for the
  job's cost, which the chief records);
  ``nvidia.com/gpu`` limits, the GKE accelerator node selector and the ``nvidia.com/gpu`` toleration
  (both left out when ``gpus_per_worker`` is 0), and ``serviceAccountName`` (Workload Identity).
- ``spec.runPolicy``: ``cleanPodPolicy``, ``backoffLimit``, ``activeDeadlineSeconds``,
  ``ttlSecondsAfterFinished``. No ``suspend``: a job is created only when it is released, and with a
  queue, Kueue owns ``suspend`` (it suspends jobs it has not admitted).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from landfall.core.contracts.layout import split_gs
from landfall.submit.config import JobConfig

API_VERSION = "kubeflow.org/v1"
GROUP, VERSION, PLURAL, KIND = "kubeflow.org", "v1", "tfjobs", "TFJob"
# What serves the TFJob: the release k8s/README.md pins (its install line, checked against the upstream tags).
INSTALL = "training-operator v1.9.4"
CONTAINER = "tensorflow"  # the training operator sets TF_CONFIG on the container of this name only

APP_LABELS = {
    "app.kubernetes.io/name": "landfall",
    "app.kubernetes.io/managed-by": "landfall",
    "app.kubernetes.io/part-of": "landfall",
}
DATASET_LABEL = "landfall.dev/dataset"
REQUEST_LABEL = "landfall.dev/request-id"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
INPUTS_ANNOTATION = "landfall.dev/inputs"
AFTER_ANNOTATION = "landfall.dev/after"
POLICY_ANNOTATION = "landfall.dev/concurrency"
RELEASED_ANNOTATION = "landfall.dev/released-at"
WINDOW_ANNOTATION = "landfall.dev/window"

CONDITIONS = ("Created", "Running", "Restarting", "Succeeded", "Failed", "Suspended")
FINISHED = ("Succeeded", "Failed")

MAX_NAME = 47  # "<name>-worker-9999" is 59 characters: a valid DNS-1035 label
_LABEL_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_DNS1035_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


# -- names ---------------------------------------------------------------------------------------------
def _digest(*parts: str, n: int = 10) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:n]


def dataset_slug(dataset: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", dataset.lower()).strip("-")
    if not slug or not slug[0].isalpha():
        slug = "d-" + slug
    return slug[: MAX_NAME - 11].rstrip("-")


def job_name(dataset: str, key: str) -> str:
    """``<slug>-<hash(dataset, key)>``: deterministic, a DNS-1035 label of at most ``MAX_NAME`` characters."""
    name = f"{dataset_slug(dataset)}-{_digest(dataset, key)}"
    assert _DNS1035_RE.match(name) and len(name) <= MAX_NAME, name
    return name


def label_value(value: str) -> str:
    """``value`` if it is a valid label value, else a stable hash of it."""
    return value if _LABEL_VALUE_RE.match(value) and len(value) <= 63 else "h-" + _digest(value, n=40)


def job_dir(bucket: str, job: str, runs_prefix: str = "runs/") -> str:
    return f"gs://{bucket}/{runs_prefix}{job}"


# -- rendering -----------------------------------------------------------------------------------------
def container_args(cfg: JobConfig, name: str, inputs_uri: str, runs_prefix: str = "runs/") -> list[str]:
    args = [
        "--inputs", inputs_uri,
        "--job-dir", job_dir(cfg.bucket, name, runs_prefix),
        "--epochs", str(cfg.epochs),
        "--batch-size-per-worker", str(cfg.batch_size_per_worker),
        "--job-name", name,
    ]
    return args + list(cfg.trainer_args)


def container(cfg: JobConfig, name: str, inputs_uri: str, runs_prefix: str = "runs/") -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": cfg.cpu_request, "memory": cfg.memory_request}}
    if cfg.gpus_per_worker:
        resources["limits"] = {"nvidia.com/gpu": cfg.gpus_per_worker}
    return {
        "name": CONTAINER,
        "image": cfg.trainer_image,
        "command": ["python", "-m", "trainer.task"],
        "args": container_args(cfg, name, inputs_uri, runs_prefix),
        # The project names the results topic the chief publishes to (trainer.verdict.publish_result).
        # What the job is given, for the cost the chief records (gpu_seconds, estimated_cost: trainer.task).
        "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}, {"name": "GOOGLE_CLOUD_PROJECT", "value": cfg.project},
                {"name": "LANDFALL_GPUS_PER_WORKER", "value": str(cfg.gpus_per_worker)},
                {"name": "LANDFALL_ACCELERATOR", "value": cfg.accelerator}],
        "resources": resources,
    }


def render(cfg: JobConfig, *, name: str, dataset: str, request_id: str, inputs_uri: str,
           after: str | None = None, released_at: str | None = None, runs_prefix: str = "runs/") -> dict[str, Any]:
    """The TFJob as a dict (what is POSTed): the released job that trains on ``inputs_uri``."""
    pod_spec: dict[str, Any] = {
        "serviceAccountName": cfg.trainer_service_account,
        "containers": [container(cfg, name, inputs_uri, runs_prefix)],
    }
    if cfg.gpus_per_worker:
        pod_spec["nodeSelector"] = {"cloud.google.com/gke-accelerator": cfg.accelerator}
        pod_spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    annotations = {
        INPUTS_ANNOTATION: inputs_uri,
        POLICY_ANNOTATION: cfg.concurrency,
        WINDOW_ANNOTATION: str(cfg.window),
    }
    if after:
        annotations[AFTER_ANNOTATION] = after
    if released_at:
        annotations[RELEASED_ANNOTATION] = released_at
    labels = {**APP_LABELS, DATASET_LABEL: label_value(dataset), REQUEST_LABEL: label_value(request_id)}
    if cfg.queue_name:
        labels[QUEUE_LABEL] = cfg.queue_name
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "namespace": cfg.namespace, "labels": labels, "annotations": annotations},
        "spec": {
            "runPolicy": {
                "cleanPodPolicy": cfg.clean_pod_policy,
                "backoffLimit": cfg.backoff_limit,
                "activeDeadlineSeconds": cfg.active_deadline_seconds,
                "ttlSecondsAfterFinished": cfg.ttl_seconds_after_finished,
            },
            "tfReplicaSpecs": {
                "Worker": {
                    "replicas": cfg.workers,
                    "restartPolicy": "ExitCode",
                    "template": {
                        # Not the queue label: Kueue queues the TFJob; its default also enables the "pod"
                        # integration, which would queue labelled pods one by one (a partial gang).
                        "metadata": {"labels": {k: v for k, v in labels.items() if k != QUEUE_LABEL}},
                        "spec": pod_spec,
                    },
                }
            },
        },
    }


def containers_of(job: dict[str, Any]) -> list[dict[str, Any]]:
    return list(job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"])


def workers_of(job: dict[str, Any]) -> int:
    return int(job["spec"]["tfReplicaSpecs"]["Worker"].get("replicas", 1))


def bucket_in(containers: list[dict[str, Any]]) -> str:
    """The bucket from a container's ``--job-dir gs://BUCKET/...`` argument (either engine's)."""
    for c in containers:
        args = c.get("args") or []
        if "--job-dir" in args:
            return split_gs(str(args[args.index("--job-dir") + 1]))[0]
    return ""


def bucket_of(job: dict[str, Any]) -> str:
    """The bucket from the job's ``--job-dir gs://BUCKET/...`` argument (when the config names none)."""
    return bucket_in(containers_of(job))


def to_yaml(job: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(job, sort_keys=False, default_flow_style=False)


# -- reading state -------------------------------------------------------------------------------------
def name_of(job: dict[str, Any]) -> str:
    return str(job["metadata"]["name"])


def annotations(job: dict[str, Any]) -> dict[str, str]:
    return job.get("metadata", {}).get("annotations") or {}


def inputs_of(job: dict[str, Any]) -> str:
    """The ``inputs.json`` URI the job trains on (``""`` for an object Landfall did not make)."""
    return annotations(job).get(INPUTS_ANNOTATION, "")


def made_for(job: dict[str, Any], request_id: str) -> bool:
    """Whether ``job`` was released by (and so covers) the request ``request_id``."""
    return job.get("metadata", {}).get("labels", {}).get(REQUEST_LABEL) == label_value(request_id)


def conditions(job: dict[str, Any]) -> list[dict[str, Any]]:
    return list((job.get("status") or {}).get("conditions") or [])


def is_suspended(job: dict[str, Any]) -> bool:
    """Suspended by its queue (Kueue, not yet admitted) or by hand: waiting, not finished."""
    return bool(job.get("spec", {}).get("runPolicy", {}).get("suspend"))


def state(job: dict[str, Any]) -> str:
    """The latest condition whose status is ``True`` (``Succeeded``, ``Running``...), else ``Suspended``
    for a job its queue holds, else ``Pending`` (recorded, no controller has looked at it yet)."""
    for c in reversed(conditions(job)):
        if c.get("status") == "True" and c.get("type") in FINISHED:
            return str(c["type"])
    if is_suspended(job):
        return "Suspended"
    for c in reversed(conditions(job)):
        if c.get("status") == "True" and c.get("type") in CONDITIONS and c.get("type") != "Suspended":
            return str(c["type"])
    return "Pending"


def is_finished(job: dict[str, Any]) -> bool:
    return state(job) in FINISHED


def created_at(job: dict[str, Any]) -> str:
    return str(job.get("metadata", {}).get("creationTimestamp") or "")
