"""The data-arrival stage: an object landed under ``incoming/``; convert it and request training.

Idempotent under at-least-once delivery: the manifest is the commit point. If it exists, the work
is done and only the (deterministic) training request is published again, which also repairs a
crash between the manifest and the publish; consumers drop the duplicate by ``request_id``.

Unordered delivery: only the object's live generation is converted and requested. A newer generation
retracts the older ones (``landfall.core.artifacts.retractions``) and a delete retracts the deleted one; the
finalize of an older generation that comes late converts and requests nothing.

A failing event: when the finalize of an arrival raises (a temporary error, or an unexpected one), the platform
redelivers it until the dead letter takes it; ``handle`` first records the failure beside the arrival
(``landfall.core.artifacts.failing``: its error, at most one write a second), so ``landfall status`` shows it.

Large objects: above ``landfall.arrival.route``'s threshold the object is not converted here; one execution
of the Cloud Run job is started (guarded against redeliveries) and the handler returns ``dispatched``. The
job's tasks convert it, and their committer calls ``after_conversion`` as this handler does after an
in-process conversion.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import uuid
from typing import Literal

from landfall.arrival import autowindow, converter, formats, route, screen
from landfall.arrival.cloudrun import CloudRunJobs, LocalJobs
from landfall.arrival.config import ConverterConfig, with_spec
from landfall.core.artifacts import failing, rejections, retractions
from landfall.core.contracts import layout
from landfall.core.contracts.events import ObjectEvent
from landfall.core.contracts.layout import Layout
from landfall.core.contracts.messages import Manifest, Rejection, TrainingRequest, utc_now
from landfall.core.errors import BadInput, Invalid, NotFound
from landfall.core.runtime import Runtime
from landfall.core.services.pubsub import PubSub
from landfall.core.services.storage import Storage

log = logging.getLogger("landfall.arrival")

Outcome = Literal["ignored", "converted", "duplicate", "rejected", "superseded", "retracted", "dispatched"]
ArrivalRuntime = Runtime[ConverterConfig]


def jobs_of(config: ConverterConfig) -> CloudRunJobs | LocalJobs:
    """Where large objects are converted: the Cloud Run job, or on ``landfall up`` the local operator."""
    if config.jobs_backend == "local":
        return LocalJobs(config.local_state, config.project, config.region)
    return CloudRunJobs(config.project, config.region, config.cloud_run_endpoint or None)


def runtime_from_env() -> ArrivalRuntime:
    config = ConverterConfig.load()
    return Runtime(config, Layout.load(), Storage(config.project, retry_deadline_s=config.storage_retry_s),
                   PubSub(config.project), jobs=jobs_of(config))


@functools.cache
def runtime() -> ArrivalRuntime:
    """Built once per function instance from the environment (``LANDFALL_*``, ``GOOGLE_CLOUD_PROJECT``)."""
    return runtime_from_env()


def handle(obj: ObjectEvent, rt: ArrivalRuntime) -> Outcome:
    """Permanent problems are recorded and logged and return normally; temporary ones raise, and so does anything
    unexpected: the finalize of an arrival records either as failing first (``landfall.core.artifacts.failing``)."""
    try:
        outcome = _handle(obj, rt)
    except Exception as exc:
        arrival = _failing_arrival(obj, rt)
        if arrival is not None:
            failing.note(rt.storage, rt.layout, arrival, exc)
        raise
    if outcome == "superseded" and obj.kind == "finalize":  # nothing else supersedes a failing record then
        arrival = _failing_arrival(obj, rt)
        if arrival is not None:
            failing.clear(rt.storage, rt.layout, arrival)
    return outcome


def _failing_arrival(obj: ObjectEvent, rt: ArrivalRuntime) -> layout.Arrival | None:
    """The arrival a failing finalize event is recorded for (None: not one, or a name no arrival takes)."""
    if obj.kind != "finalize" or not layout.is_arrival(obj.name, rt.layout):
        return None
    try:
        return layout.parse_arrival(obj.bucket, obj.name, obj.generation, rt.layout)
    except BadInput:
        return None


def _handle(obj: ObjectEvent, rt: ArrivalRuntime) -> Outcome:
    if not layout.is_arrival(obj.name, rt.layout):
        log.debug("ignoring %s: not under %s", obj.name, rt.layout.incoming_prefix)
        return "ignored"
    aid = layout.arrival_id(obj.name, obj.generation)
    dataset = layout.dataset_of(obj.name, rt.layout) or None
    if obj.kind != "finalize":
        return _removed(obj, rt)
    try:
        arrival = layout.parse_arrival(obj.bucket, obj.name, obj.generation, rt.layout)
        rt = spec_runtime(arrival, rt)
        if _superseded(arrival, rt):
            return "superseded"
        manifest_uri = layout.gs(obj.bucket, layout.manifest_name(rt.layout, arrival.dataset, aid))
        outcome: Outcome = "duplicate" if rt.storage.exists(manifest_uri) else "converted"
        if outcome == "duplicate":
            manifest = _existing(manifest_uri, rt)
        else:
            fmt = formats.format_of(obj.name)
            size = obj.size if obj.size is not None else rt.storage.stat(layout.gs(obj.bucket, obj.name),
                                                                         obj.generation).size
            if rt.config.window_auto:  # shape.window.length: auto, first arrival: estimate it, write it in the spec
                rt = dataclasses.replace(rt, config=autowindow.resolve(rt.config, rt.storage, arrival, size,
                                                                       rt.layout))
            if not route.converts_inline(fmt, size, rt.config):
                return route.dispatch(arrival, fmt, size, rt)  # the Cloud Run job converts it
            manifest = _convert(arrival, rt)
    except NotFound:
        # This generation was overwritten or deleted before we read it; its successor has its own event.
        log.warning("%s generation %s is gone; skipping", obj.name, obj.generation,
                    extra={"arrival_id": aid, "dataset": dataset})
        return "superseded"
    except BadInput as exc:
        _reject(obj, dataset, aid, exc, rt)
        return "rejected"
    return after_conversion(manifest, rt, outcome=outcome)


def spec_runtime(arrival: layout.Arrival, rt: ArrivalRuntime) -> ArrivalRuntime:
    """``rt`` with the arrival's dataset spec over its configuration (``with_spec``; one metadata read)."""
    config = with_spec(rt.config, rt.storage, arrival.bucket, arrival.dataset, rt.layout)
    return rt if config is rt.config else dataclasses.replace(rt, config=config)


