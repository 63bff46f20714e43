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
