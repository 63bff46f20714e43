"""Cloud Functions entry points (gen2, CloudEvent). Thin: parse the event, call pure code, map errors.

Permanent errors are logged (and recorded by the stage) and the function returns, so the event is
acknowledged; temporary errors raise, so the platform retries with backoff.

This file and ``landfall/{core,arrival,submit}`` are what deploys (``infra/modules/functions`` zips this
folder without ``landfall/local`` and ``landfall/cli``); nothing imported from here may reach those.
"""

from __future__ import annotations

import logging

import functions_framework

from landfall.arrival import handler as arrival
from landfall.core import logs
from landfall.core.contracts import events
from landfall.core.errors import PermanentError

logs.setup()
log = logging.getLogger("landfall.main")


@functions_framework.cloud_event
def on_data_arrival(cloud_event) -> None:  # type: ignore[no-untyped-def]
    try:
        obj = events.object_event(cloud_event)
    except PermanentError as exc:
        log.error("malformed storage event %s: %s", cloud_event.get("id") if hasattr(cloud_event, "get") else "", exc)
        return
    if obj is not None:
        arrival.handle(obj, arrival.runtime())


@functions_framework.cloud_event
def on_training_request(cloud_event) -> None:  # type: ignore[no-untyped-def]
    from landfall.submit import handler as submit  # imported here so an arrival instance never loads it

    try:
        message = events.pubsub_message(cloud_event)
    except PermanentError as exc:
        log.error("malformed Pub/Sub event: %s", exc)
        return
    submit.handle_message(message.data, message.attributes, submit.runtime())
