"""The scorer service: a CloudEvent function under functions-framework, fed by Pub/Sub push (the training requests
every committed arrival publishes, and ``landfall rescore``'s score requests). Cloud Run runs it from
``scorer/Dockerfile`` (``scorer/main.py`` re-exports it); ``landfall up`` serves this file. Thin, as
``functions/main.py``: parse the event, call ``landfall.detect.handler``; permanent errors are logged and
acknowledged there, temporary ones raise so Pub/Sub redelivers (then dead-letters)."""

from __future__ import annotations

import logging
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import functions_framework

from landfall.core import logs
from landfall.core.contracts import events
from landfall.core.errors import PermanentError
from landfall.detect import handler

logs.setup()
log = logging.getLogger("landfall.detect")
log.info("scorer started", extra={"fields": {"instance": handler.INSTANCE}})


@functions_framework.cloud_event
def on_score_request(cloud_event) -> None:  # type: ignore[no-untyped-def]
    try:
        message = events.pubsub_message(cloud_event)
    except PermanentError as exc:
        log.error("malformed Pub/Sub event: %s", exc)
        return
    handler.handle(message.data, message.attributes, handler.runtime())
