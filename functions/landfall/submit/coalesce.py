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

The retrain policy (``landfall.submit.policy``, from ``policy_for``; all rules off by default)
    A release is also held while the dataset's policy says so: ``quiet_s`` (no request for that long, or
    ``max_wait_s`` since the oldest), ``min_new_instances``, ``max_jobs_per_day``, ``gpu_hours_per_day``. Held,
    nothing changes: the requests stay pending and no job is created; ``reconcile()`` releases the job once
    ``policy.decide`` allows, with no new arrival needed, and ``landfall status`` shows the holds and until when.
    The decision is taken where a release is (after the head ended), on the policy's clock (``clock``, default
    ``time.time``), from: the pending records' ``recorded_at`` (one listing: the holds a listing can decide come
    before any record is read); the dataset's spend record (``landfall.submit.spend``: the jobs of the last 24 h
    and their GPU-seconds, one small object, bounded); and, for ``min_new_instances`` only, what the waiting
    arrivals add (the manifest listing's counts). With ``quiet_s`` a new request is recorded and held at once
    without deciding (the dataset is not quiet now, by definition), so an arrival costs what it did. Concurrent
    releasers still race for the create-only ``inputs.json``: the policy is decided against the ended head's
    state, and at most one of them releases job ``seq+1``.

Enough data (``landfall.submit.sufficient``; ``LANDFALL_MIN_DATA=off`` turns it off)
    A release is also held while the dataset's live arrivals give the job it would render less than one batch of
    training records per worker, counted exactly as the trainer's ``plan_inputs`` will
    (``landfall.core.rules.holdout``):
    state ``held`` with a ``Shortfall`` (``held: 127 of 1,138 instances needed (1 worker x batch 1024, validation
    0.1)``), the requests stay pending, and the next arrival or the reconciler releases the job once there is enough.
    Decided after the retrain policy (so its reason is the one shown first) and before ``inputs.json``. Requests that
    can never train (a held arrival of another shape than the spec now sets) are rejected, as are requests held
    ``sufficient.HOLD_BOUND_S`` (7 days) for lack of data: their arrivals stay in the dataset and are counted by the
    next request's release. Every job carries ``--seed``, ``--validation-fraction`` and ``--holdout`` (``with_spec``
    pins them), so the count and the trainer agree.

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
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime

from landfall.core.artifacts import rejections, retractions, snapshots, specs
from landfall.core.contracts.layout import Layout, dataset_prefix, gs
from landfall.core.contracts.messages import InputManifest, JobInputs, Manifest, Rejection, TrainingRequest
from landfall.core.errors import AlreadyExists, Invalid, NotFound, PermanentError, TemporaryError
from landfall.core.rules import holdout
from landfall.core.rules.timestamps import epoch
from landfall.core.services.storage import Storage
from landfall.submit import engine, jobmeta, spend, sufficient, unserved
from landfall.submit.backends import Backend
from landfall.submit.config import JobConfig
from landfall.submit.ledger import Ledger, request_entry
from landfall.submit.policy import Decision as PolicyDecision
from landfall.submit.policy import RetrainPolicy, Waiting, decide

log = logging.getLogger("landfall.submit.coalesce")

ATTEMPTS = 8
# How long a pending request whose manifest exists but is not listed is retried (listing lag) before it is
# rejected. Cloud Storage's listings are strongly consistent, so this only absorbs a slow or stale replica.
LISTING_LAG_S = 300.0


@dataclasses.dataclass(frozen=True)
class Decision:
    outcome: str  # submitted | coalesced | held | duplicate | dropped
    job: str | None
    detail: str = ""


@dataclasses.dataclass(frozen=True)
class Advance:
    state: str  # released | active | held | idle
    job: str | None
    inputs: JobInputs | None = None
    held: PolicyDecision | None = None  # state held: the retrain policy's holds, their reasons and until when
    short: sufficient.Shortfall | None = None  # state held: too little data for the job (landfall.submit.sufficient)


