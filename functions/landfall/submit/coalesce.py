"""Which TFJob a training request becomes: exactly once, coalesced, nothing lost, no scheduler of our own.

The consumer is stateless and may run as several instances at once; everything it decides comes from
the TFJobs themselves (labels and annotations, read from the backend) and the bucket.

Chain of jobs per dataset (policies ``coalesce`` and ``forbid``)
    Every job names the job it follows (annotation ``landfall.dev/after``), and its name is derived
    from that predecessor: ``job_name(dataset, "after:" + predecessor)``. The first job of a dataset is
    named from the request that starts the chain (``"first:" + request_id``). The *head* is the job no
    other job follows (if several, the newest). Consumers that see the same head compute the same next
    name, and creation is create-if-absent, so at most one next job exists, whoever creates it.

Deciding on a request R for dataset D (manifest M)
    1. Duplicate: a job of D already records R (label ``landfall.dev/request-id`` or an annotation
       ``requests.landfall.dev/<hash>``), or, for ``reason: arrival``, M is among the manifests a job
       trains on. Nothing is created: the same request delivered any number of times makes one job.
       A ``reason: manual`` request (``landfall republish``) has a fresh id and is never a duplicate of
       the arrival, so the rerun happens although the data did not change.
    2. No head, or the head finished (Succeeded/Failed): create the next job, released (running) now,
       with its manifests resolved now (M included).
    3. The head waits suspended (a follow-up): R is coalesced into it. The follow-up resolves its
       manifests when it is released, which is after R's manifest was written, so M is covered.
    4. The head is active: create the follow-up ``after:<head>`` *suspended*
       (``spec.runPolicy.suspend: true``; 409 AlreadyExists is fine: another consumer made it) and
       record R on it. A burst of K arrivals while a job runs therefore makes exactly one follow-up.
    Under ``forbid`` cases 3 and 4 drop R instead (logged as WARNING). Under ``allow`` every request gets
    its own job, named from ``"request:" + request_id``, released at once; only a job made for the same
    ``request_id`` makes it a duplicate.

Release: resolving manifests at start
    ``release()`` lists ``gs://BUCKET/tfrecords/<D>/*/manifest.json`` (all of them, or the newest
    ``window`` by object generation; retracted arrivals left out), writes them into the job's container args and the
    ``landfall.dev/manifests`` annotation, and unsuspends, in one merge patch that carries the
    ``resourceVersion`` it read: of two concurrent releasers one wins, the other gets 409, re-reads and
    finds it released. Every arrival whose manifest existed before the release is therefore trained on
    by a job that started after it arrived; later ones find the released job active and make the next
    follow-up. Nothing is lost and no arrival waits for more than one job.

Who releases a follow-up when its predecessor ends
    ``reconcile()``: it runs at the start of every request for the dataset (so traffic drives it), after a
    follow-up is created (closing the race with a predecessor that ended meanwhile), in every tick of the
    local operator, and in ``landfall status``; ``landfall reconcile`` (``landfall.reconcile``) runs it in a
    loop next to a cluster (a one-replica Deployment) so a follow-up starts within seconds of its
    predecessor ending even without new requests.

Known limit: two *different* first requests for a dataset with no job at all, handled at the same
instant, start two chains (two jobs run); later requests follow the newest. Arrivals are published with the
    dataset as ordering key, so an ordered subscription never delivers those two at once.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

from landfall.core import retractions
from landfall.core.config import Layout
from landfall.core.errors import AlreadyExists, Conflict, NotFound, TemporaryError
from landfall.core.layout import dataset_prefix, gs, split_gs
from landfall.core.messages import TrainingRequest, utc_now
from landfall.core.storage import Storage
from landfall.submit import tfjob
from landfall.submit.backends import Backend
from landfall.submit.config import JobConfig

log = logging.getLogger("landfall.submit.coalesce")

RELEASE_ATTEMPTS = 8


@dataclasses.dataclass(frozen=True)
class Decision:
    outcome: str  # submitted | coalesced | duplicate | dropped
    job: str | None
    detail: str = ""


def resolve_manifests(dataset: str, bucket: str, cfg: JobConfig, storage: Storage, layout: Layout) -> list[str]:
    """The manifests a job of ``dataset`` trains on, resolved now: all, or the newest ``cfg.window``, leaving
    out retracted arrivals (objects overwritten or deleted since)."""
    uris = retractions.live_manifests(storage, gs(bucket, dataset_prefix(layout, dataset)))
    if cfg.window and len(uris) > cfg.window:
        by_age = sorted(uris, key=lambda u: (storage.stat(u).generation, u))
        uris = sorted(by_age[-cfg.window:])
    return uris


def job_name_for(dataset: str, policy: str, *, request_id: str = "", after: str | None = None) -> str:
    """The one naming rule for a dataset's jobs (the coalescer and ``landfall render-tfjob`` use it).

    Under ``allow`` a job is named from its request; otherwise the first job of a chain from the request
    that starts it, and every later job from the job it follows, so concurrent consumers agree on it.
    """
    if policy == "allow":
        return tfjob.job_name(dataset, "request:" + request_id)
    if after:
        return tfjob.job_name(dataset, "after:" + after)
    return tfjob.job_name(dataset, "first:" + request_id)


def head(jobs: list[dict[str, Any]]) -> dict[str, Any] | None:
    followed = {tfjob.annotations(j).get(tfjob.AFTER_ANNOTATION) for j in jobs}
    heads = [j for j in jobs if tfjob.name_of(j) not in followed]
    if not heads:
        return None
    return max(heads, key=lambda j: (tfjob.created_at(j), tfjob.name_of(j)))


def request_record(request: TrainingRequest) -> dict[str, str]:
    return {tfjob.request_annotation(request.request_id): json.dumps(
        {"request_id": request.request_id, "reason": request.reason, "manifest": request.manifest,
         "at": utc_now()}, sort_keys=True)}


def covering_job(request: TrainingRequest, jobs: list[dict[str, Any]], policy: str = "coalesce",
                 ) -> dict[str, Any] | None:
    """The job that already covers ``request`` (under ``allow``, only a job made for this very request)."""
    for job in jobs:
        if tfjob.covers_request(job, request.request_id):
            return job
        if policy != "allow" and request.reason == "arrival" and request.manifest in tfjob.manifests_of(job):
            return job
    return None


def submit(request: TrainingRequest, cfg: JobConfig, backend: Backend, storage: Storage,
           layout: Layout | None = None) -> Decision:
    """Decides and acts for one validated request. Raises ``TemporaryError`` (retry) or ``Invalid``."""
    layout = layout or Layout()
    bucket = cfg.bucket or split_gs(request.manifest)[0]
    cfg = dataclasses.replace(cfg, bucket=bucket)
    reconcile(backend, storage, cfg, layout, dataset=request.dataset)
    for _ in range(RELEASE_ATTEMPTS):
        decision = _decide(request, cfg, backend, storage, layout)
        if decision is not None:
            return decision
    raise TemporaryError(f"jobs of {request.dataset} kept changing while deciding on {request.request_id}")


def _decide(request: TrainingRequest, cfg: JobConfig, backend: Backend, storage: Storage,
            layout: Layout) -> Decision | None:
    """One pass over the current jobs; ``None`` means another consumer raced us: look again."""
    jobs = backend.list(request.dataset)
    dup = covering_job(request, jobs, cfg.concurrency)
    if dup is not None:
        return Decision("duplicate", tfjob.name_of(dup), "already covered by this job")

    if cfg.concurrency == "allow":
        name = job_name_for(request.dataset, "allow", request_id=request.request_id)
        return _create_released(request, cfg, backend, storage, layout, name, after=None)

    current = head(jobs)
    if current is None:
        name = job_name_for(request.dataset, cfg.concurrency, request_id=request.request_id)
        return _create_released(request, cfg, backend, storage, layout, name, after=None)
    current_name = tfjob.name_of(current)
    if tfjob.is_finished(current):
        name = job_name_for(request.dataset, cfg.concurrency, after=current_name)
        return _create_released(request, cfg, backend, storage, layout, name, after=current_name)
    if cfg.concurrency == "forbid":
        return Decision("dropped", current_name, f"job {current_name} is {tfjob.state(current)} (policy forbid)")
    if tfjob.is_suspended(current):
        _record(backend, current_name, request)
        return Decision("coalesced", current_name, "joins the follow-up job waiting to start")
    # The head is active: make (or join) its one follow-up, suspended until it ends.
    name = job_name_for(request.dataset, cfg.concurrency, after=current_name)
    job = tfjob.render(cfg, name=name, dataset=request.dataset, request_id=request.request_id, manifests=[],
                       after=current_name, suspend=True, runs_prefix=layout.runs_prefix)
    job["metadata"]["annotations"].update(request_record(request))
    try:
        backend.create(job)
        detail = f"follow-up of {current_name}, created suspended"
    except AlreadyExists:
        existing = backend.get(name)
        if not tfjob.is_suspended(existing) and not _covers(existing, request):
            return None  # released before our manifest existed: it is the new head, follow it
        _record(backend, name, request)
        detail = f"joins the follow-up of {current_name}"
    # The predecessor may have ended while we created it: release now rather than wait for a reconcile.
    try:
        if tfjob.is_finished(backend.get(current_name)):
            release(backend, name, cfg, storage, layout)
    except NotFound:
        release(backend, name, cfg, storage, layout)
    return Decision("coalesced", name, detail)


def _covers(job: dict[str, Any], request: TrainingRequest) -> bool:
    """A released job covers an arrival if it trains on its manifest; a manual rerun if it was made for it
    (a job created while the request was being handled started after it was published)."""
    if request.reason == "arrival":
        return request.manifest in tfjob.manifests_of(job)
    return True


def _create_released(request: TrainingRequest, cfg: JobConfig, backend: Backend, storage: Storage, layout: Layout,
                     name: str, after: str | None) -> Decision | None:
    manifests = resolve_manifests(request.dataset, cfg.bucket, cfg, storage, layout)
    if (request.manifest not in manifests and cfg.window == 0
            and not retractions.manifest_is_retracted(storage, request.manifest)):
        manifests.append(request.manifest)  # a manifest outside the dataset's folder, named explicitly
    job = tfjob.render(cfg, name=name, dataset=request.dataset, request_id=request.request_id, manifests=manifests,
                       after=after, released_at=utc_now(), runs_prefix=layout.runs_prefix)
    job["metadata"]["annotations"].update(request_record(request))
    try:
        backend.create(job)
    except AlreadyExists:
        # Another consumer created this very job (suspended, if it saw the predecessor still active).
        existing = backend.get(name)
        if tfjob.is_suspended(existing):
            _record(backend, name, request)
            release(backend, name, cfg, storage, layout)
            return Decision("coalesced", name, "joins the job another consumer created")
        if not _covers(existing, request):
            return None  # it started without our manifest: follow it
        _record(backend, name, request)
        return Decision("coalesced", name, "joins the job another consumer created")
    return Decision("submitted", name, f"{len(manifests)} manifests")


def _record(backend: Backend, name: str, request: TrainingRequest) -> None:
    """Adds this request's annotation (a merge patch of one new key: concurrent consumers never clash)."""
    backend.patch(name, {"metadata": {"annotations": request_record(request)}})


