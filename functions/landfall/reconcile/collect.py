"""The collection rule on the deployed platform: the reconciler deletes superseded snapshots and what only they name.

Compaction runs on the Cloud Run convert job, which may not read the submit stage's records (the arrival stage
never imports ``landfall.submit``), so it cannot tell which snapshot a live job reads. The reconciler can: after
its reconcile pass, and at most once every ``COLLECT_EVERY_S`` (collection is not urgent: a superseded snapshot
is kept ``snapshots.GRACE_S`` at least anyway), ``Collector`` lists the datasets that have snapshots and applies
``landfall.arrival.compaction.collect`` to each, with its head job's snapshot counted as read by a live job
(``named_by_live_jobs``: under ``coalesce`` and ``forbid`` only the head can be unfinished; counting it even once
it ended keeps at most one snapshot more). Under ``allow`` every request has its own job, any number of them
unfinished, and nothing records which snapshots they read: nothing is collected (decided: keeping data is the
safe side; ``landfall compact`` under ``allow`` collects nothing either).

One dataset's failure (any exception: an unreadable snapshot, a denied request, a bug) is logged with the dataset
and the traceback and never stops the other datasets or the reconcile loop; that dataset is tried again at the
next collection, an interval later, so no dataset sticks and none is retried in a tight loop.

**Cost.** A pass that is not due makes no request. A due one makes one delimiter listing of ``snapshots/`` (one
request per 1,000 datasets, whatever they hold), then per dataset: the head job (``requests/<D>/head.json``, one
existence check per job released since that hint was written, normally one, and the head's ``inputs.json``), one
listing of ``snapshots/<D>/`` and a read of each snapshot listed, the parts of the snapshots kept, one listing of
``compacted/<D>/``, and one delete per object collected. What it lists and reads is what the kept snapshots name
(the live data, in shards of about ``LANDFALL_SHARD_TARGET_BYTES`` and parts of ``snapshots.PART_RANGES``
arrivals) plus what became collectable since the last collection; it never lists or reads an arrival's manifest,
and what it already collected is gone. So the cost does not grow with a dataset's history (its arrivals, its
compactions, its jobs), only with the data it holds now.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from landfall.arrival import compaction
from landfall.core.artifacts import snapshots
from landfall.core.contracts.layout import Layout, gs
from landfall.core.errors import NotFound
from landfall.core.services.storage import Storage
from landfall.submit.ledger import Ledger

if TYPE_CHECKING:
    from landfall.submit.config import JobConfig

log = logging.getLogger("landfall.reconcile.collect")

COLLECT_EVERY_S = 3600.0  # at most one collection an hour: the grace is an hour, and nothing waits for it


def named_by_live_jobs(storage: Storage, bucket: str, dataset: str, layout: Layout) -> set[int]:
    """The seq of the snapshot the dataset's newest released job reads (empty: no job, or one on inputs v1)."""
    ledger = Ledger(storage, bucket, layout)
    seq = ledger.head_seq(dataset)
    if not seq:
        return set()
    try:
        snapshot = ledger.read_inputs(ledger.job_name(dataset, seq)).snapshot
    except NotFound:
        return set()
    return {snapshots.seq_of(snapshot)} if snapshot else set()


def datasets_with_snapshots(storage: Storage, bucket: str, layout: Layout) -> list[str]:
    """The datasets with a folder under ``snapshots/``: one delimiter listing, not one of every snapshot."""
    prefix = gs(bucket, layout.snapshots_prefix)
    return [uri[len(prefix):].rstrip("/") for uri in storage.list_prefixes(prefix)]


@dataclasses.dataclass(frozen=True)
class Collection:
    deleted: dict[str, list[str]]  # dataset -> what was deleted (datasets with nothing to delete included)
    failed: dict[str, str]  # dataset -> why its collection failed


def collect_all(storage: Storage, cfg: JobConfig, layout: Layout, now: float,
                after_each: Callable[[], None] = lambda: None) -> Collection:
    """Applies the collection rule to every dataset with snapshots (none under ``allow``); ``after_each`` is
    called after each dataset, failed or not (the loop touches its heartbeat there)."""
    if not cfg.bucket or cfg.concurrency == "allow":
        return Collection({}, {})
    deleted, failed = {}, {}
    for dataset in datasets_with_snapshots(storage, cfg.bucket, layout):
        try:
            live = named_by_live_jobs(storage, cfg.bucket, dataset, layout)
            deleted[dataset] = compaction.collect(storage, cfg.bucket, dataset, live, layout, now=now)
        except Exception as exc:  # any failure: this dataset waits for the next collection, the others go on
            failed[dataset] = f"{type(exc).__name__}: {exc}"
            log.error("collection of %s failed (tried again in %g s): %s", dataset, COLLECT_EVERY_S,
                      failed[dataset], exc_info=True, extra={"dataset": dataset})
        else:
            if deleted[dataset]:
                log.info("collected %d objects of %s", len(deleted[dataset]), dataset,
                         extra={"dataset": dataset, "fields": {"deleted": deleted[dataset]}})
        after_each()
    log.info("collection: %d datasets, %d objects deleted, %d failed", len(deleted) + len(failed),
             sum(map(len, deleted.values())), len(failed),
             extra={"fields": {"datasets": len(deleted) + len(failed), "failed": sorted(failed)}})
    return Collection(deleted, failed)


@dataclasses.dataclass
class Collector:
    """``collect_all`` at most once every ``every_s`` of ``clock`` (wall time: the grace is measured against the
    snapshots' ``created_at``); the first call collects. The time is taken before collecting, so a collection
    that fails, or fails for some datasets, waits the interval too."""

    storage: Storage
    cfg: JobConfig
    layout: Layout = dataclasses.field(default_factory=Layout)
    clock: Callable[[], float] = time.time
    every_s: float = COLLECT_EVERY_S
    last: float = float("-inf")

    def __call__(self, after_each: Callable[[], None] = lambda: None) -> Collection | None:
        """The collection made, or ``None`` when none is due."""
        now = self.clock()
        if now - self.last < self.every_s:
            return None
        self.last = now
        return collect_all(self.storage, self.cfg, self.layout, now, after_each)
