"""The per-worker plan balances the data whatever the shards and arrivals (pure: no TensorFlow, no storage).

Each case is a list of arrivals (instance counts); an arrival becomes one shard, or shards of at most
``SHARD_RECORDS`` records, as the converter cuts large arrivals. For 2 and 3 workers the plan must give
every worker the same number of training (and validation) instances to within one record, make an
epoch cover all training instances but the remainder of one global batch, keep training and validation
disjoint, cover every record exactly once across workers, and be deterministic.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from landfall.core.errors import Invalid
from trainer.training.inputs import Inputs, Plan, ShardRef, is_validation, plan_inputs, steps_summary

SHAPE = (36, 10)
SHARD_RECORDS = 4096
VALIDATION_FRACTION = 0.1
SEED = 5


def _random_arrivals() -> list[int]:
    rng = np.random.default_rng(37)
    return [int(n) for n in np.exp(rng.uniform(0, np.log(20_000), size=37)).round().clip(1)]


ARRIVALS = {
    "20000+100": [20_000, 100],
    "1+5000": [1, 5_000],
    "37-random": _random_arrivals(),
}


def make_inputs(arrivals: list[int], split_large: bool) -> Inputs:
    shards = []
    for a, count in enumerate(arrivals):
        cuts = range(0, count, SHARD_RECORDS) if split_large else [0]
        parts = [min(count, c + SHARD_RECORDS) - c if split_large else count for c in cuts]
        for i, n in enumerate(parts):
            manifest = f"gs://b/tfrecords/demo/arrival-{a:02d}/manifest.json"
            uri = f"gs://b/tfrecords/demo/arrival-{a:02d}/part-{i:05d}-of-{len(parts):05d}.tfrecord"
            shards.append(ShardRef(uri, n, n * 1500, "", manifest))
    return Inputs((), (), tuple(shards), SHAPE)


def plans_for(inputs: Inputs, workers: int, batch: int) -> list[Plan]:
    return [plan_inputs(inputs, workers, w, batch_size=batch, validation_fraction=VALIDATION_FRACTION, seed=SEED)
            for w in range(workers)]


def records_of(plan: Plan, validation: bool) -> set[tuple[int, int]]:
    """(shard, index) of every record the worker reads: its slices, filtered by the hold-out hash."""
    out: set[tuple[int, int]] = set()
    for s in plan.val_slices if validation else plan.train_slices:
        index = np.arange(s.start, s.stop, dtype=np.int64)
        held = is_validation(index, plan.salts[s.shard], plan.threshold)
        out.update((s.shard, int(i)) for i in index[held == validation])
    return out


def check(inputs: Inputs, workers: int, batch: int) -> dict:
    plans = plans_for(inputs, workers, batch)
    first = plans[0]
    shared = ("train_counts", "val_counts", "steps_per_epoch", "val_steps", "val_batch_size", "train_ranges",
              "val_ranges", "offsets", "salts", "threshold")
    for p in plans:  # every worker computes the same plan for everyone
        assert {f: getattr(p, f) for f in shared} == {f: getattr(first, f) for f in shared}

    # Balanced to within one record, training and validation alike.
    assert max(first.train_counts) - min(first.train_counts) <= 1, first.train_counts
    assert max(first.val_counts) - min(first.val_counts) <= 1, first.val_counts

    # Every record exactly once: training or validation, on exactly one worker.
    total = inputs.count
    train_sets = [records_of(p, validation=False) for p in plans]
    val_sets = [records_of(p, validation=True) for p in plans]
    for p, tr, va in zip(plans, train_sets, val_sets, strict=True):
        assert (len(tr), len(va)) == (p.train_counts[p.worker_index], p.val_counts[p.worker_index])
        assert set(p.mine) == {s for s, _ in tr | va}  # stages exactly the shards it reads
    everything = set().union(*train_sets, *val_sets)
    assert sum(map(len, train_sets)) + sum(map(len, val_sets)) == len(everything) == total
    expected_val = sum(int(is_validation(np.arange(s.count), salt, first.threshold).sum())
                       for s, salt in zip(inputs.shards, first.salts, strict=True))
    assert sum(map(len, val_sets)) == expected_val  # the hold-out is the hash's, not the plan's choice
    train_total = total - expected_val
    assert sum(first.train_counts) == train_total

    # Only the shards a worker's ranges touch: each boundary between workers splits at most one shard
    # for training and one for validation.
    assert sum(len(p.mine) for p in plans) <= len(inputs.shards) + 2 * (workers - 1)

    # An epoch covers all training instances but less than one global batch, the same steps everywhere.
    examples = first.steps_per_epoch * batch * workers
    assert examples <= train_total
    assert examples > train_total - batch * workers
    assert examples >= 0.99 * (train_total - batch * workers)
    assert all(p.steps_per_epoch * p.batch_size <= p.train_counts[p.worker_index] for p in plans)
    assert first.val_steps * first.val_batch_size <= min(first.val_counts)

    # Deterministic: planned again, the same plan; the hold-out does not depend on the number of workers.
    assert plans_for(inputs, workers, batch) == plans
    other = plans_for(inputs, workers + 1, batch)
    assert set().union(*(records_of(p, validation=True) for p in other)) == set().union(*val_sets)
    return {"examples": examples, "train": train_total, "summary": steps_summary(first)}


@pytest.mark.parametrize("split_large", [False, True], ids=["shard-per-arrival", "4096-record-shards"])
@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("name", list(ARRIVALS))
def test_every_worker_gets_the_same_share(name, workers, split_large):
    inputs = make_inputs(ARRIVALS[name], split_large)
    for batch in (32, 128):
        got = check(inputs, workers, batch)
        assert got["examples"] / got["train"] > 0.9


def test_uneven_arrivals_no_longer_starve_a_worker():
    # Two arrivals of 20,000 and 100 instances, one shard each, two workers: by file, worker 1 had only
    # the 100-instance shard (90 training instances, under one batch of 128) and the job failed.
    inputs = make_inputs([20_000, 100], split_large=False)
    plans = plans_for(inputs, 2, 128)
    assert abs(plans[0].train_counts[0] - plans[0].train_counts[1]) <= 1
    assert min(plans[0].train_counts) > 9_000
    assert plans[0].mine == (0,) and plans[1].mine == (0, 1)  # worker 1 reads the end of the big shard too
    assert plans[1].train_slices[0].shard == 0 and plans[1].train_slices[0].start > 9_000


def test_too_little_data_counts_every_worker_share():
    inputs = make_inputs([100, 50], split_large=False)
    plan_inputs(inputs, 2, 0, batch_size=64, validation_fraction=0.1, seed=0)  # 135 training: 67 and 68
    # The smallest share decides: under a batch of 70, so both workers train on batches of it, one step an epoch.
    small = plan_inputs(inputs, 2, 0, batch_size=70, validation_fraction=0.1, seed=0)
    assert small.batch_size == min(small.train_counts) < 70 and small.steps_per_epoch == 1
    workers = sum(small.train_counts) + 1  # one worker more than training records: one of them gets none
    with pytest.raises(Invalid, match=rf"0 per worker \({workers} workers\): every worker needs one"):
        plan_inputs(inputs, workers, 0, batch_size=1, validation_fraction=0.1, seed=0)


def test_no_hold_out_and_more_workers_than_shards():
    inputs = make_inputs([1000], split_large=False)
    plans = [plan_inputs(inputs, 3, w, batch_size=10, validation_fraction=0.0, seed=0) for w in range(3)]
    assert plans[0].train_counts == (333, 333, 334) and plans[0].val_counts == (0, 0, 0)
    assert [p.val_slices for p in plans] == [(), (), ()] and plans[0].val_steps == 0
    assert [(s.start, s.stop) for p in plans for s in p.train_slices] == [(0, 333), (333, 666), (666, 1000)]
    assert dataclasses.replace(plans[2], worker_index=0) == plans[0]


def test_the_benchmark_reports_full_epochs_where_round_robin_shards_starve_a_worker():
    from landfall_bench.train import epoch_coverage

    rows = epoch_coverage(batch=128)
    assert {(r["set"], r["workers"]) for r in rows} == {(s, w) for s in ARRIVALS for w in (2, 3)}
    assert all(r["ours_vs_floor"] >= 0.99 and r["ours"] > r["usual"] for r in rows), rows
    assert [r["usual"] for r in rows if r["set"] in ("20000+100", "1+5000")] == [0.0] * 4  # no step: the job dies
