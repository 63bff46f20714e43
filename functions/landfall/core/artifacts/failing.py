"""An arrival whose event is failing (issue #54): a temporary error, or an unexpected one, makes the arrival function
answer 500, and the push subscription redelivers the event until its dead letter takes it. Until then nothing in the
bucket said so: this record does, so ``landfall status`` and ``landfall trace`` show the arrival and its error while
it is being retried (and after, until a manifest, a rejection or a retraction supersedes it).

Where: ``gs://BUCKET/tfrecords/<dataset>/<arrival-id>/failing.json`` (``landfall.failing/v1``), beside where its
manifest goes, as the dispatch record is (``layout.FAILING``). What: the arrival's source, ``error`` (one line: the
error's class and message, and for an unexpected one the file, line and function it was raised in), ``kind``
(``temporary``: a ``TemporaryError``; ``unexpected``: anything else that escaped), ``first_failed_at``,
``failed_at`` (the newest attempt recorded), ``attempts`` (the attempts recorded) and ``at`` (epoch seconds).

Decisions:
- **Written by the handler, on the way out.** ``landfall.arrival.handler.handle`` records it when an object's
  finalize event raises, then raises the same error, so the retry class is unchanged. Best effort: failing to write
  it logs a WARNING and never hides the event's own error; its reads and write have a short retry deadline
  (``RETRY_DEADLINE_S``), so an outage of Cloud Storage itself does not make each failing attempt much longer.
- **At most one write a second.** Cloud Storage takes at most one write a second to one object name
  (https://cloud.google.com/storage/quotas), and redeliveries can come faster (several instances, a redelivery
  storm). The record is read first; it is rewritten only when its last write (``at``) is ``WRITE_INTERVAL_S`` old
  or more, and only over the generation read (``write_if_generation``): of two attempts racing, one writes, the
  other's is not counted. So ``attempts`` counts the attempts recorded, at most one a second, not every delivery.
- **Superseded, not deleted on the hot path.** A converted arrival would otherwise pay a delete for a record it
  almost never has. Readers (``current``) show the record only while the arrival has no manifest, retraction or
  rejection, and no dispatch record written after it (a redelivery that found another handler starting the Cloud
  Run job fails until that handler records the execution). The handler deletes it (``clear``) only where nothing
  else would supersede it: an event that ends ``superseded`` (its generation gone, kept under ``on_delete: keep``).
"""

from __future__ import annotations

import json
import logging
import time
import traceback
from collections.abc import Callable
from pathlib import PurePath
from typing import Any

from landfall.core.contracts import layout
from landfall.core.contracts.layout import Arrival, Layout
from landfall.core.contracts.messages import utc_now
from landfall.core.errors import AlreadyExists, LandfallError, NotFound, TemporaryError
from landfall.core.services.storage import Storage

log = logging.getLogger("landfall.failing")

SCHEMA = "landfall.failing/v1"
WRITE_INTERVAL_S = 1.0  # Cloud Storage: one write a second to one object name
RETRY_DEADLINE_S = 5.0  # the record's own reads and write: best effort beside an error already being raised
MAX_ERROR = 300  # characters of the error line


def uri_of(lay: Layout, arrival: Arrival) -> str:
    return layout.gs(arrival.bucket, layout.failing_name(lay, arrival.dataset, arrival.arrival_id))


def error_line(exc: BaseException) -> tuple[str, str]:
    """``(kind, line)``: ``temporary`` and the error's message for a ``TemporaryError``; else ``unexpected``, its
    class, message and where it was raised (``arrival/series.py:313 in feed``), on one line of at most
    ``MAX_ERROR`` characters."""
    if isinstance(exc, TemporaryError):
        kind, text = "temporary", f"{type(exc).__name__}: {exc}"
    else:
        kind, text = "unexpected", f"{type(exc).__name__}: {exc}"
        frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ is not None else []
        if frames:
            last = frames[-1]
            parts = PurePath(last.filename).parts
            at = max((i for i, part in enumerate(parts[:-1]) if part == "landfall"), default=len(parts) - 2)
            short = "/".join(parts[at + 1:])  # arrival/series.py: the package's path, wherever it is installed
            text += f" (at {short}:{last.lineno} in {last.name})"
    text = " ".join(text.split())
    return kind, text if len(text) <= MAX_ERROR else text[:MAX_ERROR - 3] + "..."


