"""The manifest's per-feature statistics stay accurate whatever the offset of a feature."""

from __future__ import annotations

import numpy as np

from landfall.arrival.stats import RunningStats

T, F = 4, 5
SIZES = [1, 7, 130, 64, 999, 3, 250]  # uneven batches: several merges, one of a single instance


def offset_batches(dtype: type = np.float64) -> list[np.ndarray]:
    """Feature 0: timestamps near 1e9 with unit variance; then ordinary scales, a constant and zeros."""
    rng = np.random.default_rng(11)
    batches = []
    for k in SIZES:
        x = np.empty((k, T, F))
        x[..., 0] = 1e9 + rng.standard_normal((k, T))
        x[..., 1] = rng.normal(5.0, 2.0, (k, T))
        x[..., 2] = rng.normal(-3.0, 0.01, (k, T))
        x[..., 3] = 7.25
        x[..., 4] = 0.0
        batches.append(x.astype(dtype))
    return batches


def stats_of(batches: list[np.ndarray]) -> RunningStats:
    stats = RunningStats(F)
    for batch in batches:
        assert stats.update(batch)
    return stats


def naive_std(batches: list[np.ndarray]) -> np.ndarray:
    """The former per-batch formula, M2 = sum(x²) - sum(x)·mean, merged the same way (Chan et al.)."""
    n, mean, m2 = 0, np.zeros(F), np.zeros(F)
    for batch in batches:
        x = batch.reshape(-1, F).astype(np.float64)
        nb, s1, s2 = len(x), x.sum(axis=0), (x * x).sum(axis=0)
        mb, m2b = s1 / nb, np.maximum(s2 - s1 * (s1 / nb), 0.0)
        delta, total = mb - mean, n + nb
        mean, m2, n = mean + delta * nb / total, m2 + m2b + delta**2 * n * nb / total, total
    return np.sqrt(m2 / n)


def test_std_is_accurate_for_a_feature_at_a_large_offset():
    batches = offset_batches()
    everything = np.concatenate(batches).reshape(-1, F)
    result = stats_of(batches).result()
    np.testing.assert_allclose(result.std, everything.std(axis=0), rtol=0.01, atol=1e-9)
    np.testing.assert_allclose(result.mean, everything.mean(axis=0), rtol=1e-12, atol=1e-6)
    np.testing.assert_array_equal(result.min, everything.min(axis=0))
    np.testing.assert_array_equal(result.max, everything.max(axis=0))


def test_the_former_formula_fails_on_the_same_data():
    batches = offset_batches()
    exact = np.concatenate(batches).reshape(-1, F).std(axis=0)
    error = abs(naive_std(batches)[0] - exact[0]) / exact[0]
    assert error > 0.10, f"the naive formula is only {error:.1%} off: the test above would not catch it"


def test_float32_batches_as_the_readers_yield_them():
    rng = np.random.default_rng(3)
    batches = [(rng.normal(1000.0, 0.5, (k, T, F))).astype(np.float32) for k in SIZES]
    everything = np.concatenate(batches).reshape(-1, F).astype(np.float64)
    result = stats_of(batches).result()
    np.testing.assert_allclose(result.std, everything.std(axis=0), rtol=1e-4)
    np.testing.assert_allclose(result.mean, everything.mean(axis=0), rtol=1e-7)


def test_a_non_finite_batch_adds_nothing():
    stats = RunningStats(F)
    bad = offset_batches()[2].copy()
    bad[0, 0, 0] = np.nan
    assert not stats.update(bad)
    assert stats.n == 0 and not stats.m2.any()
    good = offset_batches()
    for batch in good:
        assert stats.update(batch)
    np.testing.assert_allclose(stats.result().std, np.concatenate(good).reshape(-1, F).std(axis=0), rtol=0.01,
                               atol=1e-9)


def test_values_near_the_float32_limits_still_count():
    batch = np.full((2, T, F), 3e38, np.float32)
    batch[1] = -3e38
    stats = RunningStats(F)
    assert stats.update(batch)  # False would make the converter look for non-finite rows that are not there
    np.testing.assert_allclose(stats.result().std, [3e38] * F, rtol=1e-6)
    np.testing.assert_allclose(stats.result().mean, [0.0] * F, atol=1e32)
