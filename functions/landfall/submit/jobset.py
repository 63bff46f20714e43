"""Renders the ``JobSet`` (``jobset.x-k8s.io/v1alpha2``, kubernetes-sigs/jobset) the submit stage creates
under ``LANDFALL_ENGINE=jobset``, and reads its state. Pure functions, no I/O, like ``landfall.submit.tfjob``.

The same training as the TFJob, with nothing deprecated in the path (Kueue v0.19 enables
``jobset.x-k8s.io/jobset`` by default and no longer ``kubeflow.org/tfjob``):

- ``metadata``: the TFJob's name, namespace, labels and annotations (``landfall.submit.tfjob``), the
  ``kueue.x-k8s.io/queue-name`` label included. Kueue queues the JobSet as a whole (it owns ``spec.suspend``);
  the pod template does not carry the queue label, so no pod or child Job is queued on its own.
- one replicated job, ``worker``, ``replicas: 1``; its Job: ``completions = parallelism = workers``,
  ``completionMode: Indexed`` (each pod gets ``JOB_COMPLETION_INDEX``), ``backoffLimit: 0`` (the first failed
  pod fails the Job, and JobSet restarts the whole group), ``activeDeadlineSeconds`` (of each attempt: a
  restart creates a new Job), and a ``podFailurePolicy``: exit codes 1-127 of the ``tensorflow`` container
  are the trainer's permanent errors (``FailJob``, so the Job fails with reason ``PodFailurePolicy``).
- the pod: the TFJob's container, image, service account, GPU limits, node selector and tolerations,
  ``restartPolicy: Never`` (required by ``podFailurePolicy``), and the inputs of the trainer's own
  ``TF_CONFIG`` (``trainer.training.cluster``): the JobSet and replicated-job names and the job index from the
  ``jobset.sigs.k8s.io/*`` labels through the downward API, ``LANDFALL_WORKERS`` and ``LANDFALL_TF_PORT``.
- ``network``: ``enableDNSHostnames: true``, ``subdomain: <name>``, so worker ``i`` is reachable as
  ``<name>-worker-0-<i>.<name>`` (JobSet's headless Service).
- ``successPolicy``: ``All`` jobs of ``worker`` (every worker exits 0).
- ``failurePolicy``: the TFJob's exit-code contract. ``maxRestarts = backoffLimit``; a Job that failed with
  reason ``PodFailurePolicy`` (a permanent exit) or ``DeadlineExceeded`` fails the JobSet (``FailJobSet``);
  any other Job failure (exit 128 and up, a killed or evicted pod) matches no rule, and JobSet's default
  action, ``RestartJobSet``, recreates all workers, which resume from their backup.
- ``ttlSecondsAfterFinished``: the finished JobSet (and its Jobs and pods) is deleted after it.

Names: the JobSet is named as the TFJob would be (``jobmeta.job_name``, at most 47 characters), and JobSet's
webhook asks that ``<name>-worker-<j>-<i>-abcde`` be a DNS-1035 label: a name of at most 46 characters for
up to 10 workers, 43 for up to 10,000. Names come from the dataset (a slug of at most 36 characters and 11
for the hash), so only datasets whose names are 33 characters or longer can be too long; ``render`` refuses
those (``Invalid``, a permanent error naming the limit) instead of creating what the webhook rejects. The
names are kept as they are (not shortened for JobSets): the ledger finds released jobs by them.

State: JobSet reports the conditions ``Completed``, ``Failed`` and ``Suspended`` (no ``Running``), and
``status.restarts``, ``terminalState`` and ``replicatedJobsStatus``. ``state()`` speaks the words the rest
of Landfall uses for both engines: ``Succeeded`` for ``Completed``, ``Failed``, ``Suspended``, ``Running``
(a worker active), else ``Pending``.

Sources, read 2026-12-01: the CRD (``config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml``, release
v0.12.0); https://jobset.sigs.k8s.io/docs/concepts/ (labels, hostnames, failure policy);
kubernetes-sigs/jobset ``pkg/constants`` (condition reasons) and ``pkg/controllers/failure_policy.go``;
https://kubernetes.io/docs/tasks/job/pod-failure-policy/.
"""

