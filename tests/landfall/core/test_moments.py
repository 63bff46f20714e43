"""The one merge of per-feature statistics (landfall.core.rules.moments): exact against numpy over the rows themselves,
whatever the split, and precise where the E[x^2] - E[x]^2 form is not (a large offset against a small spread)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from landfall.core.rules import moments


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 50), min_size=1, max_size=8), st.integers(0, 2**31 - 1))
def test_pooled_parts_are_the_rows_together(sizes, seed):
    rng = np.random.default_rng(seed)
    parts = [rng.normal(rng.normal(0, 5, 3), rng.uniform(0.1, 3, 3), (n, 3)) for n in sizes]
    mean, std = moments.pooled((len(p), p.mean(0), p.std(0)) for p in parts)
    rows = np.concatenate(parts)
    np.testing.assert_allclose(mean, rows.mean(0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(std, rows.std(0), rtol=1e-9, atol=1e-12)


def test_a_large_offset_keeps_its_spread():
    rng = np.random.default_rng(0)
    parts = [1.7e9 + rng.normal(0, 1.0, (1000, 1)) for _ in range(4)]  # epoch seconds, one second of jitter
    rows = np.concatenate(parts)
    _, std = moments.pooled((len(p), p.mean(0), p.std(0)) for p in parts)
    assert abs(std[0] - rows.std()) < 1e-6
    counts = np.array([len(p) for p in parts], float)[:, None]
    means, stds = np.array([p.mean(0) for p in parts]), np.array([p.std(0) for p in parts])
    second = (counts * (stds**2 + means**2)).sum(0) / counts.sum()  # the form the trainer used before
    naive = np.sqrt(max(second[0] - ((counts * means).sum(0) / counts.sum())[0] ** 2, 0.0))
    assert abs(naive - rows.std()) > 1e-3  # lost to the subtraction


def test_nothing_to_pool_is_an_error():
    import pytest

    with pytest.raises(ValueError):
        moments.pooled([])


def test_the_error_scale_is_each_features_spread_and_a_constant_ones_a_small_varying_spread():
    std = np.array([0.5, 0.0, 2.0, 1e-13, 0.1, 0.3])
    scale = moments.error_scale(std)
    varying = std[[0, 2, 4, 5]]
    floor = np.quantile(varying, moments.FLOOR_QUANTILE)
    np.testing.assert_array_equal(scale, [0.5, floor, 2.0, floor, 0.1, 0.3])
    assert 0.1 < floor < 0.3  # between the smallest and the next: a small spread, not 1 and not 0
    np.testing.assert_array_equal(moments.scaled(std), [0.5, 1.0, 2.0, 1.0, 0.1, 0.3])  # what a model normalises by
    np.testing.assert_array_equal(moments.error_scale([0.0, 0.0]), [1.0, 1.0])  # nothing varies: original units
