"""The data-arrival stage: an object landed under ``incoming/``; convert it and request training.

Idempotent under at-least-once delivery: the manifest is the commit point. If it exists, the work
is done and only the (deterministic) training request is published again, which also repairs a
crash between the manifest and the publish; consumers drop the duplicate by ``request_id``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import uuid
from typing import Literal

from landfall import converter, layout
from landfall.config import ConverterConfig, Layout
from landfall.errors import BadInput, NotFound
from landfall.events import ObjectEvent
from landfall.messages import Manifest, TrainingRequest, utc_now
from landfall.pubsub import PubSub
from landfall.storage import Storage

log = logging.getLogger("landfall.arrival")

Outcome = Literal["ignored", "converted", "duplicate", "rejected", "superseded"]


@dataclasses.dataclass
class Runtime:
    config: ConverterConfig
    layout: Layout
    storage: Storage
    pubsub: PubSub

    @classmethod
    def from_env(cls) -> Runtime:
        config = ConverterConfig.load()
        return cls(config, Layout.load(), Storage(config.project, retry_deadline_s=config.storage_retry_s),
                   PubSub(config.project))


def handle(obj: ObjectEvent, rt: Runtime) -> Outcome:
    """Permanent problems are recorded and logged and return normally; temporary ones raise."""
    if not layout.is_arrival(obj.name, rt.layout):
        log.debug("ignoring %s: not under %s", obj.name, rt.layout.incoming_prefix)
        return "ignored"
    aid = layout.arrival_id(obj.name, obj.generation)
    ctx = {"arrival_id": aid, "dataset": layout.dataset_of(obj.name, rt.layout) or None}
    try:
        arrival = layout.parse_arrival(obj.bucket, obj.name, obj.generation, rt.layout)
        manifest_uri = layout.gs(obj.bucket, layout.manifest_name(rt.layout, arrival.dataset, aid))
        if rt.storage.exists(manifest_uri):
            manifest = Manifest.from_json(rt.storage.read_bytes(manifest_uri), manifest_uri)
            _publish(arrival, manifest_uri, rt)
            log.info("already converted %s; request re-published", obj.name, extra={**ctx, "fields": {
                "manifest": manifest_uri, "count": manifest.count}})
            return "duplicate"
        source = layout.gs(obj.bucket, obj.name)
        try:
            manifest = converter.convert(
                source,
                layout.gs(obj.bucket, layout.shards_prefix(rt.layout, arrival.dataset, aid)),
                arrival.dataset,
                rt.config,
                rt.storage,
                arrival_id=aid,
                generation=obj.generation,
                tmp_prefix=layout.gs(obj.bucket, f"tmp/{arrival.dataset}/{aid}/{uuid.uuid4().hex[:12]}"),
            )
        except NotFound:
            # This generation was overwritten or deleted before we read it; its successor has its own event.
            log.warning("%s generation %s is gone; skipping", obj.name, obj.generation, extra=ctx)
            return "superseded"
    except BadInput as exc:
        _reject(obj, ctx.get("dataset"), aid, exc, rt)
        return "rejected"
    _publish(arrival, manifest_uri, rt)
    log.info("converted %s: %d instances in %d shards", obj.name, manifest.count, len(manifest.shards),
             extra={**ctx, "fields": {"manifest": manifest_uri, "count": manifest.count,
                                      "shards": len(manifest.shards), "dropped": manifest.dropped_nonfinite}})
    return "converted"


def request_for(arrival: layout.Arrival, manifest_uri: str) -> TrainingRequest:
    return TrainingRequest(
        dataset=arrival.dataset,
        manifest=manifest_uri,
        request_id=layout.request_id(arrival.bucket, arrival.name, arrival.generation),
        reason="arrival",
        arrived_at=utc_now(),
    )


def _publish(arrival: layout.Arrival, manifest_uri: str, rt: Runtime) -> None:
    request = request_for(arrival, manifest_uri)
    rt.pubsub.publish(rt.config.request_topic, request.to_json(), request.attributes(),
                      ordering_key=arrival.dataset)


def _reject(obj: ObjectEvent, dataset: str | None, aid: str, exc: BadInput, rt: Runtime) -> None:
    valid = dataset if dataset and layout.DATASET_RE.match(dataset) else None
    record = {
        "reason": exc.reason,
        "detail": exc.detail,
        "source": {"bucket": obj.bucket, "name": obj.name, "generation": obj.generation},
        "rejected_at": utc_now(),
    }
    uri = layout.gs(obj.bucket, layout.rejection_name(rt.layout, valid, aid))
    rt.storage.write_bytes(uri, json.dumps(record, indent=2).encode(), content_type="application/json")
    log.error("rejected gs://%s/%s: %s: %s", obj.bucket, obj.name, exc.reason, exc.detail,
              extra={"arrival_id": aid, "dataset": valid, "reason": exc.reason, "fields": {"rejection": uri}})
