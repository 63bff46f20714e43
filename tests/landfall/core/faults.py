"""Faults put into real multichannel recordings as deployments break them (#39), and the streams of arrivals they are
put into: the fault table of docs/datasets.md#arrival-checks.

Data (bench/data, sources and licences in its README.md): Daphnet S06R02E0 (9 acceleration channels in mg, 64 Hz, its
own timestamps), cut into arrivals of one second; BasicMotions (a smart watch's 3-D accelerometer and gyroscope at
10 Hz, 80 recordings of 100 rows), one recording per arrival in a shuffled order, as a series stamped every 0.1 s
(the rate the UEA archive documents: the .ts files carry no time column).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import numpy as np

from landfall.arrival.stats import RunningStats
from landfall.core.quality.profile import Profile
from landfall_bench import realdata

BASIC_MOTIONS_CHANNELS = ("acc_x", "acc_y", "acc_z", "gyro_x", "gyro_y", "gyro_z")
Series = tuple[np.ndarray, np.ndarray]  # (times [n] float64 seconds, values [n, C] float32)


def profile_of(times: np.ndarray, rows: np.ndarray, dropped: np.ndarray | None = None) -> Profile:
    """A series arrival's profile as the converter takes it (``landfall.arrival.series.SeriesWriter``)."""
    stats = RunningStats(rows.shape[1])
    stats.update(rows[:, None, :])
    out = Profile(rows.shape[1])
    out.update_rows(rows)
    out.update_steps(np.diff(times))
    if dropped is not None:
        out.dropped(dropped)
    return out.finish(stats.to_dict())


@dataclasses.dataclass(frozen=True)
class Recording:
    name: str
    channels: tuple[str, ...]
    arrivals: tuple[Series, ...]
    zero_centred: str  # a channel whose mean is small against its spread
    offset: str  # a channel that carries an offset (gravity), or the most offset one
    pair: tuple[str, str]  # two channels of alike distributions (the same axis of two sensors)
    first_checked: int  # arrivals before it make the first reference the envelope checks judge by


@functools.cache
def daphnet(rows: int = 64) -> Recording:
    """Daphnet cut into arrivals of ``rows`` rows (64: one second)."""
    stamps, values, _ = realdata.daphnet()
    seconds = stamps.astype("datetime64[ms]").astype(np.int64) / 1000.0
    arrivals = tuple((seconds[i:i + rows], values[i:i + rows]) for i in range(0, len(values) - rows + 1, rows))
    return Recording(f"Daphnet S06R02E0, {rows / 64:g} s arrivals", realdata.DAPHNET_CHANNELS, arrivals,
                     "leg_horiz_fwd", "leg_vert", ("ankle_horiz_fwd", "leg_horiz_fwd"), 16 if rows == 64 else 10)


@functools.cache
def basic_motions() -> Recording:
    x = np.concatenate([realdata.basic_motions("train")[0], realdata.basic_motions("test")[0]])
    order = np.random.default_rng(0).permutation(len(x))  # the activities arrive mixed, not in blocks
    times = np.arange(100) * 0.1
    return Recording("BasicMotions, one recording per arrival", BASIC_MOTIONS_CHANNELS,
                     tuple((times, x[i]) for i in order), "gyro_y", "acc_x", ("gyro_x", "gyro_z"), 10)


def _gain(channel: str, factor: float) -> Callable[[Recording, Series, np.random.Generator], Series]:
    def fault(rec: Recording, s: Series, rng: np.random.Generator) -> Series:
        values = s[1].copy()
        values[:, rec.channels.index(getattr(rec, channel))] *= factor
        return s[0], values
    return fault


def _copy(noise: float) -> Callable[[Recording, Series, np.random.Generator], Series]:
    def fault(rec: Recording, s: Series, rng: np.random.Generator) -> Series:
        values = s[1].copy()
        a, b = (rec.channels.index(c) for c in rec.pair)
        values[:, b] = values[:, a] + rng.normal(0, noise * values[:, a].std() + 1e-9, len(values))
        return s[0], values
    return fault


