"""Renders the Kubeflow ``TFJob`` (``kubeflow.org/v1``) the submit stage creates, and reads its state.

The library's default engine (``LANDFALL_ENGINE=tfjob``); ``landfall.submit.jobset`` is the other, and
``landfall.submit.engine`` picks between them. The name, labels, annotations and the trainer's container are every
engine's (``landfall.submit.jobmeta``).

Pure functions, no I/O: the consumer, ``landfall render-tfjob``, both backends and the local operator
share them, so what ``render-tfjob`` prints is exactly what is submitted.

The object
----------
- ``metadata``: the name, labels and annotations of ``landfall.submit.jobmeta`` (with a queue, Kueue admits the job
  by its queue label; the pod template carries the other labels, not this one).
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

from typing import Any

from landfall.submit import jobmeta
from landfall.submit.config import JobConfig

API_VERSION = "kubeflow.org/v1"
GROUP, VERSION, PLURAL, KIND = "kubeflow.org", "v1", "tfjobs", "TFJob"
# What serves the TFJob: the release k8s/README.md pins (its install line, checked against the upstream tags).
INSTALL = "training-operator v1.9.4"

CONDITIONS = ("Created", "Running", "Restarting", "Succeeded", "Failed", "Suspended")
FINISHED = ("Succeeded", "Failed")


def render(cfg: JobConfig, *, name: str, dataset: str, request_id: str, inputs_uri: str,
           after: str | None = None, released_at: str | None = None, runs_prefix: str = "runs/") -> dict[str, Any]:
    """The TFJob as a dict (what is POSTed): the released job that trains on ``inputs_uri``."""
    pod_spec: dict[str, Any] = {
        "serviceAccountName": cfg.trainer_service_account,
        "containers": [jobmeta.container(cfg, name, inputs_uri, runs_prefix)],
    }
    if cfg.gpus_per_worker:
        pod_spec["nodeSelector"] = {"cloud.google.com/gke-accelerator": cfg.accelerator}
        pod_spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    labels = jobmeta.labels(cfg, dataset, request_id)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "namespace": cfg.namespace, "labels": labels,
                     "annotations": jobmeta.annotations_for(cfg, inputs_uri, after, released_at)},
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
                        "metadata": {"labels": {k: v for k, v in labels.items() if k != jobmeta.QUEUE_LABEL}},
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


# -- reading state -------------------------------------------------------------------------------------
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