from __future__ import annotations

from typing import Any

from landfall.core.errors import Invalid
from landfall.submit import jobmeta, tfjob
from landfall.submit.config import JobConfig

API_VERSION = "jobset.x-k8s.io/v1alpha2"
GROUP, VERSION, PLURAL, KIND = "jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet"
# What serves the JobSet: the release k8s/README.md pins (its install line, checked against the upstream tags).
INSTALL = "JobSet v0.12.0"
REPLICATED_JOB = "worker"
TF_PORT = 2222  # the training operator's default TFJob port

# The labels the JobSet controller puts on every Job and pod it creates (read by the downward API).
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
RESTART_LABEL = "jobset.sigs.k8s.io/restart-attempt"

PERMANENT_EXIT_CODES = list(range(1, 128))  # the trainer's contract (trainer.errors): 1-127 permanent
FAIL_REASONS = ("PodFailurePolicy", "DeadlineExceeded")  # Job failure reasons that fail the JobSet

CONDITIONS = ("Completed", "Failed", "Suspended", "StartupPolicyInProgress", "StartupPolicyCompleted")
FINISHED = ("Completed", "Failed")


MAX_LABEL = 63  # a DNS-1035 label
POD_SUFFIX = 6  # "-abcde": the random suffix the JobSet webhook adds when it checks the longest pod name


def longest_pod_name(name: str, workers: int) -> str:
    """What JobSet's admission webhook checks is a DNS-1035 label of at most 63 characters:
    ``<jobset>-<rjob>-<last job index>-<last pod index>-abcde`` (``ValidateCreate``, main of 2026)."""
    return f"{hostname(name, workers - 1)}-abcde"


def check_names(name: str, workers: int) -> None:
    """``Invalid`` when JobSet's webhook would refuse the name for ``workers`` (the job names of Landfall, up to
    47 characters, fit a TFJob; a JobSet's pod names take 17 + digits more: long dataset names do not fit)."""
    longest = longest_pod_name(name, workers)
    if len(longest) > MAX_LABEL:
        room = MAX_LABEL - (len(longest) - len(name))
        raise Invalid(f"JobSet {name}: its pod names ({longest}) would be longer than {MAX_LABEL} characters; "
                      f"with {workers} workers a JobSet name has at most {room} (a shorter dataset name, or "
                      "LANDFALL_ENGINE=tfjob)")


def pod_env(cfg: JobConfig) -> list[dict[str, Any]]:
    """What ``trainer.training.cluster.Cluster.from_env`` builds ``TF_CONFIG`` from (``JOB_COMPLETION_INDEX`` is set by
    the Job controller on every pod of an Indexed Job)."""
    def label(key: str) -> dict[str, Any]:
        return {"valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{key}']"}}}

    return [
        {"name": "LANDFALL_JOBSET_NAME", **label(JOBSET_NAME_LABEL)},
        {"name": "LANDFALL_REPLICATED_JOB", **label(REPLICATED_JOB_LABEL)},
        {"name": "LANDFALL_JOB_INDEX", **label(JOB_INDEX_LABEL)},
        {"name": "LANDFALL_WORKERS", "value": str(cfg.workers)},
        {"name": "LANDFALL_TF_PORT", "value": str(TF_PORT)},
    ]


