"""The collection rule on the deployed platform, through the reconcile loop against fake-gcs-server: a pass past
the grace deletes the superseded snapshot and the compacted objects only it names and keeps all that the live
job's snapshot names; nothing is collected under ``allow`` or before the grace; one dataset whose collection
fails stops neither another dataset's collection nor the reconcile passes; at most one collection an interval."""

from __future__ import annotations

import threading

import pytest

from landfall.arrival import compaction
from landfall.core.artifacts import snapshots
from landfall.core.contracts.messages import JobInputs
from landfall.core.contracts.records import RecordFramer
from landfall.core.rules import timestamps
from landfall.core.services.storage import Storage
from landfall.reconcile import collect, loop
from landfall.submit import coalesce
from landfall.submit.backends.local import LocalBackend
from landfall.submit.config import JobConfig
from tests.landfall.arrival.compact_helpers import LAYOUT, SHAPE, add_arrival, release
from trainer.training.inputs import load_manifests

RECORD = RecordFramer(SHAPE).record_bytes


class Passes(threading.Event):
    """A stop event that is set once the loop has begun ``n`` passes: the loop runs in the test's thread."""

    def __init__(self, n: int):
        super().__init__()
        self.left = n

    def is_set(self) -> bool:
        self.left -= 1
        return self.left < 0


def named(storage: Storage, uri: str) -> set[str]:
    snap = snapshots.read(storage, uri)
    return {*snap.parts, *(s.uri for s in snapshots.read_shards(storage, snap))}


def two_compactions(storage: Storage, bucket: str, dataset: str) -> dict:
    """Two compactions of eight small arrivals, a job released on each snapshot (the head reads the newer)."""
    jobs = []
    for round_ in range(2):
        for k in range(round_ * 4, round_ * 4 + 4):
            add_arrival(storage, bucket, dataset, k, 8)
        assert compaction.compact(storage, bucket, dataset, 20 * RECORD).snapshot
        jobs.append(release(storage, bucket, dataset, round_ + 1))
    old, new = snapshots.listed(storage, bucket, LAYOUT, dataset)
    assert JobInputs.from_json(storage.read_bytes(jobs[1])).snapshot == new
    superseded_at = timestamps.epoch(snapshots.read(storage, new).created_at)
    return {"old": old, "new": new, "old_named": named(storage, old), "new_named": named(storage, new),
            "head": jobs[1], "past_grace": superseded_at + snapshots.GRACE_S + 1, "superseded_at": superseded_at}


def everything(storage: Storage, bucket: str, dataset: str) -> set[str]:
    return {*storage.list(f"gs://{bucket}/snapshots/{dataset}/"), *storage.list(f"gs://{bucket}/compacted/{dataset}/")}


def config(emulator_stack, bucket: str, **kw) -> JobConfig:
    return JobConfig.load({}, bucket=bucket, project=emulator_stack.project, gpus_per_worker=0, **kw)


@pytest.fixture
def fast_loop(monkeypatch):
    monkeypatch.setattr(loop, "MIN_POLL_S", 0.01)


def test_a_loop_pass_past_the_grace_collects_what_only_the_old_snapshot_names(emulator_stack, bucket, tmp_path,
                                                                               fast_loop):
    storage = emulator_stack.storage
    ds = two_compactions(storage, bucket, "ds")
    only_old = ds["old_named"] - ds["new_named"]
    assert only_old, "the second compaction rewrote some of the first one's small shards"
    cfg, backend = config(emulator_stack, bucket), LocalBackend(tmp_path / "state")
    before = everything(storage, bucket, "ds")

    loop.run(cfg, storage, backend, Passes(1), 0.01, clock=lambda: ds["superseded_at"] + 60)
    assert everything(storage, bucket, "ds") == before  # within the grace: a release may have just read it

    loop.run(cfg, storage, backend, Passes(1), 0.01, clock=lambda: ds["past_grace"])
    left = everything(storage, bucket, "ds")
    assert left == before - {ds["old"], *only_old}
    assert ds["new_named"] | {ds["new"]} <= left  # all the live snapshot names stays
    inputs = load_manifests(storage, [ds["head"]], SHAPE)  # and the head job still reads all its records
    assert sum(piece.count for piece in inputs.shards) == 8 * 8
    assert all(storage.exists(piece.uri) for piece in inputs.shards)


