"""Cloud Functions entry points (gen2, CloudEvent). Thin: parse the event, call pure code, map errors.

Permanent errors are logged (and recorded by the stage) and the function returns, so the event is
acknowledged; temporary errors raise, so the platform retries with backoff.
"""

from __future__ import annotations

import functools
import logging

import functions_framework

from landfall import arrival, events, logs
from landfall.errors import PermanentError

logs.setup()
log = logging.getLogger("landfall.main")


@functools.cache
def _arrival_runtime() -> arrival.Runtime:
    return arrival.Runtime.from_env()


@functions_framework.cloud_event
def on_data_arrival(cloud_event) -> None:  # type: ignore[no-untyped-def]
    try:
        obj = events.object_finalized(cloud_event)
    except PermanentError as exc:
        log.error("malformed storage event %s: %s", cloud_event.get("id") if hasattr(cloud_event, "get") else "", exc)
        return
    if obj is not None:
        arrival.handle(obj, _arrival_runtime())


@functions_framework.cloud_event
def on_training_request(cloud_event) -> None:  # type: ignore[no-untyped-def]
    from landfall import submitter  # the submit stage; imported here so arrivals never load it

    try:
        message = events.pubsub_message(cloud_event)
    except PermanentError as exc:
        log.error("malformed Pub/Sub event: %s", exc)
        return
    submitter.handle_message(message.data, message.attributes, submitter.runtime())