def manifests_for(dataset: str, bucket: str, window: int, storage: Storage, layout: Layout) -> tuple[
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
        return jobmeta.job_name(dataset, "request:" + request_id)
    return jobmeta.job_name(dataset, f"seq:{seq}")


def submit(request: TrainingRequest, cfg: JobConfig, backend: Backend, storage: Storage,
           layout: Layout | None = None, clock: Callable[[], float] | None = None) -> Decision:
    """Decides and acts for one validated request. Raises ``TemporaryError`` (retry) or ``Invalid``.

    ``clock`` is the retrain policy's time (default ``time.time``; a test passes a fake one)."""
    layout = layout or Layout()
    if not cfg.bucket:  # never the bucket a request names (landfall.submit.handler)
        raise TemporaryError("LANDFALL_BUCKET is not set: not acting on the bucket a request names")
    ledger = Ledger(storage, cfg.bucket, layout, clock or time.time)
    # One metadata read per request (the body only when its generation changed): for the retrain policy, and
    # under LANDFALL_DATASETS=registered to refuse a dataset without a spec.
    spec, unusable = _release_spec(request.dataset, cfg, ledger)
    if cfg.datasets == "registered" and not spec.registered and unusable is None:
        raise Invalid(f"{specs.UNKNOWN_DATASET}: dataset {request.dataset} has no spec and LANDFALL_DATASETS="
                      "registered accepts only datasets with one (`landfall datasets apply`)")
    if cfg.concurrency == "allow":
        return _own_job(request, cfg, backend, ledger, spec, unusable)
    seq = ledger.head_seq(request.dataset)
    head = ledger.job_name(request.dataset, seq) if seq else None
    recorded, state = False, "ended"
    if head is not None:
        state, job = _state(head, cfg, backend, ledger)
        if job is not None and jobmeta.made_for(job, request.request_id):
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
    quiet = policy_for(request.dataset, cfg, storage, spec).quiet_s
    if quiet:
        # Just recorded: the dataset is not quiet now, by definition. The reconciler releases once it is (or
        # once the oldest waited max_wait_s); deciding here would read every waiting request per arrival.
        return Decision("held", head, f"quiet period: released once no request came for {quiet:g} s "
                                      f"(from {_iso(ledger.clock() + quiet)}), by the reconciler")
    step = advance(request.dataset, cfg, backend, ledger)
    if step.state == "released" and step.inputs and _covers(step.inputs, request):
        return Decision("submitted", step.job, f"{len(step.inputs.manifests)} manifests")
    if step.state == "held" and step.held:
        return Decision("held", step.job, f"held by the retrain policy until {_iso(step.held.until)}: "
                                          f"{step.held.reason}")
    if step.state == "held" and step.short:
        return Decision("held", step.job, f"{step.short.reason}: released once there is enough")
    if step.state == "active":  # another consumer released it meanwhile (with this request, or it waits)
        return Decision("coalesced", step.job, f"joins or waits for {step.job}")
    return Decision("duplicate", step.job, "already covered")


def advance(dataset: str, cfg: JobConfig, backend: Backend, ledger: Ledger) -> Advance:
    """Releases ``dataset``'s next job if its head ended, requests are pending and the retrain policy allows;
    else says why not (``held``: the policy's reasons and until when; the requests stay pending)."""
    spec, unusable = _release_spec(dataset, cfg, ledger)
    policy = policy_for(dataset, cfg, ledger.storage, spec)
    for _ in range(ATTEMPTS):
        seq = ledger.head_seq(dataset)
        head = ledger.job_name(dataset, seq) if seq else None
        job, covered = None, None
        if head is not None:
            state, job = _state(head, cfg, backend, ledger)
            if state != "ended":
                return Advance("active", head)
            covered = ledger.read_inputs(head)
        record = _spent(dataset, covered, job, cfg, ledger, policy)
        if policy.active:  # the holds a listing can decide, before any waiting request is read
            times = ledger.pending_times(dataset)
            if not times:
                return Advance("idle", head)
            held = decide(policy, [Waiting(t) for t in times], record.past_jobs(), ledger.clock())
            if not held.release:
                return Advance("held", head, held=held)
        since = ledger.pending_since(dataset)
        if not since:
            return Advance("idle", head)
        pending = [r for r, _ in since]
        fresh = [r for r in pending if not (covered and _covers(covered, r))]
        if len(fresh) < len(pending):
            ledger.drop_pending(dataset, [r.request_id for r in pending if r not in fresh])
        if not fresh:
            return Advance("idle", head, covered)
        manifests, listing = manifests_for(dataset, ledger.bucket, cfg.window, ledger.storage, ledger.layout)
        recorded = {r.request_id: t for r, t in since}
        fresh, lost = _sort_out(dataset, fresh, manifests, cfg, ledger, recorded)
        if lost:
            _reject_lost(dataset, lost, ledger)
        if not fresh:
            return Advance("idle", head, covered)
        if policy.active:  # again, on exactly the requests this job would cover, counted for min_new_instances
            held = decide(policy, waiting(fresh, recorded, manifests, ledger.storage, policy.min_new_instances > 0),
                          record.past_jobs(), ledger.clock())
            if not held.release:
                return Advance("held", head, held=held)
        if unusable is not None:  # rejected for good, as lost requests: an unusable spec never sticks its dataset
            _reject_lost(dataset, [(r, unusable) for r in fresh], ledger)
            return Advance("idle", head, covered)
        short = _shortfall(dataset, cfg, spec, manifests, ledger)
        if short is not None:  # too little data for the job: held, or rejected when it can never be enough
            problem = (sufficient.never(fresh, sufficient.spec_shape(spec.shape), dataset, spec.generation,
                                        ledger.storage)
                       or sufficient.expired(short, min(recorded[r.request_id] for r in fresh), ledger.clock()))
            if problem is not None:
                _reject_lost(dataset, [(r, problem) for r in fresh], ledger)
                return Advance("idle", head, covered)
            log.info("held the next job of %s: %s", dataset, short.reason,
                     extra={"dataset": dataset, "fields": short.describe()})
            return Advance("held", head, covered, short=short)
        # The spec in force now: the job is rendered from this generation, whatever is applied later.
        inputs = job_inputs(dataset, seq + 1, head, fresh, manifests, cfg, ledger, listing, spec.generation)
        if not ledger.create_inputs(inputs):
            continue  # another consumer released this job first: look again
        _create_job(inputs, cfg, backend, ledger)
        ledger.drop_pending(dataset, [r.request_id for r in fresh])
        spend.released(ledger.storage, ledger.bucket, ledger.layout, inputs, ledger.clock())
        log.info("released %s with %d manifests for %d requests", inputs.job, len(inputs.manifests),
                 len(fresh), extra={"job": inputs.job, "dataset": dataset,
                                    "fields": {"manifests": len(inputs.manifests), "requests": len(fresh),
                                               "seq": inputs.seq}})
        return Advance("released", inputs.job, inputs)
    raise TemporaryError(f"jobs of {dataset} kept changing while releasing the next one")


def _shortfall(dataset: str, cfg: JobConfig, spec: specs.DatasetSpec, manifests: list[InputManifest],
               ledger: Ledger) -> sufficient.Shortfall | None:
    """Too little data in ``manifests`` for the job ``spec`` renders (``landfall.submit.sufficient``), or None."""
    try:
        mode = sufficient.mode_of()
        if mode == sufficient.OFF:
            return None
    except ValueError as exc:  # a misconfigured deployment: every request waits and retries until it is fixed
        raise TemporaryError(str(exc)) from None
    job = with_spec(cfg, dataset, spec)
    window = gap = None
    if spec.series or sufficient.split_of(job).mode in holdout.OVERLAPPING:
        window, gap = sufficient.window_of(manifests, ledger.storage)
        if sufficient.flag_value(job.trainer_args, "--timesteps") is not None:
            window = None
    return sufficient.shortfall(manifests, job, ledger.storage, window, series=spec.series, gap=gap, mode=mode)


def policy_for(dataset: str, cfg: JobConfig, storage: Storage, spec: specs.DatasetSpec | None = None
                ) -> RetrainPolicy:
    """The one place the submit stage gets a dataset's retrain policy: the process-wide defaults
    (``LANDFALL_QUIET_S`` ...) with the dataset spec's ``retrain`` section over them (``spec``: the caller read
    it already). A spec that cannot be used gives the defaults (its requests are rejected at the release)."""
    try:
        base = RetrainPolicy.load(os.environ)
    except ValueError as exc:  # a misconfigured deployment: every request waits and retries until it is fixed
        raise TemporaryError(f"retrain policy: {exc}") from None
    if spec is None:
        try:
            spec = specs.for_dataset(storage, cfg.bucket, dataset, Layout.load())
        except Invalid:
            return base
    try:
        return RetrainPolicy.from_mapping(spec.retrain, base)
    except ValueError:  # the schema allows only the policy's fields: a newer spec than this code
        return base


def _release_spec(dataset: str, cfg: JobConfig, ledger: Ledger) -> tuple[specs.DatasetSpec, Invalid | None]:
    """The dataset's spec now, and why this deployment cannot run it (``with_spec``; a stored spec that is not
    valid): then ``DatasetSpec(dataset)`` and the reason, which rejects the requests a release would cover."""
    try:
        spec = specs.for_dataset(ledger.storage, ledger.bucket, dataset, ledger.layout)
        with_spec(cfg, dataset, spec)
    except Invalid as exc:
        return specs.DatasetSpec(dataset), exc
    return spec, None


def _spent(dataset: str, head: JobInputs | None, job: dict | None, cfg: JobConfig, ledger: Ledger,
           policy: RetrainPolicy) -> spend.Record:
    """The dataset's spend record, with the ended head's GPU-seconds in it (``landfall.submit.spend``)."""
    if head is None:  # no job yet: nothing spent
        return (spend.read(ledger.storage, ledger.bucket, ledger.layout, dataset)[0] if policy.active
                else spend.Record(dataset))
    return spend.ended(ledger.storage, ledger.bucket, ledger.layout, head, job, cfg, ledger.clock())


def waiting(requests: list[TrainingRequest], recorded: dict[str, float], manifests: list[InputManifest],
            storage: Storage, count: bool = True) -> list[Waiting]:
    """The waiting requests as the policy sees them: when each was recorded and, with ``count``, what it adds
    (its arrival's instances: the listing's count, else the manifest's), or for a manual request, that someone
    asked for the run."""
    counts = {m.uri: m.count for m in manifests}
    out = []
    for r in requests:
        instances = counts.get(r.manifest) if count else None
        if count and r.reason == "arrival" and instances is None:
            try:
                instances = Manifest.from_json(storage.read_bytes(r.manifest), r.manifest).count
            except (NotFound, Invalid):
                instances = 0  # gone or unreadable: it adds nothing
        out.append(Waiting(recorded[r.request_id], instances, manual=r.reason == "manual"))
    return out


def explain(dataset: str, cfg: JobConfig, backend: Backend, storage: Storage, layout: Layout | None = None,
            clock: Callable[[], float] | None = None) -> dict:
    """Read-only, for ``landfall status``: the dataset's retrain policy, its spend over 24 h and 30 days against
    the budget, and, with requests waiting, what the next release waits for (the running head, or the policy's
    holds, each with its reason and until when, or too little data: ``data``, ``landfall.submit.sufficient``)."""
    ledger = Ledger(storage, cfg.bucket, layout or Layout(), clock or time.time)
    policy, now = policy_for(dataset, cfg, storage), ledger.clock()
    record, _ = spend.read(storage, ledger.bucket, ledger.layout, dataset)
    seq = ledger.head_seq(dataset)
    head = ledger.job_name(dataset, seq) if seq else None
    state, job = ("ended", None) if head is None else _peek(head, backend, ledger)
    entry = record.entry(head) if head else None
    if head is not None and state == "ended" and (entry is None or entry.get("ended_at") is None):
        released = epoch(ledger.read_inputs(head).released_at) if entry is None else float(entry["released_at"])
        entry = entry or {"job": head, "seq": seq, "released_at": min(now, released or now)}
        entry.update(spend.measure(storage, ledger.bucket, ledger.layout, head, job, cfg, float(entry["released_at"]),
                                   now))
        record.jobs = [e for e in record.jobs if e.get("job") != head] + [entry]  # in memory only
    out: dict = {"policy": policy.describe(), "spend": spend.summary(record, policy, now)}
    since = ledger.pending_since(dataset)
    if not since:
        return out
    if state != "ended":
        out["next"] = {"state": "waiting_for_job", "job": head}
        return out
    recorded = {r.request_id: t for r, t in since}
    requests = [r for r, _ in since]
    held = decide(policy, waiting(requests, recorded, [], storage, policy.min_new_instances > 0), record.past_jobs(),
                  now)
    out["next"] = ({"state": "releasable"} if held.release else
                   {"state": "held", "until": _iso(held.until), "reason": held.reason,
                    "holds": [{"rule": h.rule, "reason": h.reason, "until": _iso(h.until)} for h in held.holds]})
    short = data_hold(dataset, cfg, storage, ledger.layout) if held.release else None
    if short is not None:  # the policy allows, the data does not (landfall.submit.sufficient)
        out["next"] = {"state": "held", "until": None, "reason": short.reason, "data": short.describe(),
                       "retired_at": _iso(min(recorded.values()) + sufficient.HOLD_BOUND_S),
                       "holds": [{"rule": "min_data", "reason": short.reason, "until": None}]}
    return out


def data_hold(dataset: str, cfg: JobConfig, storage: Storage, layout: Layout | None = None
              ) -> sufficient.Shortfall | None:
    """Read-only (``landfall status``, ``landfall report``): too little data for the dataset's next job, as a release
    now would find (``landfall.submit.sufficient``), or None (enough, or a spec the release would reject)."""
    ledger = Ledger(storage, cfg.bucket, layout or Layout())
    spec, unusable = _release_spec(dataset, cfg, ledger)
    if unusable is not None:
        return None
    manifests, _ = manifests_for(dataset, ledger.bucket, cfg.window, storage, ledger.layout)
    return _shortfall(dataset, cfg, spec, manifests, ledger)


def _peek(name: str, backend: Backend, ledger: Ledger) -> tuple[str, dict | None]:
    """``_state`` without acting: a released job whose TFJob is missing and was never created is ``active`` with
    no object (``_state`` creates it)."""
    submitted = ledger.was_submitted(name)
    try:
        job = backend.get(name)
        return ("ended" if engine.is_finished(job) else "active"), job
    except NotFound:
        return ("ended" if submitted else "active"), None


def _iso(t: float | None, timespec: str = "seconds") -> str:
    return "-" if t is None else datetime.fromtimestamp(t, UTC).isoformat(timespec=timespec).replace("+00:00", "Z")


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
        now = ledger.clock()
        age = now - recorded.get(r.request_id, now)
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


def job_inputs(dataset: str, seq: int, after: str | None, requests: list[TrainingRequest],
                manifests: list[InputManifest], cfg: JobConfig, ledger: Ledger,
                listing: retractions.Listing, spec_generation: int | None = None) -> JobInputs:
    """The ``inputs.json`` a release writes for job ``seq`` of ``dataset`` (not written here): ``manifests`` (from
    ``manifests_for``) and the ``requests`` it covers, stamped on the ledger's clock."""
    job = ledger.job_name(dataset, seq)
    inputs = JobInputs(dataset=dataset, job=job, seq=seq, manifests=manifests,
                       requests=[request_entry(r) for r in requests], after=after, window=cfg.window,
                       released_at=_iso(ledger.clock(), "milliseconds"),  # on the policy's clock
                       spec_generation=spec_generation)
    # The newest snapshot plus the delta (landfall.core.artifacts.snapshots), unless a window picks manifests by age.
    return inputs if cfg.window else snapshots.with_snapshot(inputs, listing, ledger.storage, ledger.bucket,
                                                             ledger.layout)


def with_spec(cfg: JobConfig, dataset: str, spec: specs.DatasetSpec) -> JobConfig:
    """``cfg`` with ``spec`` over it: the job's resources, epochs and batch size, and the trainer flags for its
    model, training and verdict settings; no GPU for a model its verdict cannot serve (``landfall.submit.unserved``).
    ``Invalid`` for a spec this deployment cannot run: another engine than its backend's (``LANDFALL_ENGINE``; one
    backend per deployment), or values ``JobConfig`` refuses. The hold-out's ``--seed``, ``--validation-fraction``
    and ``--holdout`` are always rendered (``sufficient.pin``): the release counts a job's training records with
    exactly what its trainer will use."""
    if spec.registered:
        fields = spec.job_fields(cfg.trainer_args)
        if fields.get("engine", cfg.engine) != cfg.engine:
            raise Invalid(f"dataset {dataset}'s spec generation {spec.generation} asks for engine "
                          f"{fields['engine']!r}; this deployment runs {cfg.engine!r} (LANDFALL_ENGINE)")
        try:
            cfg = dataclasses.replace(cfg, **fields)
        except ValueError as exc:
            raise Invalid(f"dataset {dataset}'s spec generation {spec.generation}: {exc}") from None
    cfg = unserved.without_gpus(cfg, spec)  # a model no verdict can serve holds no GPU
    cfg = sufficient.pin(cfg)
    sufficient.split_of(cfg)  # Invalid for flags the trainer would refuse
    return cfg


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
    if (why := unserved.why(cfg)) is not None:
        log.info("job %s: %s", inputs.job, why, extra={"dataset": inputs.dataset, "job": inputs.job})
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
    state, job = _peek(name, backend, ledger)
    if state == "active" and job is None:  # released, never created
        _create_job(ledger.read_inputs(name), cfg, backend, ledger)
        return "created", None
    return state, job


def _own_job(request: TrainingRequest, cfg: JobConfig, backend: Backend, ledger: Ledger,
             spec: specs.DatasetSpec, unusable: Invalid | None = None) -> Decision:
    if unusable is not None:
        raise unusable  # the handler records the rejection
    name = job_name_for(request.dataset, "allow", request_id=request.request_id)
    manifests, listing = manifests_for(request.dataset, ledger.bucket, cfg.window, ledger.storage, ledger.layout)
    # Not recorded pending: its age is its publish time's.
    ready, lost = _sort_out(request.dataset, [request], manifests, cfg, ledger,
                            {request.request_id: _epoch(request.arrived_at)})
    if lost:
        raise lost[0][1]  # the handler records the rejection
    inputs = dataclasses.replace(job_inputs(request.dataset, 0, None, ready, manifests, cfg, ledger, listing,
                                             spec.generation), job=name)
    created = ledger.create_inputs(inputs)
    if not created:
        inputs = ledger.read_inputs(name)
    if not ledger.was_submitted(name):
        _create_job(inputs, cfg, backend, ledger)
    return (Decision("submitted", name, f"{len(inputs.manifests)} manifests") if created
            else Decision("duplicate", name, "its own job exists"))


def _epoch(stamp: str) -> float:
    t = epoch(stamp)
    return time.time() if t is None else t


def reconcile(backend: Backend, storage: Storage, cfg: JobConfig, layout: Layout | None = None,
              dataset: str | None = None, clock: Callable[[], float] | None = None) -> list[str]:
    """Releases the next job of every dataset (or of ``dataset``) with pending requests whose head ended,
    once its retrain policy allows (a held release needs no new arrival to move)."""
    layout = layout or Layout()
    if not cfg.bucket:
        return []
    ledger = Ledger(storage, cfg.bucket, layout, clock or time.time)
    released = []
    for ds in [dataset] if dataset else ledger.datasets_with_pending():
        step = advance(ds, cfg, backend, ledger)
        if step.state == "released" and step.job:
            released.append(step.job)
    return released