def _polarity(rec: Recording, s: Series, rng: np.random.Generator) -> Series:
    values = s[1].copy()
    c = rec.channels.index(rec.zero_centred)
    values[:, c] = 2 * values[:, c].mean() - values[:, c]  # inverted about its level: the mean stays, the sign flips
    return s[0], values


def _late(rec: Recording, s: Series, rng: np.random.Generator) -> Series:
    """One channel half an arrival late (a buffer or a clock of its own): its pairs lose their correlation."""
    values = s[1].copy()
    c = rec.channels.index(rec.zero_centred)
    values[:, c] = np.roll(values[:, c], len(values) // 2)
    return s[0], values


def _decimated(rec: Recording, s: Series, rng: np.random.Generator) -> Series:
    return s[0][::2], s[1][::2]  # every second row, with its own time


def _restamped(rec: Recording, s: Series, rng: np.random.Generator) -> Series:
    half = s[1][::2]  # every second row, stamped at the old rate
    return s[0][:len(half)], half


def _upsampled(rec: Recording, s: Series, rng: np.random.Generator) -> Series:
    times = np.linspace(s[0][0], s[0][-1], 2 * len(s[0]) - 1)
    values = np.stack([np.interp(times, s[0], s[1][:, c]) for c in range(s[1].shape[1])], axis=1)
    return times, values.astype(np.float32)


def _milliseconds(rec: Recording, s: Series, rng: np.random.Generator) -> Series:
    return s[0] * 1000.0, s[1]  # the export's time column in milliseconds


def _scaled(factor: float, channel: str = "offset") -> Callable[[Recording, Series, np.random.Generator], Series]:
    return _gain(channel, factor)


def _constant(rec: Recording, s: Series, rng: np.random.Generator) -> Series:
    values = s[1].copy()
    c = rec.channels.index(rec.offset)
    values[:, c] = values[0, c]
    return s[0], values


def _swapped(rec: Recording, s: Series, rng: np.random.Generator) -> Series:
    values = s[1].copy()
    a, b = rec.channels.index(rec.offset), rec.channels.index(rec.zero_centred)
    values[:, [a, b]] = values[:, [b, a]]
    return s[0], values


# fault -> (what it is, what should catch it: the check, and which feature(s) by role)
FAULTS: dict[str, tuple[Callable[[Recording, Series, np.random.Generator], Series], str, str]] = {
    "offset channel x1000": (_scaled(1000.0), "scale_change", "offset"),
    "offset channel stuck": (_constant, "flat_channel", "offset"),
    "offset and zero-centred channels swapped": (_swapped, "swapped_channels", "offset,zero_centred"),
    "channel copied into its twin": (_copy(0.0), "copied_channel", "pair"),
    "channel copied, 5 % noise added": (_copy(0.05), "copied_channel", "pair"),
    "zero-centred channel's polarity flipped": (_polarity, "correlation_change", "zero_centred"),
    "zero-centred channel half an arrival late": (_late, "correlation_change", "zero_centred"),
    "decimated x2 (own timestamps)": (_decimated, "sampling_interval", "time"),
    "decimated x2, stamped at the old rate": (_restamped, "sampling_interval", "time"),
    "upsampled x2 (interpolated)": (_upsampled, "sampling_interval", "time"),
    "time in milliseconds, not seconds": (_milliseconds, "sampling_interval", "time"),
    **{f"zero-centred channel x{g:g}": (_gain("zero_centred", g), "gain_change", "zero_centred")
       for g in (2, 3, 5, 9.81)},
    **{f"offset channel x{g:g}": (_gain("offset", g), "gain_change", "offset") for g in (2, 3, 5, 9.81)},
}


def features_of(rec: Recording, role: str) -> set[str]:
    """The feature names a finding on ``role`` may carry."""
    if role == "time":
        return {"time"}
    if role == "pair":
        return {",".join(rec.pair), ",".join(rec.pair[::-1])}
    parts = [getattr(rec, r) for r in role.split(",")]
    return {",".join(parts), ",".join(parts[::-1])} if len(parts) > 1 else {parts[0]}
