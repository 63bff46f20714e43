"""An arrival's profile (landfall.core.quality.profile): fixed-edge log buckets, exact merges, bounded samples and
size."""

from __future__ import annotations

import json

import numpy as np
import pytest

from landfall.arrival.stats import RunningStats
from landfall.core.errors import Invalid
from landfall.core.quality import profile as prof
from landfall.core.quality.profile import Profile


def profiled(batch: np.ndarray) -> Profile:
    stats = RunningStats(batch.shape[2])
    stats.update(batch)
    out = Profile(batch.shape[2])
    out.update(batch)
    return out.finish(stats.to_dict())


def test_buckets_are_monotone_and_within_alpha_of_their_values():
    rng = np.random.default_rng(3)
    values = np.sort(np.concatenate([rng.normal(0, 1, 5000), rng.lognormal(0, 8, 5000), -rng.lognormal(0, 8, 5000),
                                     [0.0, 1e-15, -1e-15, 3.0e38, -3.0e38]])).astype(np.float32)
    index = prof.bucket(values)
    assert (np.diff(index) >= 0).all()  # monotone in the value: quantiles come from cumulative counts
    big = np.abs(values) >= prof.MIN_ABS
    error = np.abs(prof.bucket_value(index[big]) - values[big]) / np.abs(values[big])
    assert error.max() <= prof.ALPHA + 1e-6
    assert (index[~big] == 0).all()


def sampled(n: int) -> list[int]:
    """The instances of an arrival of ``n`` the profile samples: the first HEAD_INSTANCES, then one in SAMPLE_EVERY."""
    return [*range(min(n, prof.HEAD_INSTANCES)), *range(prof.HEAD_INSTANCES, n, prof.SAMPLE_EVERY)]


def test_quantiles_read_back_within_alpha():
    rng = np.random.default_rng(4)
    batch = rng.normal(50, 10, (3000, 20, 3)).astype(np.float32)
    batch[..., 2] = -np.abs(batch[..., 2]) * 100
    p = profiled(batch)
    for f in range(3):
        sample = batch[sampled(3000), :, f].ravel()
        for q in (0.05, 0.5, 0.95):
            true = np.quantile(sample, q)
            assert abs(p.quantile(f, q) - true) <= prof.ALPHA * abs(true) + 1e-6


def test_merging_parts_equals_profiling_the_whole():
    rng = np.random.default_rng(5)
    batch = rng.normal(0, 3, (prof.HEAD_INSTANCES, 16, 4)).astype(np.float32)  # whole arrivals: all sampled
    batch[:, 5:9, 1] = 7.0  # repeats
    whole = profiled(batch)
    parts = [profiled(batch[:20]), profiled(batch[20:41]), profiled(batch[41:])]
    merged = Profile(4)
    for p in reversed(parts):  # any order
        merged.merge(p)
    assert merged.codes.tolist() == whole.codes.tolist() and merged.counts.tolist() == whole.counts.tolist()
    assert merged.repeats.tolist() == whole.repeats.tolist() and merged.steps.tolist() == whole.steps.tolist()
    np.testing.assert_allclose(merged.mean(), whole.mean(), rtol=1e-9)
    np.testing.assert_allclose(merged.std(), whole.std(), rtol=1e-9)
    assert merged.arrivals == 3
    # the spreads of single arrivals, which the scale check measures against
    stds = np.array([p.std() for p in parts])
    np.testing.assert_allclose(merged.spread_low, stds.min(axis=0))
    np.testing.assert_allclose(merged.spread_high, stds.max(axis=0))


def test_the_first_instances_are_all_sampled_then_one_in_sample_every_whatever_the_chunks():
    batch = np.arange(5000, dtype=np.float32).reshape(-1, 1, 1) + 1
    expected = sampled(5000)
    for cuts in ([5000], [100, 412, 1, 2000, 2487], [37] * 135 + [5]):
        p = Profile(1)
        at = 0
        for size in cuts:
            p.update(batch[at:at + size])
            at += size
        assert p.sampled.tolist() == [len(expected)]
        assert p.values.tolist() == [5000]  # every value counted, whatever was sampled
        whole = Profile(1)
        whole._sample(batch[expected])
        assert p.codes.tolist() == whole.codes.tolist() and p.counts.tolist() == whole.counts.tolist()


