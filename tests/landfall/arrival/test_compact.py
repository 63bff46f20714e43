"""Compaction and snapshots against fake-gcs-server: a job trains on exactly the live arrivals, whatever
was compacted, retracted or arrived meanwhile; statistics and the hold-out split do not change when records
move into compacted shards; a crash leaves the previous snapshot in force; the collection rule keeps what a
live job may read."""

from __future__ import annotations

import dataclasses
import itertools
import json
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from landfall.arrival import compaction
from landfall.core.artifacts import retractions, snapshots
from landfall.core.artifacts.snapshots import Snapshot
from landfall.core.contracts.messages import JobInputs
from landfall.core.contracts.records import RecordFramer, decode_example, iter_records
from landfall.core.rules import timestamps
from landfall.core.services.storage import Storage
from tests.conftest import unique
from tests.landfall.arrival.compact_helpers import LAYOUT, SHAPE, add_arrival, arrival_of, release
from trainer.training.inputs import is_validation, load_manifests, plan_inputs, stage

RECORD = RecordFramer(SHAPE).record_bytes
SEED, FRACTION = 3, 0.25


def trained(storage: Storage, inputs_uri: str) -> dict[tuple[int, int], np.ndarray]:
    """Every record the job of ``inputs_uri`` reads, by (arrival, index) as marked in the data, from the
    files the trainer stages (one worker), with the records' values."""
    inputs = load_manifests(storage, [inputs_uri], SHAPE)
    out = {}
    for piece in inputs.shards:
        with storage.open_read(piece.uri) as fh:
            fh.seek(piece.start * RECORD)
            for i, rec in enumerate(iter_records(fh)):
                if i == piece.count:
                    break
                x = decode_example(rec, SHAPE)
                key = (int(x[0, 0]), int(x[0, 1]))
                assert key not in out, f"record {key} read twice"
                assert key[1] == piece.arrival_start + i, "a record's index in its arrival is where the plan says"
                out[key] = x
    return out


def held_out(inputs) -> set[tuple[str, int]]:
    plan = plan_inputs(inputs, 1, 0, 1, FRACTION, SEED)
    out = set()
    for piece, salt in zip(plan.shards, plan.salts, strict=True):
        mask = is_validation(np.arange(piece.count, dtype=np.int64), salt, plan.threshold)
        out |= {(piece.arrival, piece.arrival_start + int(i)) for i in np.flatnonzero(mask)}
    return out