def release(backend: Backend, name: str, cfg: JobConfig, storage: Storage, layout: Layout | None = None) -> bool:
    """Unsuspends ``name`` with its manifests resolved now. True if this call released it."""
    layout = layout or Layout()
    for _ in range(RELEASE_ATTEMPTS):
        job = backend.get(name)
        if not tfjob.is_suspended(job):
            return False
        dataset = job["metadata"]["labels"][tfjob.DATASET_LABEL]
        window = tfjob.annotations(job).get(tfjob.WINDOW_ANNOTATION, str(cfg.window))
        job_cfg = dataclasses.replace(cfg, window=int(window)) if window.isdigit() else cfg
        manifests = resolve_manifests(dataset, cfg.bucket, job_cfg, storage, layout)
        try:
            backend.patch(name, tfjob.release_patch(job, manifests, utc_now()))
        except Conflict:
            continue  # someone annotated or released it meanwhile: re-read
        log.info("released %s with %d manifests", name, len(manifests),
                 extra={"job": name, "dataset": dataset, "fields": {"manifests": len(manifests)}})
        return True
    raise TemporaryError(f"could not release {name}: it kept changing")


def reconcile(backend: Backend, storage: Storage, cfg: JobConfig, layout: Layout | None = None,
              dataset: str | None = None) -> list[str]:
    """Releases every waiting follow-up whose predecessor ended (or is gone). Returns the released names."""
    jobs = backend.list(dataset)
    by_name = {tfjob.name_of(j): j for j in jobs}
    released = []
    for job in jobs:
        after = tfjob.annotations(job).get(tfjob.AFTER_ANNOTATION)
        if not after or not tfjob.is_suspended(job) or tfjob.is_finished(job):
            continue
        predecessor = by_name.get(after)
        if predecessor is not None and not tfjob.is_finished(predecessor):
            continue
        bucket = cfg.bucket or tfjob.bucket_of(job)
        if bucket and release(backend, tfjob.name_of(job), dataclasses.replace(cfg, bucket=bucket), storage, layout):
            released.append(tfjob.name_of(job))
    return released