def test_a_constant_channel_repeats_in_every_step_and_missing_values_are_counted():
    rows = np.random.default_rng(7).normal(size=(500, 3)).astype(np.float32)
    rows[:, 1] = 2.5
    p = Profile(3)
    p.update_rows(rows)
    dropped = np.full((40, 3), 1.0, dtype=np.float32)
    dropped[:30, 0] = np.nan
    dropped[30:, 2] = np.inf
    p.dropped(dropped)
    assert p.repeat_fraction()[1] == 1.0 and p.repeat_fraction()[0] < 0.01
    assert p.missing.tolist() == [30, 0, 0] and p.nonfinite.tolist() == [0, 0, 10]
    np.testing.assert_allclose(p.missing_fraction(), [30 / 540, 0, 10 / 540])


def test_json_round_trip_and_bounded_size():
    rng = np.random.default_rng(8)
    big = np.concatenate([rng.lognormal(0, 10, (4000, 10, 1)), -rng.lognormal(0, 10, (4000, 10, 1))], axis=2)
    p = Profile(2)
    for chunk in np.array_split(big.astype(np.float32), 20):
        p.update(chunk)
    p.finish({"n": 1, "mean": [0.0, 0.0], "m2": [0.0, 0.0], "min": [0.0, 0.0], "max": [0.0, 0.0]})
    text = p.to_json()
    back, raw = Profile.from_json(text)
    assert back.to_dict() == p.to_dict()
    assert raw["schema"] == prof.SCHEMA
    assert len(p.codes) <= 2 * prof.SPAN  # bounded by the fixed buckets, whatever the data
    assert len(text) < 60_000


def test_a_profile_of_other_buckets_is_refused_by_name():
    raw = json.loads(profiled(np.ones((2, 3, 1), dtype=np.float32)).to_json())
    raw["alpha"] = 0.01
    with pytest.raises(Invalid, match=r"ref\.json: buckets of alpha 0\.01"):
        Profile.from_json(json.dumps(raw), "ref.json")
    with pytest.raises(Invalid, match=r"ref\.json: schema is"):
        Profile.from_json(json.dumps({"schema": "x"}), "ref.json")


def test_the_structure_round_trips_and_merges_in_any_order_on_real_data():
    """#39: the time steps, the steps' dynamics, the pair co-moments and the per-arrival envelopes survive JSON and
    merge the same in any order (Daphnet S06R02E0, bench/data: 1 s arrivals with their own timestamps)."""
    from landfall_bench import realdata

    stamps, values, _ = realdata.daphnet()
    seconds = stamps.astype("datetime64[ms]").astype(np.int64) / 1000.0

    def arrival(i: int) -> Profile:
        rows, times = values[i * 64:(i + 1) * 64], seconds[i * 64:(i + 1) * 64]
        stats = RunningStats(9)
        stats.update(rows[:, None, :])
        out = Profile(9)
        out.update_rows(rows)
        out.update_steps(np.diff(times))
        return out.finish(stats.to_dict())

    profiles = [arrival(i) for i in range(12)]
    forward, backward = Profile(9), Profile(9)
    for p in profiles:
        forward.merge(Profile.from_json(p.to_json())[0])
    for p in reversed(profiles):
        backward.merge(p)
    again = Profile.from_json(forward.to_json())[0]
    for a, b in ((forward, backward), (forward, again)):
        np.testing.assert_allclose(a.correlation(), b.correlation(), atol=1e-9)  # the same sums, reordered
        np.testing.assert_array_equal(a.corr_low, b.corr_low)
        np.testing.assert_array_equal(a.relspread_high, b.relspread_high)
        np.testing.assert_allclose(a.diff2, b.diff2)
        np.testing.assert_array_equal(a.time_steps, b.time_steps)
    # the pooled correlation is that of the sampled rows (every row of these small arrivals), as numpy has it, to
    # float32 products per batch
    np.testing.assert_allclose(forward.correlation(), np.corrcoef(values[:12 * 64].T.astype(np.float64)), atol=1e-5)
    assert forward.step_quantile(0.5) == pytest.approx(1 / 64, rel=0.05)  # 64 Hz
    assert forward.pair_n == 12 * 64 and forward.time_steps.sum() == 12 * 63
