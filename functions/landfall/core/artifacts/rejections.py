"""The one rejection writer: both stages record a refused input as ``landfall.rejection/v1`` and log it.

Where: ``gs://BUCKET/rejected/<dataset>/<key>.json`` (``_invalid/`` when the dataset is unknown or not a
valid name). One ERROR line names the input and the reason. A rejection that cannot be written for good
(say the bucket a bad request names does not exist) is logged only; a temporary storage failure raises,
so the platform retries the whole event and the record is written then.

Bounded: the record's ``detail`` is cut to ``MAX_DETAIL`` characters and the request as received to about
``MAX_REQUEST_BYTES`` (long values are cut, each saying its length), so a request with a 10 MB field makes a
record of a few KiB and an ERROR line of at most ``MAX_DETAIL`` characters of detail.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

from landfall.core.contracts import layout
from landfall.core.contracts.layout import Layout
from landfall.core.contracts.messages import Rejection
from landfall.core.errors import AlreadyExists, PermanentError
from landfall.core.services.storage import Storage

log = logging.getLogger("landfall.rejections")

MAX_DETAIL = 1000
MAX_REQUEST_BYTES = 4096
_VALUE = 256  # characters kept of each long value of a request


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _bounded_request(request: dict[str, Any] | str | None) -> dict[str, Any] | str | None:
    if request is None:
        return None
    if isinstance(request, str):
        return _cut(request, MAX_REQUEST_BYTES)
    text = json.dumps(request, default=str)
    if len(text) <= MAX_REQUEST_BYTES:
        return request
    kept = {str(k)[:_VALUE]: (v if isinstance(v, int | float | bool) or v is None else _cut(
        v if isinstance(v, str) else json.dumps(v, default=str), _VALUE)) for k, v in list(request.items())[:16]}
    if len(json.dumps(kept)) <= MAX_REQUEST_BYTES:
        return kept
    return _cut(text, MAX_REQUEST_BYTES)


def bounded(rejection: Rejection) -> Rejection:
    """The rejection with its detail and request cut to size (see the module's docstring)."""
    return dataclasses.replace(rejection, detail=_cut(" ".join(rejection.detail.split()), MAX_DETAIL),
                               request=_bounded_request(rejection.request))


def valid_dataset(dataset: str | None) -> str | None:
    return dataset if layout.valid_dataset(dataset) else None


def record(rejection: Rejection, what: str, *, storage: Storage, lay: Layout, bucket: str | None, key: str,
           context: dict[str, str | None] | None = None, once: bool = False) -> str | None:
    """Writes the record (when a bucket is known) and logs it; returns its URI, or ``None`` if not written.

    ``once``: create-only, for inputs that several writers may refuse at once (the tasks of a ranged
    conversion): only the first records and logs it; the others log one INFO line.
    """
    rejection = bounded(rejection)
    dataset = valid_dataset(rejection.dataset)
    uri = layout.gs(bucket, layout.rejection_name(lay, dataset, key)) if bucket else None
    if uri:
        try:
            storage.write_bytes(uri, rejection.to_json(), content_type="application/json", if_absent=once)
        except AlreadyExists:
            log.info("%s was already rejected (%s)", what, uri, extra={**(context or {}), "dataset": dataset})
            return uri
        except PermanentError as exc:
            log.error("could not record the rejection at %s: %s", uri, exc)
            uri = None
    log.error("rejected %s: %s: %s", what, rejection.reason, rejection.detail,
              extra={**(context or {}), "dataset": dataset, "reason": rejection.reason,
                     "fields": {"rejection": uri, "stage": rejection.stage}})
    return uri
