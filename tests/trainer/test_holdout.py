"""The hold-out split (``landfall.core.rules.holdout``): ``segment`` and ``blocks`` leave no training window
overlapping a
held-out one, ``segment`` gives every arrival long enough a hold-out at the cost of one window, and the numpy plan and
the TensorFlow pipeline (``trainer.training.pipeline``) select exactly the same records."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from landfall.core.errors import Invalid
from landfall.core.rules import holdout, series_windows
from landfall.core.services.storage import Storage
from tests.trainer.helpers import make_array, write_dataset
from trainer.config import TrainerConfig
from trainer.training.inputs import load_manifests, plan_inputs, stage


def test_the_trainer_defaults_are_the_holdout_defaults_the_submit_stage_counts_with():
    cfg = TrainerConfig()
    assert (cfg.seed, cfg.validation_fraction, cfg.holdout) == (holdout.SEED, holdout.VALIDATION_FRACTION,
                                                               holdout.MODE)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31), arrival=st.text("abcdef0123456789", min_size=1, max_size=12),
       timesteps=st.integers(1, 40), fraction=st.floats(0.05, 0.6), count=st.integers(1, 4000))
def test_blocks_leave_no_training_record_within_a_window_of_a_held_out_one(seed, arrival, timesteps, fraction, count):
    split = holdout.Split(seed, fraction, holdout.BLOCKS, timesteps)
    train, val = split.sides(arrival, np.arange(count))
    assert not (train & val).any()
    held, trained = np.flatnonzero(val), np.flatnonzero(train)
    if len(held) and len(trained):
        # The nearest held-out record of every training record is more than a window away: stride-1 windows of
        # ``timesteps`` steps starting there share no step.
        pos = np.searchsorted(held, trained)
        left = np.abs(trained - held[np.clip(pos - 1, 0, len(held) - 1)])
        right = np.abs(held[np.clip(pos, 0, len(held) - 1)] - trained)
        assert np.minimum(left, right).min() > timesteps
    # Held-out records come in whole blocks; a record's side never depends on the records after it.
    blocks = np.unique(held // split.block)
    assert all(val[b * split.block:min(count, (b + 1) * split.block)].all() for b in blocks)
    assert split.training_count(arrival, count, limit=count // 2) == int(train[:count // 2].sum())


def test_blocks_hold_out_about_the_fraction_and_lose_at_most_a_window_each_side():
    split = holdout.Split(42, 0.1, holdout.BLOCKS, 36)
    train, val = split.sides("arrival-x", np.arange(200_000))
    assert 0.08 < val.mean() < 0.12
    gap = ~(train | val)
    assert gap.sum() <= 2 * 36 * len(np.unique(np.flatnonzero(val) // split.block)) + 36
    random_train, random_val = holdout.Split(42, 0.1).sides("arrival-x", np.arange(200_000))
    assert (random_train ^ random_val).all()  # random: every record on exactly one side


def _nearest(trained: np.ndarray, held: np.ndarray) -> int:
    pos = np.searchsorted(held, trained)
    left = np.abs(trained - held[np.clip(pos - 1, 0, len(held) - 1)])
    right = np.abs(held[np.clip(pos, 0, len(held) - 1)] - trained)
    return int(np.minimum(left, right).min())


@settings(max_examples=120, deadline=None)
@given(seed=st.integers(0, 2**31), arrival=st.text("abcdef0123456789", min_size=1, max_size=12),
       timesteps=st.integers(1, 128), fraction=st.floats(0.01, 0.6), count=st.integers(1, 20_000))
def test_segment_holds_out_every_long_enough_arrival_and_loses_one_window(seed, arrival, timesteps, fraction, count):
    split = holdout.Split(seed, fraction, holdout.SEGMENT, timesteps)
    train, val = split.sides(arrival, np.arange(count), count)
    assert not (train & val).any()
    held, trained = np.flatnonzero(val), np.flatnonzero(train)
    if len(held) and len(trained):
        # Stride-1 windows of ``timesteps`` steps: training window j covers [j, j + T), so more than T apart means no
        # shared step with any held-out window.
        assert _nearest(trained, held) > timesteps
    want = max(1, round(fraction * count))
    if count - want >= holdout.SEGMENT_ROOM * timesteps:  # room: a hold-out, always, of the fraction, one window lost
        assert len(held) == want and held[-1] - held[0] == want - 1  # one contiguous run
        assert held[0] == 0 or held[-1] == count - 1  # at the head or the tail
        assert (~(train | val)).sum() == timesteps
    else:  # short: whole on one side, nothing lost
        assert val.all() or train.all()
    # The counts are exact for any prefix, and the ranges are those the TensorFlow pipeline gets.
    limit = count // 2
    assert split.counts(arrival, count, limit) == (int(train[:limit].sum()), int(val[:limit].sum()))
    lo, hi, _, _ = split.ranges(arrival, count)
    assert (val == ((np.arange(count) >= lo) & (np.arange(count) < hi))).all()


def test_segment_is_stable_per_arrival_and_holds_out_the_fraction_over_many_short_arrivals():
    split = holdout.Split(42, 0.1, holdout.SEGMENT, 64)
    # Stable: a record's side depends on its arrival alone, never on which other arrivals a job reads.
    a = split.sides("arr-1", np.arange(1137), 1137)
    assert all((split.sides("arr-1", np.arange(1137), 1137)[k] == a[k]).all() for k in range(2))
    # 10,000 short arrivals (50 windows of 64): each whole on one side, about the fraction held out, nothing lost.
    held = [split.counts(f"short-{k}", 50)[1] for k in range(10_000)]
    assert 0.09 < np.mean([h > 0 for h in held]) < 0.11
    assert all(split.counts(f"short-{k}", 50)[0] + held[k] == 50 for k in range(100))
    # A 1,137-window series (the case): held out on every one of 2,000 arrival ids.
    assert all(split.counts(f"id-{k}", 1137)[1] == 114 for k in range(2000))


@pytest.mark.parametrize("mode", [holdout.RANDOM, holdout.BLOCKS, holdout.SEGMENT])
def test_the_tf_pipeline_reads_exactly_the_records_the_plan_counts(tmp_path, mode):
    from trainer.training import pipeline

    storage = Storage()
    shape = (6, 2)
    sizes = [7, 130, 41, 300, 5]
    uris = []
    for k, n in enumerate(sizes):
        array = make_array(n, seed=k, shape=shape)
        array[:, 0, 0] = np.arange(n, dtype=np.float32)  # each record carries its index in its arrival
        array[:, 0, 1] = k
        uris.append(write_dataset(storage, str(tmp_path / f"a{k}"), array, shards=1 + k % 3, arrival_id=f"arr-{k}"))
    inputs = load_manifests(storage, uris, shape)
    split = holdout.Split(3, 0.2, mode, shape[0])
    expected = {}
    for k, n in enumerate(sizes):
        train, val = split.sides(f"arr-{k}", np.arange(n), n)
        expected[pipeline.TRAIN, k] = set(np.flatnonzero(train).tolist())
        expected[pipeline.VALIDATION, k] = set(np.flatnonzero(val).tolist())
    assert split.training_records([(f"arr-{k}", n) for k, n in enumerate(sizes)]) == sum(
        len(expected[pipeline.TRAIN, k]) for k in range(len(sizes)))
    for workers in (1, 2):
        seen: dict[tuple[str, int], set[int]] = {key: set() for key in expected}
        for w in range(workers):
            plan = plan_inputs(inputs, workers, w, batch_size=4, validation_fraction=0.2, seed=3, holdout_mode=mode)
            assert sum(plan.train_counts) == split.training_records([(f"arr-{k}", n) for k, n in enumerate(sizes)])
            paths = [str(p) for p in stage(storage, plan, tmp_path / f"stage-{mode}-{workers}-{w}")]
            for which in (pipeline.TRAIN, pipeline.VALIDATION):
                got = np.concatenate([b.numpy() for b in pipeline.read_instances(plan, paths, shape, which,
                                                                             deterministic=True)])
                counts = plan.train_counts if which == pipeline.TRAIN else plan.val_counts
                assert len(got) == counts[w]
                for index, k in zip(got[:, 0, 0].astype(int), got[:, 0, 1].astype(int), strict=True):
                    seen[which, k].add(int(index))
        assert seen == expected


@pytest.mark.parametrize("length", [8, 16, 32, 64, 125, 256])
def test_no_single_arrival_is_held_when_the_trainer_could_both_train_and_hold_out(length):
    """Issue #47's table: window lengths 8 to 256, strides from 1 to the window, one arrival of 2 to 100 windows.
    Whenever a leak-free split exists at all (a held-out window and a training window sharing no row: ``n >= gap +
    2`` windows, ``gap = ceil(length / stride) - 1``), the default gate (a record per replica) releases the job and
    the trainer's plan has both sides; when none exists, the gate says so and the trainer agrees."""
    from trainer.training.inputs import Inputs, ShardRef, plan_inputs

    for stride in sorted({1, max(1, length // 4), max(1, length // 2), length, length + 3}):
        gap = holdout.series_gap(length, stride)
        assert all((j - i) * stride >= length for i in [0] for j in [gap + 1])  # gap + 1 apart: no shared row
        assert (gap * stride < length) or gap == 0  # and no smaller gap would do
        for n in range(2, 101):
            arrival = f"a-{length}-{stride}-{n}"
            split = holdout.Split(42, 0.1, holdout.SEGMENT, length, gap)
            could = n >= gap + 2
            released, found, held = split.enough([(arrival, n)], 1, 1)
            assert released == could, (length, stride, n, found, held)
            layout = series_windows.Layout(length, stride, (series_windows.Segment(0, (n - 1) * stride + length, n,
                                                                                    0.0, 1.0),))
            shard = ShardRef(f"gs://b/{arrival}/0", n, 0, "", arrival, 0, arrival, 0, series=layout)
            try:
                plan = plan_inputs(Inputs((), (), (shard,), (length, 1)), 1, 0, 64, 0.1, 42, holdout.SEGMENT)
            except Invalid:  # held out whole: nothing to train on
                assert not could
                continue
            assert plan.split.gap == gap
            train, val = plan.split.sides(arrival, np.arange(n), n)
            assert (sum(plan.train_counts), sum(plan.val_counts)) == (train.sum(), val.sum())
            if could:
                assert train.any() and val.any()
                trained, kept = np.flatnonzero(train), np.flatnonzero(val)
                assert np.abs(trained[:, None] - kept[None, :]).min() * stride >= length  # no row in common
            else:
                assert not (train.any() and val.any())
