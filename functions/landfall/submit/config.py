"""The submit stage's configuration: the bucket, the backend and the shape of the TFJob (``LANDFALL_<FIELD>``)."""

from __future__ import annotations

import dataclasses

from landfall.core.config import BACKENDS, DATASET_MODES, ENGINE_BACKENDS, ENGINES, Seed, Settings, default_project

POLICIES = ("coalesce", "allow", "forbid")
CAPACITY_MODES = ("standard", "spot", "flex_start")  # how a managed engine obtains its machines (vertex)
__all__ = ["BACKENDS", "ENGINES", "POLICIES", "JobConfig"]


@dataclasses.dataclass(frozen=True)
class JobConfig(Settings):
    """What the submit stage needs: the bucket, the backend and the shape of the TFJob.

    Environment: ``LANDFALL_<FIELD>`` (``LANDFALL_BUCKET``, ``LANDFALL_BACKEND``, ``LANDFALL_ENGINE``,
    ``LANDFALL_NAMESPACE``, ``LANDFALL_TRAINER_IMAGE``, ``LANDFALL_TRAINER_SERVICE_ACCOUNT``, ``LANDFALL_GKE_ENDPOINT``,
    ``LANDFALL_GKE_CA_CERT``, ``LANDFALL_LOCAL_STATE``, ``LANDFALL_WORKERS`` ...).
    """

    bucket: str = ""
    backend: str = "local"  # kubernetes | local | customjobs
    # What trains: a Kubeflow TFJob (training operator), a JobSet (kubernetes-sigs/jobset) or a Vertex AI CustomJob
    # (no cluster: backend customjobs); landfall.submit.engine.
    engine: str = "tfjob"  # tfjob | jobset | vertex
    namespace: str = "landfall-training"
    # Kubernetes access: GKE endpoint + CA (a Cloud Function outside the cluster), else in-cluster, else kubeconfig.
    gke_endpoint: str = ""
    gke_ca_cert: str = ""  # PEM, base64 of PEM (Terraform's cluster_ca_certificate) or a file path
    kubeconfig: str = ""
    local_state: str = "./.landfall/local"
    # The TFJob.
    trainer_image: str = "trainer:latest"
    trainer_service_account: str = "landfall-trainer"
    workers: int = 2
    gpus_per_worker: int = 1
    accelerator: str = "nvidia-l4"
    cpu_request: str = "4"
    memory_request: str = "16Gi"
    epochs: int = Seed.EPOCHS
    batch_size_per_worker: int = Seed.BATCH_SIZE_PER_WORKER
    trainer_args: tuple[str, ...] = ()  # extra trainer flags, e.g. model size: --units,16,8 (comma-separated env)
    clean_pod_policy: str = "Running"
    backoff_limit: int = 3
    active_deadline_seconds: int = 6 * 3600
    ttl_seconds_after_finished: int = 7 * 86400 + 3600
    # Vertex AI custom training (landfall.submit.vertex): where and on what the CustomJob runs. The region
    # (LANDFALL_REGION), the machine type (empty: the published machine for the accelerator and GPU count,
    # landfall.submit.vertex.MACHINES), and how capacity is obtained: standard (on demand), spot (preemptible,
    # cheaper) or flex_start (Dynamic Workload Scheduler: waits for the GPUs up to flex_max_wait_seconds, then fails).
    region: str = "us-central1"
    machine_type: str = ""
    capacity: str = "standard"  # standard | spot | flex_start
    flex_max_wait_seconds: int = 24 * 3600
    vertex_endpoint: str = ""  # the JobService's host (default <region>-aiplatform.googleapis.com); http://: a stand-in
    # Which manifests and how concurrent requests combine (landfall.submit.coalesce).
    concurrency: str = "coalesce"  # coalesce | allow | forbid
    window: int = 0  # 0: all the dataset's manifests; N: the newest N arrivals
    # open | registered: registered refuses requests of datasets without a spec (landfall.core.artifacts.specs).
    datasets: str = "open"
    queue_name: str = ""  # Kueue LocalQueue (k8s/components/kueue: landfall-gpu); labels every TFJob when set
    # Pub/Sub (republish, status).
    request_topic: str = "landfall-training-requests"
    dead_letter_subscription: str = "landfall-training-requests-dead-letter"
    results_topic: str = "landfall-training-results"  # the reconciler announces jobs that ended without a chief
    project: str = dataclasses.field(default_factory=default_project)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, not {self.backend!r}")
        if self.engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, not {self.engine!r}")
        if self.backend not in ENGINE_BACKENDS[self.engine]:
            raise ValueError(f"engine {self.engine} runs on backend {' or '.join(ENGINE_BACKENDS[self.engine])}, "
                             f"not {self.backend!r} (LANDFALL_ENGINE, LANDFALL_BACKEND)")
        if self.capacity not in CAPACITY_MODES:
            raise ValueError(f"capacity must be one of {CAPACITY_MODES}, not {self.capacity!r}")
        if self.datasets not in DATASET_MODES:
            raise ValueError(f"datasets must be one of {DATASET_MODES}, not {self.datasets!r}")
        if self.concurrency not in POLICIES:
            raise ValueError(f"concurrency must be one of {POLICIES}, not {self.concurrency!r}")
        if self.queue_name and not (len(self.queue_name) <= 63 and self.queue_name.replace("-", "").isalnum()):
            raise ValueError(f"queue_name must be a LocalQueue name (a DNS label), not {self.queue_name!r}")
        if self.workers < 1 or self.gpus_per_worker < 0 or self.window < 0 or self.backoff_limit < 0:
            raise ValueError("workers must be >= 1; gpus_per_worker, window and backoff_limit >= 0")
