"""What the checks measure beyond one feature's distribution (#39): how channels relate, how a series is sampled,
and how far each channel's spread lies from where clean arrivals put it. Pure measurements on profiles
(``landfall.core.quality.profile``); ``landfall.core.quality.checks`` turns them into findings with the dataset's rules.

- **Copies**: a pair of features whose correlation in the arrival is ``copy`` or more in magnitude, where no clean
  arrival's was (the reference keeps the lowest and highest correlation one admitted arrival showed per pair).
- **Correlation changes**: a pair whose correlation lies outside the clean arrivals' range widened by ``margin`` in
  Fisher's z (``atanh``: the correlation of n rows has a standard error of about ``1 / sqrt(n - 3)`` there), grouped
  by the channel most of the pairs share, so a channel whose polarity flipped is one finding.
- **Gain**: a feature's spread relative to the arrival's typical channel (``Profile.relative_spread``) outside the
  clean arrivals' range by more than a factor ``margin``: a gain on one channel, under the fixed factor of
  ``scale_change``, which a livelier regime (every channel's spread up together) does not trip.
- **Sampling**: a series' median time step against the reference's (a factor ``factor`` or more either way:
  decimated, upsampled, re-clocked in seconds against milliseconds), and, with or without a time column, how far the
  channels move per step (``Profile.roughness``): most channels outside their clean range, the same way, is a
  sampling change the timestamps do not show (every second row kept, stamped at the old rate).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from landfall.core.quality.profile import Profile


@dataclasses.dataclass(frozen=True)
class PairShift:
    """Feature ``f``'s correlation with ``g``: ``measured`` in the arrival, clean arrivals ``low`` to ``high``."""

    f: int
    g: int
    measured: float
    low: float
    high: float
    beyond: float  # Fisher-z units outside the range


def copies(arrival: Profile, reference: Profile, copy: float) -> list[tuple[int, int, float, float]]:
    """Pairs (f, g, |corr| in the arrival, the highest |corr| a clean arrival showed) where the arrival's is ``copy``
    or more and every clean arrival's was below it."""
    corr, low, high = arrival.correlation(), reference.corr_low, reference.corr_high
    if corr is None or low is None or high is None:
        return []
    seen = np.fmax(np.abs(low), np.abs(high))
    out = []
    for f, g in zip(*np.triu_indices(arrival.features, 1), strict=True):
        c = abs(corr[f, g])
        if np.isfinite(c) and np.isfinite(seen[f, g]) and c >= copy and seen[f, g] < copy:
            out.append((int(f), int(g), float(c), float(seen[f, g])))
    return out


def pair_shifts(arrival: Profile, reference: Profile, margin: float, skip: set[int]) -> list[PairShift]:
    """Pairs (neither in ``skip``) whose correlation lies more than ``margin`` (Fisher z) outside the clean range."""
    corr, low, high = arrival.correlation(), reference.corr_low, reference.corr_high
    if corr is None or low is None or high is None:
        return []
    z, zl, zh = (np.arctanh(np.clip(m, -0.9999, 0.9999)) for m in (corr, low, high))
    beyond = np.fmax(zl - z, z - zh)
    out = []
    for f, g in zip(*np.triu_indices(arrival.features, 1), strict=True):
        if f in skip or g in skip or not np.isfinite(beyond[f, g]) or beyond[f, g] < margin:
            continue
        out.append(PairShift(int(f), int(g), float(corr[f, g]), float(low[f, g]), float(high[f, g]),
                             float(beyond[f, g])))
    return out


def by_channel(shifts: list[PairShift]) -> list[tuple[int | None, list[PairShift]]]:
    """The shifted pairs grouped by the channel most of them share (None: a lone pair, both named)."""
    left, out = list(shifts), []
    while left:
        count: dict[int, int] = {}
        for s in left:
            count[s.f] = count.get(s.f, 0) + 1
            count[s.g] = count.get(s.g, 0) + 1
        channel = max(count, key=lambda c: (count[c], sum(s.beyond for s in left if c in (s.f, s.g))))
        if count[channel] < 2:
            out += [(None, [s]) for s in left]
            break
        mine = [s for s in left if channel in (s.f, s.g)]
        out.append((channel, mine))
        left = [s for s in left if channel not in (s.f, s.g)]
    return out


def gain_factor(arrival: Profile, reference: Profile) -> np.ndarray:
    """Per feature, how many times its relative spread lies outside the clean arrivals' range (1 inside; nan when
    either side has none)."""
    rel = arrival.relative_spread()
    outside = np.fmax(reference.relspread_low - rel, rel - reference.relspread_high)
    return np.where(np.isfinite(outside), np.exp(np.maximum(outside, 0.0)), np.nan)


@dataclasses.dataclass(frozen=True)
class Sampling:
    """A series' time steps against the reference's, and the channels' pace per step."""

    step: float  # the arrival's median time step (nan: no time column)
    expected: float  # the reference's
    spread: float  # the arrival's q90 / q10 of its steps
    expected_spread: float
    pace: float  # how many times as far per step the channels move as the reference's (median over channels)
    outside: int  # channels whose roughness lies outside the clean range (+ above, - below), by more than a margin
    channels: int  # channels with a roughness on both sides


def sampling(arrival: Profile, reference: Profile, margin: float) -> Sampling:
    step, expected = arrival.step_quantile(0.5), reference.step_quantile(0.5)
    spread = arrival.step_quantile(0.9) / arrival.step_quantile(0.1) if np.isfinite(step) else float("nan")
    expected_spread = reference.step_quantile(0.9) / reference.step_quantile(0.1) if np.isfinite(expected) else \
        float("nan")
    rough, ref_rough = arrival.roughness(), reference.roughness()
    both = np.isfinite(rough) & np.isfinite(ref_rough) & np.isfinite(reference.rough_low)
    # roughness goes as the square of the interval for a smooth signal: the margin on the interval, squared
    m = 2 * np.log(margin)
    above = int((rough[both] > reference.rough_high[both] + m).sum())
    below = int((rough[both] < reference.rough_low[both] - m).sum())
    pace = float(np.exp(np.median(rough[both] - ref_rough[both]) / 2)) if both.any() else float("nan")
    return Sampling(step, expected, spread, expected_spread, pace, above if above >= below else -below,
                    int(both.sum()))