def test_nothing_is_collected_under_allow(emulator_stack, bucket, tmp_path, fast_loop):
    """Under ``allow`` any number of jobs may be unfinished and nothing records which snapshot each reads."""
    storage = emulator_stack.storage
    ds = two_compactions(storage, bucket, "ds")
    before = everything(storage, bucket, "ds")
    cfg = config(emulator_stack, bucket, concurrency="allow")
    loop.run(cfg, storage, LocalBackend(tmp_path / "state"), Passes(2), 0.01, clock=lambda: ds["past_grace"] + 1e6)
    assert everything(storage, bucket, "ds") == before
    assert collect.collect_all(storage, cfg, LAYOUT, ds["past_grace"] + 1e6) == collect.Collection({}, {})


class Counting:
    """The storage wrapper, counting delimiter listings (one per collection)."""

    def __init__(self, storage: Storage):
        self.storage, self.listings = storage, 0

    def list_prefixes(self, prefix: str) -> list[str]:
        self.listings += 1
        return self.storage.list_prefixes(prefix)

    def __getattr__(self, name):
        return getattr(self.storage, name)


def test_a_failing_dataset_stops_neither_another_nor_the_passes(emulator_stack, bucket, tmp_path, fast_loop,
                                                                monkeypatch, json_logs):
    """Dataset ``a-bad`` (collected first) has snapshots that do not parse; ``b-good`` is collected all the same,
    every reconcile pass runs and succeeds, and the failure is tried again an interval later, not every pass."""
    storage = Counting(emulator_stack.storage)
    for seq in (1, 2):
        storage.write_bytes(snapshots.snapshot_uri(bucket, LAYOUT, "a-bad", seq), b"{not json")
    ds = two_compactions(storage, bucket, "b-good")
    passes, real = [], coalesce.reconcile

    def reconcile(*args, **kwargs):
        passes.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(coalesce, "reconcile", reconcile)
    times = iter([ds["past_grace"], ds["past_grace"] + 10, ds["past_grace"] + collect.COLLECT_EVERY_S + 10])
    heartbeat = tmp_path / "alive"
    assert loop.run(config(emulator_stack, bucket), storage, LocalBackend(tmp_path / "state"), Passes(3), 0.01,
                    heartbeat, clock=lambda: next(times)) == 0
    assert len(passes) == 3
    assert storage.listings == 2  # passes 1 and 3: the second came 10 s after the first collection
    assert not storage.exists(ds["old"]) and storage.exists(ds["new"])
    assert len(storage.list(f"gs://{bucket}/snapshots/a-bad/")) == 2  # nothing of it was touched
    lines = json_logs()
    failures = [e for e in lines if e["severity"] == "ERROR"]
    assert [(e["dataset"], e["message"].split(":")[0]) for e in failures] == [
        ("a-bad", "collection of a-bad failed (tried again in 3600 s)")] * 2
    assert all("Traceback" in e["exception"] for e in failures)
    (beat,) = [e for e in lines if e["message"] == "reconciler heartbeat"]
    assert (beat["passes"], beat["failed"], beat["last_pass_ok"]) == (1, 0, True)
    assert loop.heartbeat_age(heartbeat) < 5


def test_a_failed_dataset_listing_is_logged_and_the_loop_goes_on(emulator_stack, bucket, tmp_path, fast_loop,
                                                                 monkeypatch, json_logs):
    storage = emulator_stack.storage
    passes = []
    monkeypatch.setattr(coalesce, "reconcile", lambda *a, **k: passes.append(1) or [])

    def broken(*_args):
        raise RuntimeError("a bug listing the datasets")

    monkeypatch.setattr(collect, "datasets_with_snapshots", broken)
    loop.run(config(emulator_stack, bucket), storage, LocalBackend(tmp_path / "state"), Passes(2), 0.01)
    assert len(passes) == 2
    (error,) = [e for e in json_logs() if e["severity"] == "ERROR"]
    assert error["message"] == ("collection failed (tried again in an interval): "
                                "RuntimeError: a bug listing the datasets")
