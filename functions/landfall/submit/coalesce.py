"""Which TFJob a training request becomes: exactly once, coalesced, nothing lost, in any delivery order.

Correct without ordering: any number of consumers handling any requests, duplicated and reordered, make
per dataset at most one unfinished job, and every arrival is trained on by a job released after it
arrived. Nothing relies on delivery order; only on primitives the platform guarantees: objects created
with ``ifGenerationMatch=0`` and ``AlreadyExists`` on create (``landfall.submit.ledger`` holds the records).

Policies ``coalesce`` (default) and ``forbid``
    Handling request R (dataset D, manifest M, written before R was published):
    1. R is recorded as *pending* (``requests/<D>/pending/<request_id>.json``).
    2. ``advance(D)``: if D's newest job (the *head*) is unfinished, R waits: it is coalesced into the
       next job, whatever else arrives meanwhile (``forbid`` drops it instead). Otherwise the next job is
       *released*: the pending requests are listed first, then D's manifests (all, or the newest
       ``window``; retracted arrivals left out), so every listed request's manifest is among them (checked:
       a miss is a temporary error, never a job without its data). ``runs/<job>/inputs.json`` is created
       create-only (of concurrent releasers exactly one wins; the others look again and find the job
       active), then the TFJob, which names only that URI, then the covered pending records are removed.
    A request recorded before (``received/<D>/<request_id>.json``) is a duplicate delivery, however late:
    it is not recorded again, and only what its first delivery may have left undone (a release) is done.
    A pending request that the head already covers (its id, or for an arrival its manifest, is in the
    head's inputs) is a duplicate delivered concurrently with its first (before ``received`` existed): the
    release removes it without starting a job for it.
    A pending request whose manifest the listing lacks never blocks its dataset (``_sort_out``): if the
    manifest no longer exists (deleted by hand, or its ``tfrecords/`` swept by the lifecycle rule), the
    request is rejected for good (``rejected/<D>/request-<id>.json``, reason ``NotFound``) and its pending
    record removed; if it exists but is not listed (listing lag), the release is retried (``TemporaryError``)
    for at most ``LISTING_LAG_S`` after the request was recorded, then the request is rejected (``Invalid``).
    The same holds for a dataset with no manifest at all. The others are released as usual;
    ``landfall status`` shows the pending requests, their age and whether their manifest is missing.
    Nothing waits as a suspended TFJob: Kueue owns ``spec.runPolicy.suspend``, and the pending set is the
    follow-up. ``reconcile()`` (``landfall reconcile``, the local operator, ``landfall status --reconcile``)
    releases the next job of every dataset with pending requests once its head ended, so a follow-up
    starts within seconds even without new requests.

Policy ``allow``
    Every request gets its own job (named from its ``request_id``), released at once; the create-only
    ``inputs.json`` makes a redelivery a duplicate.

Object sizes do not grow with history: a TFJob carries the inputs URI and a few labels and annotations;
inputs live in the bucket. Per request the work is constant (a hint read, one probe, reads of the head TFJob
and of its ``submitted.json``, one existence check, two writes); a release lists the pending requests and the
dataset's manifests once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from datetime import datetime

from landfall.core import rejections, retractions, snapshots, specs
from landfall.core.config import Layout
from landfall.core.errors import AlreadyExists, Invalid, NotFound, PermanentError, TemporaryError
from landfall.core.layout import dataset_prefix, gs
from landfall.core.messages import InputManifest, JobInputs, Rejection, TrainingRequest
from landfall.core.storage import Storage
from landfall.submit import engine, tfjob
from landfall.submit.backends import Backend
from landfall.submit.config import JobConfig
from landfall.submit.ledger import Ledger, request_entry

log = logging.getLogger("landfall.submit.coalesce")

ATTEMPTS = 8
# How long a pending request whose manifest exists but is not listed is retried (listing lag) before it is
# rejected. Cloud Storage's listings are strongly consistent, so this only absorbs a slow or stale replica.
LISTING_LAG_S = 300.0


@dataclasses.dataclass(frozen=True)
class Decision:
    outcome: str  # submitted | coalesced | duplicate | dropped
    job: str | None
    detail: str = ""


@dataclasses.dataclass(frozen=True)
class Advance:
    state: str  # released | active | idle
    job: str | None
    inputs: JobInputs | None = None


def _resolve(dataset: str, bucket: str, window: int, storage: Storage, layout: Layout) -> tuple[
        list[InputManifest], retractions.Listing]:
    """The manifests a job of ``dataset`` trains on, resolved now: all, or the newest ``window`` (by the
    generations the listing returns), leaving out retracted arrivals; and the listing itself."""
    listing = retractions.list_dataset(storage, gs(bucket, dataset_prefix(layout, dataset)))
    found = listing.live
    if window and len(found) > window:
        found = sorted(sorted(found, key=lambda i: (i.generation, i.uri))[-window:], key=lambda i: i.uri)
    return [InputManifest(uri=i.uri, generation=i.generation, count=i.count) for i in found], listing


def job_name_for(dataset: str, policy: str, *, request_id: str = "", seq: int = 1) -> str:
    """The one naming rule: under ``allow`` a job is named from its request, otherwise from its number."""
    if policy == "allow":
        return tfjob.job_name(dataset, "request:" + request_id)
    return tfjob.job_name(dataset, f"seq:{seq}")


def submit(request: TrainingRequest, cfg: JobConfig, backend: Backend, storage: Storage,
           layout: Layout | None = None) -> Decision:
    """Decides and acts for one validated request. Raises ``TemporaryError`` (retry) or ``Invalid``."""
    layout = layout or Layout()
    if not cfg.bucket:  # never the bucket a request names (landfall.submit.handler)
        raise TemporaryError("LANDFALL_BUCKET is not set: not acting on the bucket a request names")
    if cfg.datasets == "registered" and not specs.for_dataset(storage, cfg.bucket, request.dataset, layout).registered:
        raise Invalid(f"{specs.UNKNOWN_DATASET}: dataset {request.dataset} has no spec and LANDFALL_DATASETS="
                      "registered accepts only datasets with one (`landfall datasets apply`)")
    ledger = Ledger(storage, cfg.bucket, layout)
    if cfg.concurrency == "allow":
        return _own_job(request, cfg, backend, ledger)
    seq = ledger.head_seq(request.dataset)
    head = ledger.job_name(request.dataset, seq) if seq else None
    recorded, state = False, "ended"
    if head is not None:
        state, job = _state(head, cfg, backend, ledger)
        if job is not None and tfjob.made_for(job, request.request_id):
            return Decision("duplicate", head, "this job was made for it")
        if state == "created" and _covers(ledger.read_inputs(head), request):  # a crash left it without TFJob
            return Decision("submitted", head, "released before; its TFJob created now")
    if ledger.was_received(request):
        # A redelivery, possibly after later jobs: it waits, or a released job covered it. Its first
        # delivery may have died before releasing, so advance, but never record it twice.
        step = advance(request.dataset, cfg, backend, ledger)
        if step.state == "released" and step.inputs and _covers(step.inputs, request):
            return Decision("submitted", step.job, f"{len(step.inputs.manifests)} manifests")
        return Decision("duplicate", step.job, "received before")
    if head is not None and state != "ended":
        if cfg.concurrency == "forbid":
            return Decision("dropped", head, f"job {head} is not finished (policy forbid)")
        # Waits for the next release, which drops it if the head covers it already (a redelivery):
        # deciding that here would read the head's inputs, which grow with the dataset, per request.
        ledger.record(request)
        recorded = True
        # Look again once recorded: had the head ended meanwhile, nobody else might release for us.
        if not _ended(head, cfg, backend, ledger):
            return Decision("coalesced", head, f"waits for {head} to finish")
    if not recorded:
        ledger.record(request)
    step = advance(request.dataset, cfg, backend, ledger)
    if step.state == "released" and step.inputs and _covers(step.inputs, request):
        return Decision("submitted", step.job, f"{len(step.inputs.manifests)} manifests")
    if step.state == "active":  # another consumer released it meanwhile (with this request, or it waits)
        return Decision("coalesced", step.job, f"joins or waits for {step.job}")
    return Decision("duplicate", step.job, "already covered")


def advance(dataset: str, cfg: JobConfig, backend: Backend, ledger: Ledger) -> Advance:
    """Releases ``dataset``'s next job if its head ended and requests are pending; else says why not."""
    for _ in range(ATTEMPTS):
        seq = ledger.head_seq(dataset)
        head = ledger.job_name(dataset, seq) if seq else None
        if head is not None and not _ended(head, cfg, backend, ledger):
            return Advance("active", head)
        since = ledger.pending_since(dataset)
        if not since:
            return Advance("idle", head)
        pending = [r for r, _ in since]
        covered = ledger.read_inputs(head) if head else None
        fresh = [r for r in pending if not (covered and _covers(covered, r))]
        if len(fresh) < len(pending):
            ledger.drop_pending(dataset, [r.request_id for r in pending if r not in fresh])
        if not fresh:
            return Advance("idle", head, covered)
        manifests, listing = _resolve(dataset, ledger.bucket, cfg.window, ledger.storage, ledger.layout)
        recorded = {r.request_id: t for r, t in since}
        fresh, lost = _sort_out(dataset, fresh, manifests, cfg, ledger, recorded)
        if lost:
            _reject_lost(dataset, lost, ledger)
        if not fresh:
            return Advance("idle", head, covered)
        try:  # the spec in force now: the job is rendered from this generation, whatever is applied later
            spec = specs.for_dataset(ledger.storage, ledger.bucket, dataset, ledger.layout)
            with_spec(cfg, dataset, spec)
        except Invalid as exc:  # rejected for good, as a lost request: an unusable spec never sticks its dataset
            _reject_lost(dataset, [(r, exc) for r in fresh], ledger)
            return Advance("idle", head, covered)
        inputs = _job_inputs(dataset, seq + 1, head, fresh, manifests, cfg, ledger, listing, spec.generation)
        if not ledger.create_inputs(inputs):
            continue  # another consumer released this job first: look again
        _create_job(inputs, cfg, backend, ledger)
        ledger.drop_pending(dataset, [r.request_id for r in fresh])
        log.info("released %s with %d manifests for %d requests", inputs.job, len(inputs.manifests),
                 len(fresh), extra={"job": inputs.job, "dataset": dataset,
                                    "fields": {"manifests": len(inputs.manifests), "requests": len(fresh),
                                               "seq": inputs.seq}})
        return Advance("released", inputs.job, inputs)
    raise TemporaryError(f"jobs of {dataset} kept changing while releasing the next one")