def after_conversion(manifest: Manifest, rt: ArrivalRuntime | None = None, *,
                     outcome: Outcome = "converted") -> Outcome:
    """What follows a committed manifest, whoever converted: this handler, or the committer of the Cloud Run
    job's tasks (``landfall.arrival.ranged.run_task(on_committed=after_conversion)``, from
    ``landfall.arrival.task``). Returns ``outcome``, or ``superseded``.

    The arrival is the manifest's ``source`` (bucket, name, generation). If the object was overwritten or
    deleted meanwhile, its arrival is retracted and nothing is published (its successor's event, or this
    check, retracts it); else older generations of the object are retracted and the training request is
    published (deterministic ``request_id``: a repeat is dropped downstream). ``rt`` defaults to this
    process's runtime, built from the environment (``runtime()``). Temporary failures raise.
    """
    bucket, name, generation = manifest.source.bucket, manifest.source.name, int(manifest.source.generation)
    if rt is None:  # a Cloud Run task's committer: its dataset's on_delete rule (the conversion had the rest)
        rt = runtime()
        with contextlib.suppress(BadInput):
            rt = spec_runtime(layout.parse_arrival(bucket, name, generation, rt.layout), rt)
    arrival = layout.parse_arrival(bucket, name, generation, rt.layout)
    aid = arrival.arrival_id
    manifest_uri = layout.gs(bucket, layout.manifest_name(rt.layout, arrival.dataset, aid))
    try:
        if _superseded(arrival, rt):
            return "superseded"
        older = retractions.retract_older(rt.storage, rt.layout, arrival)
        screen.settle(rt.storage, manifest, manifest_uri)
    except NotFound:
        log.warning("%s generation %s is gone; skipping", name, generation,
                    extra={"arrival_id": aid, "dataset": arrival.dataset})
        return "superseded"
    _publish(arrival, manifest_uri, rt)
    log.info("%s %s: %d instances in %d shards", "already converted" if outcome == "duplicate" else "converted",
             name, manifest.count, len(manifest.shards),
             extra={"arrival_id": aid, "dataset": arrival.dataset,
                    "fields": {"outcome": outcome, "manifest": manifest_uri, "count": manifest.count,
                               "shards": len(manifest.shards), "dropped": manifest.dropped_nonfinite,
                               "retracted_generations": older,
                               "check_status": (manifest.checks or {}).get("status")}})
    return outcome


def _live_generation(obj_uri: str, rt: ArrivalRuntime) -> int | None:
    try:
        return rt.storage.stat(obj_uri).generation
    except NotFound:
        return None


def _superseded(arrival: layout.Arrival, rt: ArrivalRuntime) -> bool:
    """Whether ``arrival`` is no longer the object's live generation (retracting it if so), or was retracted.

    Checked before converting (a late or reordered finalize of an older generation converts nothing) and
    again after (it was overwritten or deleted meanwhile), so stale data is never requested.
    """
    live = _live_generation(layout.gs(arrival.bucket, arrival.name), rt)
    if live is not None and live > arrival.generation:
        retractions.retract(rt.storage, rt.layout, arrival, "superseded", live)
        return True
    if live is None and rt.config.on_delete == "retract":
        retractions.retract(rt.storage, rt.layout, arrival, "deleted")
        return True
    return retractions.is_retracted(rt.storage, rt.layout, arrival)