def render(cfg: JobConfig, *, name: str, dataset: str, request_id: str, inputs_uri: str,
           after: str | None = None, released_at: str | None = None, runs_prefix: str = "runs/") -> dict[str, Any]:
    """The JobSet as a dict (what is POSTed): the same workers, labels and annotations as ``tfjob.render``.
    ``Invalid`` (permanent) when the name is too long for a JobSet's pod names (``check_names``)."""
    check_names(name, cfg.workers)
    twin = tfjob.render(cfg, name=name, dataset=dataset, request_id=request_id, inputs_uri=inputs_uri,
                        after=after, released_at=released_at, runs_prefix=runs_prefix)
    worker = twin["spec"]["tfReplicaSpecs"]["Worker"]
    pod_spec = dict(worker["template"]["spec"])
    (container,) = pod_spec["containers"]
    container = {**container, "env": container["env"] + pod_env(cfg)}
    pod_spec.update(containers=[container], restartPolicy="Never")
    pod_labels = {k: v for k, v in twin["metadata"]["labels"].items() if k != jobmeta.QUEUE_LABEL}
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": twin["metadata"],
        "spec": {
            "network": {"enableDNSHostnames": True, "subdomain": name},
            "successPolicy": {"operator": "All", "targetReplicatedJobs": [REPLICATED_JOB]},
            "failurePolicy": {
                "maxRestarts": cfg.backoff_limit,
                "rules": [{"name": "PermanentOrDeadline", "action": "FailJobSet",
                           "onJobFailureReasons": list(FAIL_REASONS), "targetReplicatedJobs": [REPLICATED_JOB]}],
            },
            "ttlSecondsAfterFinished": cfg.ttl_seconds_after_finished,
            "replicatedJobs": [{
                "name": REPLICATED_JOB,
                "replicas": 1,
                "template": {  # the Jobs get JobSet's own labels; the pods Landfall's
                    "spec": {
                        "completions": cfg.workers,
                        "parallelism": cfg.workers,
                        "completionMode": "Indexed",
                        "backoffLimit": 0,
                        "activeDeadlineSeconds": cfg.active_deadline_seconds,
                        "podFailurePolicy": {"rules": [{
                            "action": "FailJob",
                            "onExitCodes": {"containerName": jobmeta.CONTAINER, "operator": "In",
                                            "values": PERMANENT_EXIT_CODES},
                        }]},
                        "template": {"metadata": {"labels": dict(pod_labels)}, "spec": pod_spec},
                    },
                },
            }],
        },
    }


def worker_job(job: dict[str, Any]) -> dict[str, Any]:
    """The ``worker`` replicated job's Job template spec."""
    (rjob,) = [r for r in job["spec"]["replicatedJobs"] if r.get("name") == REPLICATED_JOB]
    return dict(rjob["template"]["spec"])


def containers_of(job: dict[str, Any]) -> list[dict[str, Any]]:
    return list(worker_job(job)["template"]["spec"]["containers"])


def workers_of(job: dict[str, Any]) -> int:
    return sum(int(r.get("replicas", 1)) * int(r["template"]["spec"].get("parallelism", 1))
               for r in job["spec"]["replicatedJobs"])


def hostname(jobset: str, index: int, replicated_job: str = REPLICATED_JOB, job_index: int = 0) -> str:
    """``<jobset>-<replicatedJob>-<jobIndex>-<podIndex>``: the pod host name with ``enableDNSHostnames``."""
    return f"{jobset}-{replicated_job}-{job_index}-{index}"


# -- reading state -------------------------------------------------------------------------------------
def conditions(job: dict[str, Any]) -> list[dict[str, Any]]:
    return list((job.get("status") or {}).get("conditions") or [])


def is_suspended(job: dict[str, Any]) -> bool:
    return bool(job.get("spec", {}).get("suspend"))


def state(job: dict[str, Any]) -> str:
    for c in reversed(conditions(job)):
        if c.get("status") == "True" and c.get("type") in FINISHED:
            return "Succeeded" if c["type"] == "Completed" else "Failed"
    if is_suspended(job):
        return "Suspended"
    status = job.get("status") or {}
    if any(int(r.get("active", 0)) or int(r.get("ready", 0)) for r in status.get("replicatedJobsStatus") or []):
        return "Running"
    return "Pending"


def restarts(job: dict[str, Any]) -> int:
    return int((job.get("status") or {}).get("restarts") or 0)