def test_compaction_keeps_records_statistics_and_the_holdout(emulator_stack, bucket, tmp_path):
    storage = emulator_stack.storage
    sizes = [int(n) for n in np.random.default_rng(5).integers(1, 60, size=40)]
    for k, n in enumerate(sizes):
        add_arrival(storage, bucket, "ds", k, n, per_shard=25)
    add_arrival(storage, bucket, "ds", 99, 400, per_shard=150)  # large: named in place, never copied
    before_uri = release(storage, bucket, "ds", 1)
    before = load_manifests(storage, [before_uri], SHAPE)
    files_before = len({s.uri for s in before.shards})

    target = 200 * RECORD  # arrivals of under 100 records are copied, larger ones named in place
    result = compaction.compact(storage, bucket, "ds", target)
    assert result.snapshot and result.arrivals == 41
    after_uri = release(storage, bucket, "ds", 2)
    doc = JobInputs.from_json(storage.read_bytes(after_uri))
    assert doc.schema == "landfall.inputs/v2" and doc.snapshot == result.snapshot and doc.manifests == []
    after = load_manifests(storage, [after_uri], SHAPE)

    # The same records, bit for bit, from fewer files: about total bytes / target, plus the large arrival's.
    a, b = trained(storage, before_uri), trained(storage, after_uri)
    assert a.keys() == b.keys() and len(a) == sum(sizes) + 400
    assert all(np.array_equal(a[k], b[k]) for k in a)
    files_after = len({s.uri for s in after.shards})
    assert files_before == sum((n + 24) // 25 for n in sizes) + 3
    assert files_after <= -(-sum(sizes) * RECORD // target) + 1 + 3
    # Statistics: the Chan merge of the compacted shards equals the per-arrival merge.
    for x, y in zip(before.feature_stats(), after.feature_stats(), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-12)
    # The hold-out is a function of (arrival, index): the same records are held out before and after.
    assert held_out(before) == held_out(after) and held_out(before)
    # And the TensorFlow pipeline reads exactly those from the staged compacted files.
    from trainer.training import pipeline

    plan = plan_inputs(after, 1, 0, 1, FRACTION, SEED)
    paths = [str(p) for p in stage(storage, plan, tmp_path / "staged")]
    assert len(set(paths)) == files_after
    # Each file is opened once a pass, however many arrivals it holds.
    assert len(pipeline.file_slices(plan, paths, pipeline.TRAIN)) == files_after
    val = np.concatenate(list(pipeline.read_instances(plan, paths, SHAPE, pipeline.VALIDATION).as_numpy_iterator()))
    marks = {(int(x[0, 0]), int(x[0, 1])) for x in val}
    by_aid = {arrival_of(bucket, "ds", k).arrival_id: k for k in [*range(40), 99]}
    assert marks == {(by_aid[aid], i) for aid, i in held_out(after)}


def test_a_retraction_is_skipped_at_once_then_rewritten_out(emulator_stack, bucket):
    storage = emulator_stack.storage
    for k in range(6):
        add_arrival(storage, bucket, "ds", k, 10)
    compaction.compact(storage, bucket, "ds", 1 << 20)
    retractions.retract(storage, LAYOUT, arrival_of(bucket, "ds", 2), "deleted")
    uri = release(storage, bucket, "ds", 1)
    doc = JobInputs.from_json(storage.read_bytes(uri))
    assert doc.skip == [arrival_of(bucket, "ds", 2).arrival_id]
    assert {k for k, _ in trained(storage, uri)} == {0, 1, 3, 4, 5}
    # The statistics leave it out too: equal to a job over the five live manifests.
    live = load_manifests(storage, [f"gs://{bucket}/tfrecords/ds/"], SHAPE)
    for x, y in zip(live.feature_stats(), load_manifests(storage, [uri], SHAPE).feature_stats(), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-9)
    result = compaction.compact(storage, bucket, "ds", 1 << 20)
    assert result.snapshot and result.dropped == 1
    uri = release(storage, bucket, "ds", 2)
    assert JobInputs.from_json(storage.read_bytes(uri)).skip == []
    assert {k for k, _ in trained(storage, uri)} == {0, 1, 3, 4, 5}


def test_a_crash_before_the_snapshot_leaves_the_previous_in_force(emulator_stack, bucket, monkeypatch):
    storage = emulator_stack.storage
    for k in range(3):
        add_arrival(storage, bucket, "ds", k, 5)
    first = compaction.compact(storage, bucket, "ds", 1 << 20).snapshot
    add_arrival(storage, bucket, "ds", 3, 5)
    real = Storage.create

    def crash(self, uri, data, **kw):
        if "/snapshots/" in uri:
            raise RuntimeError("killed before the snapshot")
        return real(self, uri, data, **kw)

    monkeypatch.setattr(Storage, "create", crash)
    with pytest.raises(RuntimeError):
        compaction.compact(storage, bucket, "ds", 1 << 20)
    monkeypatch.undo()
    assert snapshots.latest(storage, bucket, LAYOUT, "ds")[0] == first
    uri = release(storage, bucket, "ds", 1)
    assert {k for k, _ in trained(storage, uri)} == {0, 1, 2, 3}


def _snap(seq: int, created_at: str) -> Snapshot:
    return Snapshot(dataset="d", seq=seq, fence=seq, shape=[4, 3], arrivals_prefix="", parts=[], count=0,
                    arrivals=0, shards=0, created_at=created_at)


def test_the_collection_rule():
    """Delete a snapshot only once a newer one exists, no unfinished job names it or an older one, and it
    was superseded at least the grace period ago."""
    t = "2026-01-01T00:00:00.000Z"
    later = "2026-01-01T02:00:00.000Z"
    now = timestamps.epoch(later) + 10
    snaps = [_snap(1, t), _snap(2, t), _snap(3, later)]
    assert [s.seq for s in snapshots.collectable(snaps, set(), now)] == [1]  # 2 was superseded 10 s ago
    assert [s.seq for s in snapshots.collectable(snaps, set(), now + 3600)] == [1, 2]
    assert [s.seq for s in snapshots.collectable(snaps, {2}, now + 3600)] == [1]  # a live job reads 2
    assert snapshots.collectable(snaps, {1}, now + 3600) == []
    assert snapshots.collectable(snaps[-1:], set(), now + 3600) == []  # the newest always stays


def test_collect_deletes_only_what_no_kept_snapshot_names(emulator_stack, bucket):
    storage = emulator_stack.storage
    jobs = []
    for round_ in range(3):
        for k in range(round_ * 4, round_ * 4 + 4):
            add_arrival(storage, bucket, "ds", k, 8)
        assert compaction.compact(storage, bucket, "ds", 20 * RECORD).snapshot
        jobs.append(release(storage, bucket, "ds", round_ + 1))
    reading = JobInputs.from_json(storage.read_bytes(jobs[1])).snapshot  # job 2 is still running
    far = timestamps.epoch(snapshots.read(storage, snapshots.listed(storage, bucket, LAYOUT, "ds")[-1]).created_at)
    # What a compactor that lost the race for snapshot 3 left, and one still running for snapshot 4.
    lost = f"gs://{bucket}/compacted/ds/00000003-deadbeef/part-00000.tfrecord"
    running = f"gs://{bucket}/compacted/ds/00000004-feedface/part-00000.tfrecord"
    for uri in (lost, running):
        storage.write_bytes(uri, b"x")
    assert compaction.collect(storage, bucket, "ds", {1}, now=far + 7200) == [lost]  # a live job reads snapshot 1
    deleted = compaction.collect(storage, bucket, "ds", {snapshots.seq_of(reading)}, now=far + 7200)
    assert deleted and all("00000001" in u for u in deleted)
    assert storage.exists(running)
    assert [snapshots.seq_of(u) for u in snapshots.listed(storage, bucket, LAYOUT, "ds")] == [2, 3]
    for job in jobs[1:]:  # every object a kept snapshot names is still there: its jobs still read all
        assert len(trained(storage, job)) == len({(k, i) for k in range(len(jobs) * 4) for i in range(8)
                                                  if k < (jobs.index(job) + 1) * 4})


# -- interleavings ------------------------------------------------------------------------------------

OPS = st.lists(st.one_of(
    st.tuples(st.just("arrive"), st.integers(1, 12)),
    st.tuples(st.just("retract"), st.integers(0, 20)),
    st.tuples(st.just("compact"), st.integers(1, 3)),  # target in arrivals' worth of bytes
    st.tuples(st.just("compact-racing"), st.integers(0, 1)),  # an arrival (0) or retraction (1) mid-compaction
    st.just(("release", 0)),
    st.just(("collect", 0)),  # the reconciler's collection, past the grace: only the head job is live
), min_size=3, max_size=10)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
@example(ops=[("arrive", 3), ("arrive", 4), ("compact", 2), ("retract", 0), ("release", 0), ("compact", 1)])
@example(ops=[("arrive", 3), ("compact-racing", 0), ("release", 0), ("compact-racing", 1), ("arrive", 2)])
@example(ops=[("arrive", 3), ("compact", 1), ("release", 0), ("arrive", 2), ("retract", 0), ("compact", 1),
              ("collect", 0), ("release", 0), ("compact", 3), ("collect", 0), ("arrive", 2)])
def test_any_interleaving_trains_on_exactly_the_live_arrivals(emulator_stack, bucket, ops):
    """Arrivals, retractions, compactions (some with an arrival or retraction landing between the fence and
    the listing), releases and collections in any order: every released job reads each live arrival's records
    exactly once and no retracted one, and its statistics are those of the live arrivals; after a collection
    the head job still reads all it read when it was released."""
    from landfall.reconcile import collect
    from landfall.submit.config import JobConfig

    storage = emulator_stack.storage
    ds = unique("ds")
    sizes: dict[int, int] = {}
    live: set[int] = set()
    seq = 0
    head: tuple[str, set] | None = None
    cfg = JobConfig(bucket=bucket, project=emulator_stack.project)
    counter = itertools.count()

    def arrive(n: int) -> None:
        k = next(counter)
        add_arrival(storage, bucket, ds, k, n, per_shard=5)
        sizes[k] = n
        live.add(k)

    def retract(pick: int) -> None:
        if live:
            k = sorted(live)[pick % len(live)]
            retractions.retract(storage, LAYOUT, arrival_of(bucket, ds, k), "deleted")
            live.discard(k)

    for op, arg in [*ops, ("release", 0)]:
        if op == "arrive":
            arrive(arg)
        elif op == "retract":
            retract(arg)
        elif op == "compact":
            compaction.compact(storage, bucket, ds, arg * 6 * RECORD)
        elif op == "compact-racing":
            real = retractions.list_dataset

            def racing(*a, real=real, arg=arg, **kw):
                arrive(3) if arg == 0 else retract(0)
                return real(*a, **kw)

            try:
                compaction.retractions.list_dataset = racing  # the compactor's listing, after its fence
                compaction.compact(storage, bucket, ds, 12 * RECORD)
            finally:
                compaction.retractions.list_dataset = real
        elif op == "release" and live:
            seq += 1
            uri = release(storage, bucket, ds, seq)
            got = trained(storage, uri)
            assert got.keys() == {(k, i) for k in live for i in range(sizes[k])}, json.loads(
                storage.read_bytes(uri))
            head = uri, set(got)
            expect = load_manifests(storage, [f"gs://{bucket}/tfrecords/{ds}/"], SHAPE).feature_stats()
            for x, y in zip(expect, load_manifests(storage, [uri], SHAPE).feature_stats(), strict=True):
                np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-12)
        elif op == "collect":
            done = collect.collect_all(storage, cfg, LAYOUT, time.time() + 2 * snapshots.GRACE_S)
            assert ds not in done.failed, done.failed
            if head is not None:
                assert set(trained(storage, head[0])) == head[1]


def test_inputs_v1_stay_readable_without_a_snapshot(emulator_stack, bucket):
    storage = emulator_stack.storage
    add_arrival(storage, bucket, "ds", 0, 5)
    doc = JobInputs.from_json(storage.read_bytes(release(storage, bucket, "ds", 1)))
    assert doc.schema == "landfall.inputs/v1" and doc.snapshot is None and len(doc.manifests) == 1
    assert dataclasses.replace(doc).to_json() == doc.to_json()


def test_landfall_compact_runs_past_its_thresholds_only(emulator_stack, bucket, capsys, monkeypatch):
    from landfall.cli import main

    storage = emulator_stack.storage
    for k in range(4):
        add_arrival(storage, bucket, "ds", k, 6)
    assert compaction.pending_work(storage, bucket, "ds") == (4, 4 * 6 * RECORD)
    monkeypatch.setattr(compaction, "COMPACT_ARRIVALS", 5)
    assert main(["compact", "--bucket", bucket, "--dataset", "ds", "--if-needed"]) == 0
    assert json.loads(capsys.readouterr().out)["snapshot"] is None
    add_arrival(storage, bucket, "ds", 4, 6)
    assert main(["compact", "--bucket", bucket, "--dataset", "ds", "--if-needed", "--target-bytes", "4096"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["snapshot"] and done["arrivals"] == 5
    assert compaction.pending_work(storage, bucket, "ds") == (0, 0)


def test_arrivals_start_compaction_on_the_convert_job(emulator_stack, bucket, arrival_runtime, tmp_path,
                                                      monkeypatch):
    """One arrival in ``compact_every`` (by request id) starts a convert-job execution that compacts, once its
    manifest is committed (``handler.after_conversion``, whoever converted)."""
    from landfall.arrival import handler, task
    from landfall.arrival.cloudrun import LocalJobs
    from landfall.core.contracts.layout import request_id
    from landfall.core.contracts.messages import Manifest

    storage = emulator_stack.storage
    parity = [int(request_id(bucket, a.name, a.generation), 16) % 2 for a in (arrival_of(bucket, "ds", k)
                                                                             for k in range(64))]
    odd, even = parity.index(1), parity.index(0)  # arrivals whose request id is odd, and even
    other = min({0, 1, 2} - {odd, even})
    manifests = {k: add_arrival(storage, bucket, "ds", k, 6) for k in (odd, even, other)}
    jobs = LocalJobs(tmp_path)
    # The arrivals were written straight into the bucket, with no object under incoming/: kept, not retracted for it.
    rt = dataclasses.replace(arrival_runtime(compact_every=2, on_delete="keep"), jobs=jobs)

    def committed(k: int) -> str:
        uri = manifests[k]
        return handler.after_conversion(Manifest.from_json(storage.read_bytes(uri), uri), rt)

    assert committed(odd) == "converted"  # its request id % 2 == 1: not this one
    assert not jobs.dir.exists()
    assert committed(even) == "converted"  # % 2 == 0
    (record,) = [json.loads(p.read_text()) for p in jobs.dir.glob("*.json")]
    assert record["task_count"] == 1 and record["env"]["LANDFALL_COMPACT_DATASET"] == "ds"
    monkeypatch.setattr(compaction, "COMPACT_ARRIVALS", 3)
    assert task.main({**record["env"], "LANDFALL_PROJECT": emulator_stack.project}) == 0
    assert snapshots.latest(storage, bucket, LAYOUT, "ds") is not None
