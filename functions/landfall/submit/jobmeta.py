"""What every job object Landfall makes has, whatever its engine (``landfall.submit.engine``: ``tfjob``, ``jobset``):
its name, labels and annotations, the trainer's container, and the readers of that metadata. Pure functions, no I/O.

- **The name**: ``<dataset-slug>-<10 hex>`` (``job_name(dataset, key)``), at most ``MAX_NAME`` (47) characters, a
  DNS-1035 label (it starts with a letter), so the pods and Services an engine names ``<job>-worker-<i>`` stay valid
  labels (63 characters) for up to 9999 workers. The key is the job's number in its dataset (``seq:N``), or under
  ``allow`` its request (``landfall.submit.coalesce``): a retried request derives the same name and finds its job.
- **Labels**: ``app.kubernetes.io/{name,managed-by,part-of}: landfall``, ``landfall.dev/dataset``,
  ``landfall.dev/request-id`` (the first request the job covers; hashed if not a valid label value), and
  ``kueue.x-k8s.io/queue-name`` when ``LANDFALL_QUEUE_NAME`` is set (``labels``).
- **Annotations**: ``landfall.dev/inputs`` (``gs://BUCKET/runs/<job>/inputs.json``: the manifests and the requests
  the job covers, ``landfall.inputs/v1``), ``landfall.dev/after`` (the job it follows), ``landfall.dev/concurrency``,
  ``landfall.dev/window``, ``landfall.dev/released-at`` (``annotations_for``). Nothing grows with the arrivals or
  requests a job covers.
- **The trainer's container** (``container``): ``python -m trainer.task`` with ``--inputs``, ``--job-dir
  gs://BUCKET/runs/<job>``, the epochs, the batch size, the job's name and the extra trainer flags
  (``container_args``), named ``tensorflow`` (``CONTAINER``: the training operator sets ``TF_CONFIG`` on that name
  only; the JobSet keeps it), ``LANDFALL_GPUS_PER_WORKER`` and ``LANDFALL_ACCELERATOR`` in its environment.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from landfall.core.contracts.layout import split_gs
from landfall.submit.config import JobConfig

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


# -- what a released job carries -------------------------------------------------------------------------
def labels(cfg: JobConfig, dataset: str, request_id: str) -> dict[str, str]:
    """The job's labels (the module doc); the queue's only with ``LANDFALL_QUEUE_NAME``."""
    out = {**APP_LABELS, DATASET_LABEL: label_value(dataset), REQUEST_LABEL: label_value(request_id)}
    if cfg.queue_name:
        out[QUEUE_LABEL] = cfg.queue_name
    return out


def annotations_for(cfg: JobConfig, inputs_uri: str, after: str | None = None,
                    released_at: str | None = None) -> dict[str, str]:
    """The job's annotations (the module doc)."""
    out = {INPUTS_ANNOTATION: inputs_uri, POLICY_ANNOTATION: cfg.concurrency, WINDOW_ANNOTATION: str(cfg.window)}
    if after:
        out[AFTER_ANNOTATION] = after
    if released_at:
        out[RELEASED_ANNOTATION] = released_at
    return out


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
        # The project names the results topic the chief publishes to (trainer.judging.verdict.publish_result).
        # What the job is given, for the cost the chief records (gpu_seconds, estimated_cost: trainer.task).
        "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}, {"name": "GOOGLE_CLOUD_PROJECT", "value": cfg.project},
                {"name": "LANDFALL_GPUS_PER_WORKER", "value": str(cfg.gpus_per_worker)},
                {"name": "LANDFALL_ACCELERATOR", "value": cfg.accelerator}],
        "resources": resources,
    }


def bucket_in(containers: list[dict[str, Any]]) -> str:
    """The bucket from a container's ``--job-dir gs://BUCKET/...`` argument (any engine's)."""
    for c in containers:
        args = c.get("args") or []
        if "--job-dir" in args:
            return split_gs(str(args[args.index("--job-dir") + 1]))[0]
    return ""


def to_yaml(job: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(job, sort_keys=False, default_flow_style=False)


# -- reading the metadata --------------------------------------------------------------------------------
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


def created_at(job: dict[str, Any]) -> str:
    return str(job.get("metadata", {}).get("creationTimestamp") or "")
