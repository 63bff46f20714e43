"""The one reading of a timestamp: the ISO 8601 text every record here writes (``utc_now``: ``...Z``, milliseconds) or
that another system gives (an offset, a date alone; Kubernetes' ``creationTimestamp``), as an aware ``datetime``
(``parse``: a naive one is taken as UTC) or seconds since the epoch (``epoch``: ``None`` when it is not one)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def parse(text: str) -> datetime:
    """An aware ``datetime``; ``ValueError`` when ``text`` is not ISO 8601 (Python 3.11 reads ``Z`` itself)."""
    stamp = datetime.fromisoformat(str(text).strip())
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)


def epoch(stamp: Any) -> float | None:
    """Seconds since the epoch from an ISO 8601 timestamp (``...Z`` or with an offset); ``None`` if it is not one."""
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        return parse(stamp).timestamp()
    except ValueError:
        return None


GENERATION_FLOOR = 10**15  # a Cloud Storage generation is µs since the epoch: any real one is above this (2001)


def of_generation(generation: Any) -> str | None:
    """The time of a Cloud Storage object's write, from its generation (µs since the epoch), as ISO 8601 text to the
    second (``...Z``); ``None`` when it is not one (absent, not a number, or too small to be a time, as a file's
    generation on local disk can be)."""
    try:
        value = int(generation)
    except (TypeError, ValueError):
        return None
    if isinstance(generation, bool) or value < GENERATION_FLOOR:
        return None
    try:
        return datetime.fromtimestamp(value / 1e6, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    except (ValueError, OverflowError, OSError):  # not a time any writer could have meant: shown as a number only
        return None
