"""The one rejection writer: both stages record a refused input as ``landfall.rejection/v1`` and log it.

Where: ``gs://BUCKET/rejected/<dataset>/<key>.json`` (``_invalid/`` when the dataset is unknown or not a
valid name). One ERROR line names the input and the reason. A rejection that cannot be written for good
(say the bucket a bad request names does not exist) is logged only; a temporary storage failure raises,
so the platform retries the whole event and the record is written then.
"""

from __future__ import annotations

import logging

from landfall.core import layout
from landfall.core.config import Layout
from landfall.core.errors import AlreadyExists, PermanentError
from landfall.core.messages import Rejection
from landfall.core.storage import Storage

log = logging.getLogger("landfall.rejections")


def valid_dataset(dataset: str | None) -> str | None:
    return dataset if dataset and layout.DATASET_RE.match(dataset) else None


def record(rejection: Rejection, what: str, *, storage: Storage, lay: Layout, bucket: str | None, key: str,
           context: dict[str, str | None] | None = None, once: bool = False) -> str | None:
    """Writes the record (when a bucket is known) and logs it; returns its URI, or ``None`` if not written.

    ``once``: create-only, for inputs that several writers may refuse at once (the tasks of a ranged
    conversion): only the first records and logs it; the others log one INFO line.
    """
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