def _covers(inputs: JobInputs, request: TrainingRequest) -> bool:
    if request.request_id in {r["request_id"] for r in inputs.requests}:
        return True
    return request.reason == "arrival" and request.manifest in inputs.manifest_uris


def _sort_out(dataset: str, requests: list[TrainingRequest], manifests: list[InputManifest], cfg: JobConfig,
              ledger: Ledger, recorded: dict[str, float]) -> tuple[list[TrainingRequest],
                                                                 list[tuple[TrainingRequest, PermanentError]]]:
    """The requests a job can be released for now, and those rejected for good because their data cannot be
    found; raises ``TemporaryError`` while one's manifest exists but is not listed, for at most ``LISTING_LAG_S``.

    The manifests were listed *after* the requests, so each arrival's manifest is there unless it is gone."""
    listed = {m.uri for m in manifests}
    ready, lost = [], []
    for r in requests:
        if manifests and (r.reason != "arrival" or r.manifest in listed or cfg.window
                          or retractions.manifest_is_retracted(ledger.storage, r.manifest)):
            ready.append(r)
            continue
        where = "the listing of its dataset's manifests" if manifests else f"dataset {dataset} (it has no manifest)"
        if not ledger.storage.exists(r.manifest):
            lost.append((r, NotFound(f"request {r.request_id} names {r.manifest}, which no longer exists (deleted, "
                                     "or swept by the lifecycle rule, before a job was released for it)")))
            continue
        age = time.time() - recorded.get(r.request_id, time.time())
        if age < LISTING_LAG_S:
            raise TemporaryError(f"request {r.request_id} names {r.manifest}, which {where} lacks (listing lag?): "
                                 f"retried for {LISTING_LAG_S:.0f} s after it was recorded ({age:.0f} s ago)")
        lost.append((r, Invalid(f"request {r.request_id} names {r.manifest}, which exists but {where} still "
                                f"lacks {age:.0f} s after it was recorded (bound {LISTING_LAG_S:.0f} s)")))
    return ready, lost


