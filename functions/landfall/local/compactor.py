"""Compaction where no Cloud Run job runs it: ``landfall compact`` and the local operator (after every job it
finishes). Compacts a dataset (``landfall.arrival.compaction``), then applies the collection rule with the
dataset's newest released job's snapshot counted as read by a live job (under ``coalesce`` and ``forbid``
only that job can be unfinished; counting it even once it ended keeps at most one snapshot more). On the deployed
platform the reconciler applies the same rule (``landfall.reconcile.collect``), since the Cloud Run job that
compacts there cannot read the submit stage's records."""

from __future__ import annotations

import logging

from landfall.arrival import compaction
from landfall.core.contracts.layout import Layout
from landfall.core.services.storage import Storage
from landfall.reconcile.collect import named_by_live_jobs

log = logging.getLogger("landfall.local.compactor")


def run(storage: Storage, bucket: str, dataset: str, target_bytes: int, *, policy: str = "coalesce",
        if_needed: bool = False, layout: Layout | None = None) -> dict:
    """Compacts ``dataset`` (only past the trigger's thresholds with ``if_needed``) and collects; returns
    what it did."""
    layout = layout or Layout()
    if if_needed and not compaction.should_compact(storage, bucket, dataset, layout):
        return {"dataset": dataset, "snapshot": None, "detail": "below the compaction thresholds", "deleted": []}
    result = compaction.compact(storage, bucket, dataset, target_bytes, layout)
    deleted = [] if policy == "allow" else compaction.collect(
        storage, bucket, dataset, named_by_live_jobs(storage, bucket, dataset, layout), layout)
    out = {"dataset": dataset, "snapshot": result.snapshot, "shards": result.shards, "written": result.written,
           "arrivals": result.arrivals, "dropped": result.dropped, "detail": result.detail, "deleted": deleted}
    log.info("compaction of %s: %s", dataset, result.detail, extra={"dataset": dataset, "fields": out})
    return out