def note(storage: Storage, lay: Layout, arrival: Arrival, exc: BaseException,
         clock: Callable[[], float] = time.time) -> bool:
    """Records that ``arrival``'s event failed with ``exc`` (see the module's docstring); whether it wrote the record.
    Never raises."""
    uri = uri_of(lay, arrival)
    try:
        bounded = storage.bounded(RETRY_DEADLINE_S)
        try:
            raw, generation = bounded.read_generation(uri)
        except NotFound:
            prior: dict[str, Any] | None = None
            generation = 0
        else:
            try:
                prior = json.loads(raw)
                prior = prior if isinstance(prior, dict) else None
            except ValueError:
                prior = None  # unreadable: replaced
        now = clock()
        if prior is not None and isinstance(prior.get("at"), int | float) and now - prior["at"] < WRITE_INTERVAL_S:
            return False  # written less than a second ago: Cloud Storage's rate for one object
        kind, line = error_line(exc)
        attempts = prior.get("attempts") if prior is not None else 0
        stamp = utc_now()
        record = {"schema": SCHEMA, "dataset": arrival.dataset, "arrival_id": arrival.arrival_id,
                  "source": {"bucket": arrival.bucket, "name": arrival.name, "generation": arrival.generation},
                  "kind": kind, "error": line,
                  "first_failed_at": (prior or {}).get("first_failed_at") or stamp, "failed_at": stamp,
                  "attempts": (attempts if isinstance(attempts, int) else 0) + 1, "at": now}
        bounded.write_if_generation(uri, json.dumps(record, indent=2).encode(), generation)
    except AlreadyExists:
        return False  # another attempt wrote it meanwhile: one write is enough
    except Exception as problem:
        log.warning("could not record that %s is failing at %s: %s", arrival.name, uri, problem,
                    extra={"arrival_id": arrival.arrival_id, "dataset": arrival.dataset})
        return False
    log.warning("%s is failing and will be retried: %s", arrival.name, line,
                extra={"arrival_id": arrival.arrival_id, "dataset": arrival.dataset,
                       "fields": {"failing": uri, "kind": kind, "attempts": record["attempts"]}})
    return True


def clear(storage: Storage, lay: Layout, arrival: Arrival) -> None:
    """Removes the record, if any (best effort)."""
    try:
        storage.bounded(RETRY_DEADLINE_S).delete(uri_of(lay, arrival))
    except Exception as problem:
        log.warning("could not remove %s: %s", uri_of(lay, arrival), problem,
                    extra={"arrival_id": arrival.arrival_id, "dataset": arrival.dataset})


def read(storage: Storage, uri: str) -> dict[str, Any] | None:
    """The record at ``uri`` (None: absent); an unreadable one is ``{"record": uri, "error": ...}``."""
    try:
        raw = json.loads(storage.read_bytes(uri))
    except NotFound:
        return None
    except (LandfallError, ValueError) as exc:
        return {"record": uri, "error": f"unreadable failing record: {exc}"}
    if not isinstance(raw, dict):
        return {"record": uri, "error": "unreadable failing record: not a JSON object"}
    return {"record": uri, **raw}


def current(found: Any, dispatch: Any, superseded: bool) -> bool:
    """Whether an arrival's failing record (``found``, its listed ``ObjectInfo``, or None) still stands: not when
    ``superseded`` (the arrival has a manifest, a retraction or a rejection), nor when its dispatch record
    (``dispatch``, or None) was written after it: listed generations compare as times (in Cloud Storage a generation
    is the time of its write in µs; on local disk, the file's)."""
    if found is None or superseded:
        return False
    return dispatch is None or found.generation > dispatch.generation