def _reject_lost(dataset: str, lost: list[tuple[TrainingRequest, PermanentError]], ledger: Ledger) -> None:
    """Records each request rejected for good and removes its pending record: it never blocks the dataset."""
    for r, exc in lost:
        rejection = Rejection(stage="submit", reason=type(exc).__name__, detail=str(exc), dataset=dataset,
                              request={"schema": r.schema, "dataset": r.dataset, "manifest": r.manifest,
                                       "request_id": r.request_id, "reason": r.reason, "arrived_at": r.arrived_at})
        rejections.record(rejection, f"training request {r.request_id}", storage=ledger.storage, lay=ledger.layout,
                          bucket=ledger.bucket, key=f"request-{r.request_id}", context={"request_id": r.request_id})
    ledger.drop_pending(dataset, [r.request_id for r, _ in lost])


def _job_inputs(dataset: str, seq: int, after: str | None, requests: list[TrainingRequest],
                manifests: list[InputManifest], cfg: JobConfig, ledger: Ledger,
                listing: retractions.Listing, spec_generation: int | None = None) -> JobInputs:
    job = ledger.job_name(dataset, seq)
    inputs = JobInputs(dataset=dataset, job=job, seq=seq, manifests=manifests,
                       requests=[request_entry(r) for r in requests], after=after, window=cfg.window,
                       spec_generation=spec_generation)
    # The newest snapshot plus the delta (landfall.core.snapshots), unless a window picks manifests by age.
    return inputs if cfg.window else snapshots.with_snapshot(inputs, listing, ledger.storage, ledger.bucket,
                                                             ledger.layout)


