"""Compaction where no Cloud Run job runs it: ``landfall compact`` and the local operator (after every job it
finishes). Compacts a dataset (``landfall.arrival.compact``), then applies the collection rule with the
dataset's newest released job's snapshot counted as read by a live job (under ``coalesce`` and ``forbid``
only that job can be unfinished; counting it even once it ended keeps at most one snapshot more)."""

from __future__ import annotations

import logging

from landfall.arrival import compact
from landfall.core import snapshots
from landfall.core.config import Layout
from landfall.core.errors import NotFound
from landfall.core.storage import Storage
from landfall.submit.ledger import Ledger

log = logging.getLogger("landfall.local.compaction")


def named_by_live_jobs(storage: Storage, bucket: str, dataset: str, layout: Layout) -> set[int]:
    ledger = Ledger(storage, bucket, layout)
    seq = ledger.head_seq(dataset)
    if not seq:
        return set()
    try:
        snapshot = ledger.read_inputs(ledger.job_name(dataset, seq)).snapshot
    except NotFound:
        return set()
    return {snapshots.seq_of(snapshot)} if snapshot else set()


def run(storage: Storage, bucket: str, dataset: str, target_bytes: int, *, policy: str = "coalesce",
        if_needed: bool = False, layout: Layout | None = None) -> dict:
    """Compacts ``dataset`` (only past the trigger's thresholds with ``if_needed``) and collects; returns
    what it did."""
    layout = layout or Layout()
    if if_needed and not compact.should_compact(storage, bucket, dataset, layout):
        return {"dataset": dataset, "snapshot": None, "detail": "below the compaction thresholds", "deleted": []}
    result = compact.compact(storage, bucket, dataset, target_bytes, layout)
    deleted = [] if policy == "allow" else compact.collect(
        storage, bucket, dataset, named_by_live_jobs(storage, bucket, dataset, layout), layout)
    out = {"dataset": dataset, "snapshot": result.snapshot, "shards": result.shards, "written": result.written,
           "arrivals": result.arrivals, "dropped": result.dropped, "detail": result.detail, "deleted": deleted}
    log.info("compaction of %s: %s", dataset, result.detail, extra={"dataset": dataset, "fields": out})
    return out
