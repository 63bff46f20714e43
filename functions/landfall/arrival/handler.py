"""The data-arrival stage: an object landed under ``incoming/``; convert it and request training.

Idempotent under at-least-once delivery: the manifest is the commit point. If it exists, the work
is done and only the (deterministic) training request is published again, which also repairs a
crash between the manifest and the publish; consumers drop the duplicate by ``request_id``.
"""

from __future__ import annotations

import functools
import logging
import uuid
from typing import Literal

from landfall.arrival import converter
from landfall.arrival.config import ConverterConfig
from landfall.core import layout, rejections
from landfall.core.config import Layout
from landfall.core.errors import BadInput, NotFound
from landfall.core.events import ObjectEvent
from landfall.core.messages import Manifest, Rejection, TrainingRequest, utc_now
from landfall.core.pubsub import PubSub
from landfall.core.runtime import Runtime
from landfall.core.storage import Storage

log = logging.getLogger("landfall.arrival")

Outcome = Literal["ignored", "converted", "duplicate", "rejected", "superseded"]
ArrivalRuntime = Runtime[ConverterConfig]


def runtime_from_env() -> ArrivalRuntime:
    config = ConverterConfig.load()
    return Runtime(config, Layout.load(), Storage(config.project, retry_deadline_s=config.storage_retry_s),
                   PubSub(config.project))


@functools.cache
def runtime() -> ArrivalRuntime:
    """Built once per function instance from the environment (``LANDFALL_*``, ``GOOGLE_CLOUD_PROJECT``)."""
    return runtime_from_env()


def handle(obj: ObjectEvent, rt: ArrivalRuntime) -> Outcome:
    """Permanent problems are recorded and logged and return normally; temporary ones raise."""
    if not layout.is_arrival(obj.name, rt.layout):
        log.debug("ignoring %s: not under %s", obj.name, rt.layout.incoming_prefix)
        return "ignored"
    aid = layout.arrival_id(obj.name, obj.generation)
    dataset = layout.dataset_of(obj.name, rt.layout) or None
    try:
        arrival = layout.parse_arrival(obj.bucket, obj.name, obj.generation, rt.layout)
        manifest_uri = layout.gs(obj.bucket, layout.manifest_name(rt.layout, arrival.dataset, aid))
        if rt.storage.exists(manifest_uri):
            return _republish(arrival, manifest_uri, rt)
        manifest = _convert(arrival, rt)
    except NotFound:
        # This generation was overwritten or deleted before we read it; its successor has its own event.
        log.warning("%s generation %s is gone; skipping", obj.name, obj.generation,
                    extra={"arrival_id": aid, "dataset": dataset})
        return "superseded"
    except BadInput as exc:
        _reject(obj, dataset, aid, exc, rt)
        return "rejected"
    _publish(arrival, manifest_uri, rt)
    log.info("converted %s: %d instances in %d shards", obj.name, manifest.count, len(manifest.shards),
             extra={"arrival_id": aid, "dataset": dataset,
                    "fields": {"manifest": manifest_uri, "count": manifest.count, "shards": len(manifest.shards),
                               "dropped": manifest.dropped_nonfinite}})
    return "converted"


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


def _republish(arrival: layout.Arrival, manifest_uri: str, rt: ArrivalRuntime) -> Outcome:
    """Already converted (a redelivery): publish the same request again, in case the first publish was lost."""
    manifest = Manifest.from_json(rt.storage.read_bytes(manifest_uri), manifest_uri)
    _publish(arrival, manifest_uri, rt)
    log.info("already converted %s; request re-published", arrival.name,
             extra={"arrival_id": arrival.arrival_id, "dataset": arrival.dataset,
                    "fields": {"manifest": manifest_uri, "count": manifest.count}})
    return "duplicate"


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


def _reject(obj: ObjectEvent, dataset: str | None, aid: str, exc: BadInput, rt: ArrivalRuntime) -> None:
    rejection = Rejection(stage="arrival", reason=exc.reason, detail=exc.detail, dataset=dataset,
                          source={"bucket": obj.bucket, "name": obj.name, "generation": obj.generation})
    rejections.record(rejection, f"gs://{obj.bucket}/{obj.name}", storage=rt.storage, lay=rt.layout,
                      bucket=obj.bucket, key=aid, context={"arrival_id": aid})