def with_spec(cfg: JobConfig, dataset: str, spec: specs.DatasetSpec) -> JobConfig:
    """``cfg`` with ``spec`` over it: the job's resources, epochs and batch size, and the trainer flags for its
    model, training and verdict settings. ``Invalid`` for a spec this deployment cannot run: another engine than
    its backend's (``LANDFALL_ENGINE``; one backend per deployment), or values ``JobConfig`` refuses."""
    if not spec.registered:
        return cfg
    fields = spec.job_fields(cfg.trainer_args)
    if fields.get("engine", cfg.engine) != cfg.engine:
        raise Invalid(f"dataset {dataset}'s spec generation {spec.generation} asks for engine {fields['engine']!r}; "
                      f"this deployment runs {cfg.engine!r} (LANDFALL_ENGINE)")
    try:
        return dataclasses.replace(cfg, **fields)
    except ValueError as exc:
        raise Invalid(f"dataset {dataset}'s spec generation {spec.generation}: {exc}") from None


def spec_config(cfg: JobConfig, dataset: str, generation: int | None, ledger: Ledger) -> JobConfig:
    """``cfg`` with the dataset's spec of ``generation`` (the one its ``inputs.json`` records) over it. That
    generation gone (replaced, in a bucket without versions) and the current one unusable: ``cfg`` itself, logged."""
    spec = specs.at_generation(ledger.storage, ledger.bucket, dataset, generation, ledger.layout)
    if spec.generation != generation:
        log.warning("spec generation %s of %s is gone; rendering with generation %s", generation, dataset,
                    spec.generation, extra={"dataset": dataset})
    try:
        return with_spec(cfg, dataset, spec)
    except Invalid as exc:
        log.error("%s; rendering with the deployment's settings", exc, extra={"dataset": dataset})
        return cfg


