"""Where the managed engine's jobs live: Vertex AI's ``customJobs`` of the project and region
(``landfall.submit.backends.aiplatform``, Google's ``JobServiceClient``), behind the same ``Backend`` as a cluster's.

The readers see every engine's job in one shape (``landfall.submit.vertex.render``'s envelope: ``metadata`` with
the name, labels and annotations of ``landfall.submit.jobmeta``, ``spec`` the CustomJob body, ``status``). Vertex AI
names a CustomJob itself and keeps neither annotations nor Kubernetes-style labels, so:

- **Finding a job by Landfall's name**: each CustomJob carries the label ``landfall-job`` (``vertex.labels_for``)
  and its ``displayName`` is the name; ``create`` first looks for one (a retried release finds its job instead of
  making a second: ``AlreadyExists``, as a cluster answers).
- **One creator**: the service has no create-only name, so two submitters racing to create the same job could both
  create it. ``create`` first takes a create-only claim in the job's directory (``runs/<job>/customjob.json``,
  ``Storage.create``): the one that takes it creates; another finds the job (``AlreadyExists``) or, while the
  creation is in flight, raises ``TemporaryError`` (its message is redelivered). A claim with no job after
  ``CLAIM_GRACE_S`` was left by a crash: it is taken over (compare-and-swap on its generation) and the job created.
- **The metadata** rides in every replica's environment as ``LANDFALL_JOB_METADATA`` (JSON: name, labels,
  annotations), which the trainer ignores and ``get`` and ``list`` read back whole.
- **No update**: the API has none for a CustomJob, so ``patch`` is refused (``Invalid``); nothing in the stages
  patches a job.
- ``delete`` cancels a job that has not ended, and deletes one that has.
"""

from __future__ import annotations

import json
import time
from typing import Any

from landfall.core.errors import AlreadyExists, Invalid, NotFound, TemporaryError
from landfall.core.services.storage import Storage
from landfall.submit import jobmeta, vertex
from landfall.submit.backends.aiplatform import VertexJobs
from landfall.submit.config import JobConfig

METADATA_ENV = "LANDFALL_JOB_METADATA"
CLAIM = "customjob.json"  # in the job's directory: who creates the CustomJob
CLAIM_GRACE_S = 120.0  # a claim without its job older than this was left by a crash
OUTPUT_ONLY = ("name", "state", "createTime", "startTime", "endTime", "updateTime", "error", "webAccessUris",
               "satisfiesPzs", "satisfiesPzi")


def _with_metadata(body: dict[str, Any], metadata: dict[str, Any]) -> dict[str, Any]:
    carried = json.dumps({k: metadata.get(k) for k in ("name", "labels", "annotations")}, sort_keys=True)
    out = json.loads(json.dumps(body))
    for pool in out["jobSpec"]["workerPoolSpecs"]:
        env = [e for e in pool["containerSpec"].get("env") or [] if e.get("name") != METADATA_ENV]
        pool["containerSpec"]["env"] = [*env, {"name": METADATA_ENV, "value": carried}]
    return out


def _carried(env: list[dict[str, Any]]) -> dict[str, Any]:
    """The metadata a replica's environment carries; {} when it carries none, or none that parses as an object
    (a CustomJob someone else labelled as Landfall's is then shown by its display name alone)."""
    raw = next((e.get("value") for e in env if e.get("name") == METADATA_ENV), None)
    try:
        carried = json.loads(raw) if isinstance(raw, str) else {}
    except ValueError:
        return {}
    if not isinstance(carried, dict):
        return {}
    return {k: v for k, v in carried.items() if (k == "name" and isinstance(v, str))
            or (k in ("labels", "annotations") and isinstance(v, dict))}


def envelope(resource: dict[str, Any], namespace: str) -> dict[str, Any]:
    """A CustomJob resource in the readers' shape (``vertex.render``'s, with ``status`` from the service)."""
    pools = resource.get("jobSpec", {}).get("workerPoolSpecs") or [{}]
    env = (pools[0].get("containerSpec") or {}).get("env") or []
    carried = _carried(env)
    spec = {k: v for k, v in resource.items() if k not in OUTPUT_ONLY}
    return {
        "apiVersion": vertex.API_VERSION, "kind": vertex.KIND,
        "metadata": {"name": carried.get("name") or resource.get("displayName"), "namespace": namespace,
                     "labels": carried.get("labels") or {}, "annotations": carried.get("annotations") or {},
                     "creationTimestamp": resource.get("createTime")},
        "spec": spec,
        "status": {"state": resource.get("state"), "resource": resource.get("name"),
                   **({"error": resource["error"]} if resource.get("error") else {}),
                   **{k: resource[k] for k in ("startTime", "endTime") if resource.get(k)}},
    }


