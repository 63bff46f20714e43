"""A series' period (landfall.arrival.period: TSB-AD's find_length_rank rule) and the default max_gap of an irregularly
sampled series (landfall.core.rules.series_windows.default_max_gap), on generated and on NAB's recorded
series."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from landfall.arrival import period
from landfall.core.rules import series_windows
from landfall_bench import protocol


def test_the_autocorrelation_is_the_textbook_one():
    x = np.random.default_rng(0).normal(size=500).cumsum()
    m = x - x.mean()
    direct = np.array([(m[: len(m) - k] * m[k:]).sum() for k in range(41)]) / (m * m).sum()
    np.testing.assert_allclose(period.autocorrelation(x, 40), direct, atol=1e-10)


@pytest.mark.parametrize("cycle", [12, 50, 144, 288])
def test_a_periodic_series_gives_its_period(cycle):
    t = np.arange(20 * cycle)
    noisy = np.sin(2 * np.pi * t / cycle) + np.random.default_rng(cycle).normal(0, 0.2, len(t))
    assert abs(period.length(noisy) - cycle) <= 1  # noise may move the peak by a lag


def test_no_period_or_too_long_or_too_short_gives_the_fallback():
    assert period.length(np.arange(5.0)) == period.FALLBACK  # too short to say anything
    assert period.length(np.ones(1000)) == period.FALLBACK  # constant: no autocorrelation peak
    t = np.arange(4000)
    assert period.length(np.sin(2 * np.pi * t / 350)) == period.FALLBACK  # a peak past lag 300: TSB-AD's 125
    assert period.length(np.c_[np.sin(2 * np.pi * t / 40), np.zeros(4000)]) == 40  # the first channel


def test_the_nab_dev_recordings_windows():
    """The windows the dev set gets (and ``landfall bench detect`` uses): 16 to 128 rows."""
    doc = json.loads((protocol.dev_root() / "series.json").read_text())
    got = {}
    for name, entry in doc.items():
        values = pd.read_csv(protocol.dev_root() / entry["file"])["value"].to_numpy()[1:]
        got[name.split("_")[0]] = period.length(values)
    assert got == {"008": 71, "009": 128, "014": 23, "017": 100, "018": 125, "025": 16}


def test_the_default_max_gap_raises_its_cut_for_an_irregular_series_only():
    rng = np.random.default_rng(3)
    regular = np.arange(2000) * 300.0
    assert series_windows.default_max_gap(regular, 64) == 900.0  # 3 x the step, as before
    # A road sensor: a reading every 600 s, but one step in five much longer (traffic-driven reporting).
    steps = np.where(rng.random(2000) < 0.2, rng.uniform(2000, 30000, 2000), 600.0)
    times = np.concatenate([[0.0], np.cumsum(steps)])
    gap = series_windows.default_max_gap(times, 128)
    assert gap > 1800.0 and series_windows.rows_lost(np.diff(times), gap, 128) <= series_windows.GAP_LOSS * len(times)
    # 3 x median would shatter it
    assert series_windows.rows_lost(np.diff(times), 1800.0, 128) > series_windows.GAP_LOSS * len(times)
    # Without a window to fit, the old rule.
    assert series_windows.default_max_gap(times) == 1800.0