def _create_job(inputs: JobInputs, cfg: JobConfig, backend: Backend, ledger: Ledger) -> None:
    cfg = spec_config(cfg, inputs.dataset, inputs.spec_generation, ledger)
    job = engine.render(cfg, name=inputs.job, dataset=inputs.dataset, inputs_uri=ledger.inputs_uri(inputs.job),
                        request_id=inputs.requests[0]["request_id"] if inputs.requests else "",
                        after=inputs.after, released_at=inputs.released_at, runs_prefix=ledger.layout.runs_prefix)
    with contextlib.suppress(AlreadyExists):  # a consumer that lost the race, or a retry, created it already
        backend.create(job)
    ledger.mark_submitted(inputs.job)


def _ended(name: str, cfg: JobConfig, backend: Backend, ledger: Ledger) -> bool:
    return _state(name, cfg, backend, ledger)[0] == "ended"


def _state(name: str, cfg: JobConfig, backend: Backend, ledger: Ledger) -> tuple[str, dict | None]:
    """``ended``, ``active`` or ``created`` (now) for the released job ``name``, and its TFJob. A missing
    TFJob that was created ended (TTL, or deleted by hand); one never created (a crash after its release)
    is created now.

    ``submitted.json`` is read *before* the TFJob: read after, a releaser could create the TFJob and mark
    it between the two reads, and a job that just started would look deleted, hence ended."""
    submitted = ledger.was_submitted(name)
    try:
        job = backend.get(name)
        return ("ended" if engine.is_finished(job) else "active"), job
    except NotFound:
        pass
    if submitted:
        return "ended", None
    _create_job(ledger.read_inputs(name), cfg, backend, ledger)
    return "created", None


def _own_job(request: TrainingRequest, cfg: JobConfig, backend: Backend, ledger: Ledger) -> Decision:
    name = job_name_for(request.dataset, "allow", request_id=request.request_id)
    manifests, listing = _resolve(request.dataset, ledger.bucket, cfg.window, ledger.storage, ledger.layout)
    # Not recorded pending: its age is its publish time's.
    ready, lost = _sort_out(request.dataset, [request], manifests, cfg, ledger,
                            {request.request_id: _epoch(request.arrived_at)})
    if lost:
        raise lost[0][1]  # the handler records the rejection
    spec = specs.for_dataset(ledger.storage, ledger.bucket, request.dataset, ledger.layout)
    with_spec(cfg, request.dataset, spec)  # Invalid: the handler records the rejection
    inputs = dataclasses.replace(_job_inputs(request.dataset, 0, None, ready, manifests, cfg, ledger, listing,
                                             spec.generation), job=name)
    created = ledger.create_inputs(inputs)
    if not created:
        inputs = ledger.read_inputs(name)
    if not ledger.was_submitted(name):
        _create_job(inputs, cfg, backend, ledger)
    return (Decision("submitted", name, f"{len(inputs.manifests)} manifests") if created
            else Decision("duplicate", name, "its own job exists"))


def _epoch(stamp: str) -> float:
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.time()


def reconcile(backend: Backend, storage: Storage, cfg: JobConfig, layout: Layout | None = None,
              dataset: str | None = None) -> list[str]:
    """Releases the next job of every dataset (or of ``dataset``) with pending requests whose head ended."""
    layout = layout or Layout()
    if not cfg.bucket:
        return []
    ledger = Ledger(storage, cfg.bucket, layout)
    released = []
    for ds in [dataset] if dataset else ledger.datasets_with_pending():
        step = advance(ds, cfg, backend, ledger)
        if step.state == "released" and step.job:
            released.append(step.job)
    return released
