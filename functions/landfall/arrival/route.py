"""Routing by size: convert in the function, or start one execution of the Cloud Run job (issue #15).

**The ceiling.** An event-driven function runs at most 540 s; the converter is deployed with 1 vCPU and
2 GiB (``infra/modules/functions``, ``var.converter``). A file past the ceiling is killed on every attempt,
and the push subscription retries it until it is dead-lettered, so the function converts in-process only
what finishes well inside its timeout.

**Decision: a threshold per format**, on the object's stored size, half of ``timeout x rate x vCPUs``
(``inline_limit``; the half leaves room for storage latency and a slower machine). The rates are measured
by ``landfall bench convert`` and kept in each format's module (``landfall.arrival.format_npy`` ...: its ``rate``,
``landfall.arrival.format_registry``) (the ``--rates`` table: one task pinned to one CPU, as the 1-vCPU function
runs, object bytes over the wall time less start-up; 100,000 seed-shaped instances, 2026-11-30, on the
2-core development machine):

| format | measured, stored bytes/s per vCPU | rate used | threshold (540 s, 1 vCPU) |
|---|---|---|---|
| ``.npy`` | 216 MB/s | 216 MB/s | 58.3 GB |
| ``.csv`` | 115 MB/s | 115 MB/s | 31.1 GB |
| ``.parquet`` | 189 MB/s (snappy, 360 float columns) | 140 MB/s: codecs and layouts vary | 37.8 GB |
| ``.csv.gz`` | 33 MB/s (level 6, ratio 2.3) | 33 MB/s | 8.9 GB |
| ``.npz`` | 112 MB/s (noisy floats barely compress) | 54 MB/s: ``.npy``'s rate over a ratio of 4 | 14.6 GB |

``LANDFALL_INLINE_MAX_BYTES`` replaces all three with one figure (tests and the demo set it tiny, so
small files take the large-file path).

**Above the threshold** the function starts one execution of the Cloud Run job ``LANDFALL_CONVERT_JOB``
(``landfall.arrival.cloudrun``) and returns ``dispatched``. The execution gets ``LANDFALL_SOURCE_BUCKET``,
``LANDFALL_SOURCE_NAME`` and ``LANDFALL_SOURCE_GENERATION`` as container env overrides and a task count from
the size: ``ceil(size / LANDFALL_TASK_BYTES)`` capped by ``LANDFALL_MAX_TASKS`` for splittable formats (those
whose module gives ``ranges``: ``.npy``, ``.csv``, ``.parquet``); ``.npz`` and ``.csv.gz`` cannot be split (a zip
member or a gzip stream is read from its start), so they get one task, which has the job's timeout rather than the
function's. Each task runs ``python -m landfall.arrival.task`` (``landfall.arrival.ranged``), and the committer
publishes through ``landfall.arrival.handler.after_conversion``, as the in-process path does.

**One execution per arrival: the dispatch marker.** ``RunJobRequest`` has no execution id (checked against
``google-cloud-run``: ``name``, ``validate_only``, ``etag``, ``overrides``), so the API cannot answer
AlreadyExists for a second start; the guard is a create-only object next to the arrival's manifest,
``tfrecords/<dataset>/<arrival-id>/dispatch.json`` (``landfall.dispatch/v1``), keyed by bucket, name and
generation through the arrival id:

1. create it (``ifGenerationMatch=0``) with ``execution: null``, then call ``run_job``, then rewrite it with
   the execution's name;
2. a redelivered event finds the marker: with an execution recorded it starts nothing (``duplicate``);
   without one, either a first handler is between its create and ``run_job`` (the marker is younger than
   ``CLAIM_GRACE_S``: raise ``TemporaryError``, the event comes back later) or it crashed there (older:
   this handler calls ``run_job`` itself and records the execution), so a crash never loses the arrival;
3. a failed ``run_job`` deletes the marker before raising, so the retry starts afresh at once.

What remains is at-least-once (two redeliveries racing past the grace of a crashed start both start an
execution), which is safe: tasks write deterministic parts and the manifest is create-only, so a second
execution converges on the same manifest and publishes the same request id. Once the manifest exists, the
handler never reaches this module (``duplicate``: the request is published again). An execution that fails
for good leaves its marker, so no redelivery restarts it; an operator reruns it with the same overrides
(``gcloud run jobs execute``), which is safe for the same reason.

Cloud Run refusing (unknown job, no permission, bad overrides) is an operator's problem: the event is
retried (``TemporaryError``) and ends in the arrival dead-letter topic rather than being acknowledged.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from typing import Any, Literal

from landfall.arrival import format_registry
from landfall.arrival.config import ConverterConfig
from landfall.core.contracts import layout
from landfall.core.contracts.layout import Arrival
from landfall.core.contracts.messages import utc_now
from landfall.core.errors import LandfallError, NotFound, TemporaryError
from landfall.core.runtime import Runtime
from landfall.core.services.storage import Storage

log = logging.getLogger("landfall.arrival.route")

FUNCTION_TIMEOUT_S = 540  # infra/modules/functions var.converter.timeout_seconds
FUNCTION_VCPUS = 1  # var.converter.cpu
SAFETY = 0.5
ENV_BUCKET, ENV_NAME, ENV_GENERATION = "LANDFALL_SOURCE_BUCKET", "LANDFALL_SOURCE_NAME", "LANDFALL_SOURCE_GENERATION"
DISPATCH_SCHEMA = "landfall.dispatch/v1"
CLAIM_GRACE_S = 120.0  # a marker without an execution older than this was left by a crash
# Cloud Storage takes at most one write a second to one object name ("Maximum rate of writes to the same object
# name", https://cloud.google.com/storage/quotas, read 2026-12-03): the marker is rewritten no sooner than that.
OBJECT_WRITE_INTERVAL_S = 1.0

Dispatched = Literal["dispatched", "duplicate"]


def inline_limit(fmt: str, cfg: ConverterConfig) -> int:
    """The largest object (stored bytes) of format ``fmt`` the function converts in-process."""
    if cfg.inline_max_bytes is not None:
        return cfg.inline_max_bytes
    return int(SAFETY * FUNCTION_TIMEOUT_S * FUNCTION_VCPUS * format_registry.named(fmt).rate)


def converts_inline(fmt: str, size: int, cfg: ConverterConfig) -> bool:
    # A series (landfall.arrival.series) past the limit is converted in ranged tasks too: each task windows its share
    # from its first row and looks length - 1 rows past its end (landfall.arrival.series.convert_share).
    return size <= inline_limit(fmt, cfg)


def task_count(fmt: str, size: int, cfg: ConverterConfig) -> int:
    if format_registry.named(fmt).ranges is None:  # not splittable: one task converts it whole
        return 1
    return max(1, min(cfg.max_tasks, -(-size // cfg.task_bytes)))


def task_env(arrival: Arrival) -> dict[str, str]:
    return {ENV_BUCKET: arrival.bucket, ENV_NAME: arrival.name, ENV_GENERATION: str(arrival.generation)}


def marker_uri(arrival: Arrival, lay: Any) -> str:
    return layout.gs(arrival.bucket, layout.dispatch_name(lay, arrival.dataset, arrival.arrival_id))


@dataclasses.dataclass(frozen=True)
class Marker:
    job: str
    task_count: int
    created: float  # epoch seconds
    execution: str | None = None

    def to_json(self, arrival: Arrival) -> bytes:
        return json.dumps({
            "schema": DISPATCH_SCHEMA, "dataset": arrival.dataset, "arrival_id": arrival.arrival_id,
            "source": {"bucket": arrival.bucket, "name": arrival.name, "generation": arrival.generation},
            "job": self.job, "task_count": self.task_count, "created": self.created,
            "execution": self.execution, "updated_at": utc_now()}, indent=2).encode()

    @classmethod
    def read(cls, storage: Storage, uri: str) -> Marker | None:
        try:
            doc = json.loads(storage.read_bytes(uri))
            return cls(str(doc["job"]), int(doc["task_count"]), float(doc["created"]), doc.get("execution"))
        except NotFound:
            return None
        except (ValueError, KeyError, TypeError):
            return cls("", 0, 0.0)  # unreadable: treated as left by a crash


def dispatch(arrival: Arrival, fmt: str, size: int, rt: Runtime[ConverterConfig]) -> Dispatched:
    """Starts the job's execution for ``arrival`` unless one was started already (the marker above)."""
    cfg = rt.config
    uri = marker_uri(arrival, rt.layout)
    count = task_count(fmt, size, cfg)
    context = {"arrival_id": arrival.arrival_id, "dataset": arrival.dataset}
    marker = Marker(cfg.convert_job, count, time.time())
    created = rt.storage.create(uri, marker.to_json(arrival), content_type="application/json")
    written_at = time.time()  # the create's request was sent before this: a rewrite a second on is within the rate
    if not created:
        found = Marker.read(rt.storage, uri)
        if found is None:  # removed by a failed start meanwhile: the event comes back
            raise TemporaryError(f"{uri}: dispatch marker vanished; retrying")
        if found.execution:
            log.info("%s: execution %s already started", arrival.name, found.execution,
                     extra={**context, "fields": {"execution": found.execution, "marker": uri}})
            return "duplicate"
        if time.time() - found.created < CLAIM_GRACE_S:
            raise TemporaryError(f"{uri}: another handler is starting the job; retrying later")
        log.warning("%s: dispatch marker without an execution (a crashed start): starting it again", arrival.name,
                    extra={**context, "fields": {"marker": uri}})
    try:
        execution = rt.jobs.run(cfg.convert_job, count, task_env(arrival))
    except LandfallError as exc:
        rt.storage.delete(uri)  # the retry starts afresh, without waiting out the grace
        if isinstance(exc, TemporaryError):
            raise
        raise TemporaryError(f"starting {cfg.convert_job} for {arrival.name}: {exc}") from exc
    time.sleep(max(0.0, written_at + OBJECT_WRITE_INTERVAL_S - time.time()))  # a Cloud Run start is ~1 s anyway
    rt.storage.write_bytes(uri, dataclasses.replace(marker, execution=execution).to_json(arrival),
                           content_type="application/json")
    log.info("%s: %d bytes, %d tasks: started %s", arrival.name, size, count, execution,
             extra={**context, "fields": {"execution": execution, "tasks": count, "size": size, "marker": uri}})
    return "dispatched"
