"""The submit stage: a ``landfall.request/v1`` message becomes (at most) one TFJob.

Entry point ``functions/main.py:on_training_request`` (a Pub/Sub-triggered CloudEvent function, retries
on) calls ``handle_message(data, attributes, runtime())``. Steps: validate the request, read and
validate its manifest, decide (``landfall.submit.coalesce``: duplicate, new job, follow-up, dropped), render
the TFJob (``landfall.submit.tfjob``) and create it through the configured backend (``LANDFALL_BACKEND``:
``kubernetes`` or ``local``).

Outcomes, as Pub/Sub users expect them:

- ``submitted`` / ``coalesced`` / ``held`` (recorded; the dataset's retrain policy holds its release:
  ``landfall.submit.policy``) / ``duplicate`` / ``dropped`` (policy ``forbid``, logged as WARNING): returns
  normally, the message is acknowledged.
- ``rejected``: a permanent error (malformed request, a manifest that is missing, unreadable as JSON
  or invalid, a manifest of another dataset, a TFJob the API server refuses with 422, a cluster without the
  engine's CRD: ``MissingCRD``, whose line names the CRD and both ways out). Acknowledged,
  logged as ERROR and recorded as ``gs://BUCKET/rejected/<dataset>/request-<request_id>.json``
  (``_invalid/`` when the dataset is not known or not valid).
- ``LANDFALL_BUCKET`` unset: every well-formed request raises ``TemporaryError`` (redelivered, then
  dead-lettered, where ``landfall status`` shows it and it can be replayed once the bucket is set). The
  safe default: a request never chooses the bucket the ledger, the job's inputs and its rejection record
  are written to (the rejection of a malformed request is then logged only).
- ``TemporaryError`` raised: the backend is unreachable or throttling, Cloud Storage is unavailable, a
  conflicting update kept losing. Pub/Sub redelivers with backoff and, after the subscription's maximum
  delivery attempts, moves the message to ``landfall-training-requests-dead-letter``, which
  ``landfall status`` shows.

Stateless: what it knows comes from the backend (labels and annotations on the TFJobs) and the
bucket, so any number of instances may run at once.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from typing import Any

from landfall.core.artifacts import rejections
from landfall.core.contracts import layout
from landfall.core.contracts.layout import Layout
from landfall.core.contracts.messages import Manifest, Rejection, TrainingRequest, clip, loads
from landfall.core.errors import Invalid, NotFound, PermanentError, TemporaryError
from landfall.core.runtime import Runtime
from landfall.core.services.storage import Storage
from landfall.submit import coalesce
from landfall.submit.backends import Backend, open_backend
from landfall.submit.config import JobConfig

log = logging.getLogger("landfall.submitter")


SubmitRuntime = Runtime[JobConfig]


def runtime_from_env() -> SubmitRuntime:
    config = JobConfig.load()
    return Runtime(config, Layout.load(), Storage(config.project))


@functools.cache
def runtime() -> SubmitRuntime:
    """Built once per instance from the environment (``LANDFALL_*``, ``GOOGLE_CLOUD_PROJECT``)."""
    return runtime_from_env()


def backend_of(rt: SubmitRuntime) -> Backend:
    """Opened on first use, so a backend that cannot be configured is a temporary error of a request."""
    if rt.backend is None:
        rt.backend = open_backend(rt.config)
    return rt.backend  # type: ignore[no-any-return]


def validate(request: TrainingRequest, rt: SubmitRuntime) -> Manifest:
    """Permanent errors for a request no retry can fix; the manifest it names, validated."""
    if not layout.valid_dataset(request.dataset):  # from_message checked it; a request built in code too
        raise Invalid(f"dataset {clip(request.dataset)} is not a valid dataset name")
    if not rt.config.bucket:
        raise TemporaryError("LANDFALL_BUCKET is not set: the submit stage writes only to its configured bucket, "
                             "never to one a request names (the request is retried, then dead-lettered)")
    bucket, name = layout.split_gs(request.manifest)
    if bucket != rt.config.bucket:
        raise Invalid(f"manifest {clip(request.manifest)} is not in the bucket gs://{rt.config.bucket}")
    if layout.manifest_arrival(rt.layout, request.dataset, name) is None:
        raise Invalid(f"manifest {clip(request.manifest)} is not one of dataset {request.dataset}'s manifests "
                      f"(gs://{bucket}/{layout.dataset_prefix(rt.layout, request.dataset)}<arrival-id>/"
                      f"{layout.MANIFEST})")
    try:
        text = rt.storage.read_bytes(request.manifest)
    except NotFound:
        raise NotFound(f"manifest {request.manifest} does not exist") from None
    manifest = Manifest.from_json(text, request.manifest)
    if manifest.dataset != request.dataset:
        raise Invalid(f"manifest {request.manifest} is of dataset {manifest.dataset!r}, not {request.dataset!r}")
    return manifest


def handle_message(data: bytes | str | None, attributes: dict[str, Any] | None, rt: SubmitRuntime) -> str:
    """Returns the outcome; permanent errors are recorded and return ``rejected``; temporary ones raise."""
    request: TrainingRequest | None = None
    try:
        request = TrainingRequest.from_message(data, attributes)
        manifest = validate(request, rt)
        decision = coalesce.submit(request, rt.config, backend_of(rt), rt.storage, rt.layout, rt.clock)
    except PermanentError as exc:
        _reject(data, attributes, request, exc, rt)
        return "rejected"
    ctx = {"dataset": request.dataset, "request_id": request.request_id, "job": decision.job,
           "fields": {"outcome": decision.outcome, "manifest": request.manifest, "reason": request.reason,
                      "count": manifest.count, "detail": decision.detail}}
    if decision.outcome == "dropped":
        log.warning("request %s dropped: %s", request.request_id, decision.detail, extra=ctx)
    else:
        log.info("request %s: %s %s (%s)", request.request_id, decision.outcome, decision.job, decision.detail,
                 extra=ctx)
    return decision.outcome


def _reject(data: bytes | str | None, attributes: dict[str, Any] | None, request: TrainingRequest | None,
            exc: PermanentError, rt: SubmitRuntime) -> None:
    raw = data.decode(errors="replace") if isinstance(data, bytes) else (data or "")
    try:
        parsed = loads(raw, "request") if raw else dict(attributes or {})
    except Invalid:
        parsed = {}
    parsed = parsed if isinstance(parsed, dict) else {}
    dataset = request.dataset if request else str(parsed.get("dataset") or "")[:64]
    request_id = request.request_id if request else str(parsed.get("request_id") or "")
    key = request_id if layout.valid_request_id(request_id) and len(request_id) <= 64 else (
        "sha-" + hashlib.sha256(raw.encode() + json.dumps(attributes or {}, sort_keys=True).encode()).hexdigest()[:20])
    request_id = request_id if layout.valid_request_id(request_id) or not request_id else clip(request_id, 40)
    bucket = rt.config.bucket  # unset: logged only, never written to a bucket the request names
    rejection = Rejection(stage="submit", reason=type(exc).__name__, detail=str(exc), dataset=dataset or None,
                          request=parsed or raw[:2000])
    rejections.record(rejection, f"training request {request_id or '(no id)'}", storage=rt.storage,
                      lay=rt.layout, bucket=bucket or None, key=f"request-{key}",
                      context={"request_id": request_id or None})
