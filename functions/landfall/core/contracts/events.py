"""Parses the CloudEvents the functions receive into plain values (no I/O).

- ``google.cloud.pubsub.topic.v1.messagePublished``: ``data.message`` is a Pub/Sub message; for
  arrivals it carries a GCS notification (JSON_API_V1; ``eventType`` ``OBJECT_FINALIZE``, ``OBJECT_DELETE``
  or ``OBJECT_ARCHIVE``). This is the deployed route (infra/modules/pubsub) and the local stack's.
- ``google.cloud.storage.object.v1.{finalized,deleted,archived}`` (Eventarc): ``data`` is the object
  resource. Accepted too, so the function can also be wired with an Eventarc trigger.

Cloud Storage reports an overwritten or deleted live object as ``OBJECT_ARCHIVE`` when the bucket keeps
versions and as ``OBJECT_DELETE`` when it does not; both become ``kind="delete"``.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from typing import Any

from landfall.core.contracts.messages import loads_object
from landfall.core.errors import Invalid

STORAGE_FINALIZED = "google.cloud.storage.object.v1.finalized"
STORAGE_KINDS = {STORAGE_FINALIZED: "finalize", "google.cloud.storage.object.v1.deleted": "delete",
                 "google.cloud.storage.object.v1.archived": "delete"}
NOTIFICATION_KINDS = {"OBJECT_FINALIZE": "finalize", "OBJECT_DELETE": "delete", "OBJECT_ARCHIVE": "delete"}
PUBSUB_PUBLISHED = "google.cloud.pubsub.topic.v1.messagePublished"


@dataclasses.dataclass(frozen=True)
class ObjectEvent:
    bucket: str
    name: str
    generation: int
    size: int | None = None
    crc32c: str | None = None
    kind: str = "finalize"  # finalize | delete (deleted, or archived: no longer the live generation)


@dataclasses.dataclass(frozen=True)
class Message:
    data: bytes
    attributes: dict[str, str]
    message_id: str
    delivery_attempt: int | None = None


def _attr(event: Any, key: str) -> Any:
    try:
        return event[key]
    except (KeyError, TypeError):
        return getattr(event, key, None)


def pubsub_message(event: Any) -> Message:
    if _attr(event, "type") != PUBSUB_PUBLISHED:
        raise Invalid(f"expected a {PUBSUB_PUBLISHED} event, got {_attr(event, 'type')!r}")
    payload = event.data if hasattr(event, "data") else event["data"]
    payload = payload if isinstance(payload, dict) else {}
    message = payload.get("message")
    if not isinstance(message, dict):
        raise Invalid("Pub/Sub event has no message")
    try:
        data = base64.b64decode(message.get("data") or "", validate=False)
    except (binascii.Error, ValueError) as exc:
        raise Invalid(f"Pub/Sub message data is not base64: {exc}") from None
    attempt = payload.get("deliveryAttempt") or message.get("deliveryAttempt")
    return Message(
        data=data,
        attributes={str(k): str(v) for k, v in (message.get("attributes") or {}).items()},
        message_id=str(message.get("messageId") or message.get("message_id") or ""),
        delivery_attempt=int(attempt) if attempt else None,
    )


def _object(kind: str, resource: dict[str, Any], bucket: str | None = None, name: str | None = None,
            generation: Any = None) -> ObjectEvent:
    bucket = bucket or resource.get("bucket")
    name = name or resource.get("name")
    generation = generation or resource.get("generation")
    if not bucket or not name or generation in (None, ""):
        raise Invalid("storage event lacks bucket, name or generation")
    try:
        gen = int(generation)
        size = int(resource["size"]) if resource.get("size") not in (None, "") else None
    except (TypeError, ValueError):
        raise Invalid(f"storage event has a non-numeric generation or size: {generation!r}") from None
    return ObjectEvent(bucket=str(bucket), name=str(name), generation=gen, size=size, crc32c=resource.get("crc32c"),
                       kind=kind)


def object_event(event: Any) -> ObjectEvent | None:
    """The object finalized or deleted, or ``None`` for another storage event (metadata updates: ignored)."""
    kind = _attr(event, "type")
    payload = event.data if hasattr(event, "data") else event["data"]
    if kind in STORAGE_KINDS:
        if not isinstance(payload, dict):
            raise Invalid("storage event data is not an object resource")
        return _object(STORAGE_KINDS[kind], payload)
    if kind == PUBSUB_PUBLISHED:
        message = pubsub_message(event)
        attrs = message.attributes
        object_kind = NOTIFICATION_KINDS.get(attrs.get("eventType", "OBJECT_FINALIZE"))
        if object_kind is None:
            return None
        resource: dict[str, Any] = {}
        if message.data:
            resource = loads_object(message.data, "GCS notification payload")  # bounded: Invalid, not RecursionError
        return _object(object_kind, resource, attrs.get("bucketId"), attrs.get("objectId"),
                       attrs.get("objectGeneration"))
    raise Invalid(f"unsupported event type {kind!r}")