class VertexBackend:
    """The ``Backend`` of the managed engine: the region's CustomJobs."""

    def __init__(self, jobs: VertexJobs, storage: Storage | None = None):
        self.jobs = jobs
        self.namespace = jobs.parent
        self.storage = storage if storage is not None else Storage()

    def _claim(self, job: dict[str, Any]) -> None:
        """Takes the create-only claim on ``job`` (the module docstring), or raises."""
        name = jobmeta.name_of(job)
        args = next((c["args"] for c in vertex.containers_of(job) if "--job-dir" in c["args"]), [])
        if not args:
            raise Invalid(f"CustomJob {name}: no --job-dir to keep its claim in")
        uri = f"{args[args.index('--job-dir') + 1].rstrip('/')}/{CLAIM}"
        doc = json.dumps({"job": name, "claimed_at": time.time()}).encode()
        if self.storage.create(uri, doc, content_type="application/json"):
            return
        try:
            raw, generation = self.storage.read_generation(uri)
            claimed_at = float(json.loads(raw).get("claimed_at") or 0.0)
        except NotFound:
            raise TemporaryError(f"{uri}: claim vanished; retrying") from None
        except (ValueError, TypeError, AttributeError):
            raw, generation, claimed_at = b"", self.storage.stat(uri).generation, 0.0  # unreadable: a crash's
        if self._find(name) is not None:
            raise AlreadyExists(f"CustomJob {name}: already exists in {self.namespace}")
        if time.time() - claimed_at < CLAIM_GRACE_S:
            raise TemporaryError(f"CustomJob {name}: another submitter is creating it; retrying later")
        self.storage.write_if_generation(uri, doc, generation)  # a lost takeover race raises AlreadyExists

    def _find(self, name: str) -> dict[str, Any] | None:
        found = self.jobs.list(f'labels.{vertex.JOB_LABEL}="{vertex.label_value(name)}" AND '
                               f'display_name="{name}"')
        return max(found, key=lambda j: j.get("createTime") or "") if found else None

    def create(self, job: dict[str, Any]) -> dict[str, Any]:
        name = jobmeta.name_of(job)
        if self._find(name) is not None:
            raise AlreadyExists(f"CustomJob {name}: already exists in {self.namespace}")
        self._claim(job)
        return envelope(self.jobs.create(_with_metadata(job["spec"], job["metadata"])), self.namespace)

    def get(self, name: str) -> dict[str, Any]:
        found = self._find(name)
        if found is None:
            raise NotFound(f"CustomJob {name}: not found in {self.namespace}")
        return envelope(found, self.namespace)

    def list(self, dataset: str | None = None) -> list[dict[str, Any]]:
        query = f'labels.{vertex.MANAGED_LABEL}="landfall"'
        if dataset:
            query += f' AND labels.{vertex.DATASET_LABEL}="{vertex.label_value(dataset)}"'
        jobs = [envelope(j, self.namespace) for j in self.jobs.list(query)]
        if dataset:  # the label is made valid for Vertex AI; the carried one is exact
            jobs = [j for j in jobs if j["metadata"]["labels"].get(jobmeta.DATASET_LABEL)
                    == jobmeta.label_value(dataset)]
        return jobs

    def patch(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        raise Invalid(f"CustomJob {name}: a Vertex AI CustomJob cannot be changed once created (the API has no update)")

    def delete(self, name: str) -> None:
        found = self._find(name)
        if found is None:
            raise NotFound(f"CustomJob {name}: not found in {self.namespace}")
        if vertex.is_finished(envelope(found, self.namespace)):
            self.jobs.delete(found["name"])
        else:
            self.jobs.cancel(found["name"])


def connect(cfg: JobConfig) -> VertexBackend:
    """The CustomJobs of the configured project and region (``LANDFALL_VERTEX_ENDPOINT``: a stand-in's address)."""
    return VertexBackend(VertexJobs(cfg.project, cfg.region, cfg.vertex_endpoint), Storage(cfg.project))