def _removed(obj: ObjectEvent, rt: ArrivalRuntime) -> Outcome:
    """A generation was deleted or archived: retract its arrival (``LANDFALL_ON_DELETE=retract``, the default).

    Overwrites are handled whatever the setting: the newer generation's finalize retracts the older ones
    too, so a lost or late delete event changes nothing.
    """
    try:
        arrival = layout.parse_arrival(obj.bucket, obj.name, obj.generation, rt.layout)
    except BadInput:
        return "ignored"  # never converted: nothing to retract
    with contextlib.suppress(BadInput):  # the dataset's on_delete rule; without a usable spec, the deployment's
        rt = spec_runtime(arrival, rt)
    live = _live_generation(layout.gs(obj.bucket, obj.name), rt)
    if live is not None and live > obj.generation:
        retractions.retract(rt.storage, rt.layout, arrival, "superseded", live)
        return "retracted"
    if live is None and rt.config.on_delete == "retract":
        retractions.retract(rt.storage, rt.layout, arrival, "deleted")
        return "retracted"
    log.info("kept %s generation %s after its %s event (live generation %s, on_delete=%s)", obj.name,
             obj.generation, obj.kind, live, rt.config.on_delete,
             extra={"arrival_id": arrival.arrival_id, "dataset": arrival.dataset})
    return "ignored"


def _existing(manifest_uri: str, rt: ArrivalRuntime) -> Manifest:
    """Already converted (a redelivery): its manifest, which the request is published again for."""
    try:
        return Manifest.from_json(rt.storage.read_bytes(manifest_uri), manifest_uri)
    except Invalid as exc:
        raise BadInput("invalid_manifest", f"the existing manifest cannot be read: {exc}") from None


def _convert(arrival: layout.Arrival, rt: ArrivalRuntime) -> Manifest:
    """Converts into attempt-private ``tmp/`` objects, then the final shards and the manifest."""
    bucket, dataset, aid = arrival.bucket, arrival.dataset, arrival.arrival_id
    return converter.convert(
        layout.gs(bucket, arrival.name),
        layout.gs(bucket, layout.shards_prefix(rt.layout, dataset, aid)),
        dataset,
        rt.config,
        rt.storage,
        arrival_id=aid,
        generation=arrival.generation,
        tmp_prefix=layout.gs(bucket, f"tmp/{dataset}/{aid}/{uuid.uuid4().hex[:12]}"),
    )


def request_for(arrival: layout.Arrival, manifest_uri: str) -> TrainingRequest:
    return TrainingRequest(
        dataset=arrival.dataset,
        manifest=manifest_uri,
        request_id=layout.request_id(arrival.bucket, arrival.name, arrival.generation),
        reason="arrival",
        arrived_at=utc_now(),
    )


def _publish(arrival: layout.Arrival, manifest_uri: str, rt: ArrivalRuntime) -> None:
    assert rt.pubsub is not None, "the arrival stage publishes requests"
    request = request_for(arrival, manifest_uri)
    rt.pubsub.publish(rt.config.request_topic, request.to_json(), request.attributes(),
                      ordering_key=arrival.dataset)
    _maybe_compact(arrival, request.request_id, rt)


def _maybe_compact(arrival: layout.Arrival, request_id: str, rt: ArrivalRuntime) -> None:
    """Compaction runs where large conversions run: one arrival in ``compact_every`` (a function of its
    request id, so a redelivery decides alike; a second execution is harmless, snapshots being
    create-only) starts an execution of the convert job that compacts the dataset past the thresholds
    (``landfall.arrival.task``). It is an optimisation: a failure to start one is logged, never raised."""
    every = rt.config.compact_every
    if rt.jobs is None or every <= 0 or int(request_id, 16) % every:
        return
    try:
        rt.jobs.run(rt.config.convert_job, 1, {"LANDFALL_COMPACT_BUCKET": arrival.bucket,
                                                "LANDFALL_COMPACT_DATASET": arrival.dataset})
    except Exception as exc:
        log.warning("could not start compacting %s: %s", arrival.dataset, exc,
                    extra={"dataset": arrival.dataset, "fields": {"request_id": request_id}})


def _reject(obj: ObjectEvent, dataset: str | None, aid: str, exc: BadInput, rt: ArrivalRuntime) -> None:
    rejection = Rejection(stage="arrival", reason=exc.reason, detail=exc.detail, dataset=dataset,
                          source={"bucket": obj.bucket, "name": obj.name, "generation": obj.generation})
    rejections.record(rejection, f"gs://{obj.bucket}/{obj.name}", storage=rt.storage, lay=rt.layout,
                      bucket=obj.bucket, key=aid, context={"arrival_id": aid})
