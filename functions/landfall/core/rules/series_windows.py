"""Series datasets: the window arithmetic the converter (``landfall.arrival.series``) and the trainer
(``trainer.training.windows``) share, and the manifest's ``series`` section that carries it.

A series arrival is stored once, as its rows (one float32 per channel), not as windows. What it holds:

- **segments**: the arrival's rows, sorted by time, are split wherever the step between two rows is longer than
  ``max_gap``; a segment with fewer than ``length`` rows yields no window and is not stored. The kept segments,
  concatenated, are the arrival's *stored rows*, numbered ``0 .. stored_rows - 1`` (segment ``k`` starts at its
  ``row``).
- **windows**: segment ``k`` of ``n`` rows yields ``windows_in(n) = (n - length) // stride + 1`` windows, window
  ``j`` of it covering stored rows ``[row_k + j * stride, row_k + j * stride + length)``. An arrival's windows
  are numbered across its segments in time order: they are its *records* (``manifest.count``), which the plan,
  the hold-out (``landfall.core.rules.holdout``) and the submit stage's count use exactly as they use instances.
- **shards**: shard ``i`` holds the windows ``[first_i, first_i + count_i)`` (``first_i`` the sum of the earlier
  shards' counts) and the rows they need: stored rows ``[start(first_i), start(last_i) + length)``, as records of
  at most ``BLOCK_ROWS`` rows (``x``: raw float32, C order, ``(k, channels)``). So a window never needs two files;
  consecutive shards repeat at most ``length - 1`` rows, and the converter makes shards at least
  ``MIN_SHARD_WINDOWS`` windows long, so storage stays within ``1 + 1/MIN_SHARD_WINDOWS`` of the series.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

# How a row's score is made from the windows over it: ``landfall.detect.located.Locator``'s rules, a series dataset's
# ``shape.window.combine`` and ``landfall score --combine``; ``SAYS`` what each is, for people. ``ROW`` also keys
# ``threshold.json``'s row threshold (``landfall.core.scoring``), the one a row's own error is flagged against.
MEAN, MAX, ROW = "mean", "max", "row"
COMBINE = (MEAN, MAX, ROW)
SAYS = {MEAN: "the mean of the windows over each row", MAX: "the largest of the windows over each row",
        ROW: "each row's own error, averaged over the windows over it"}



def served_stride(combine: str, alone: bool, length: int, stride: int) -> int:
    """Rows between the windows a series is scored at: ``stride``, but a window's ``length`` for a detector whose rows
    are scored alone (``alone``: a row's score is its own in any window, ``trainer.judging.baselines.rowwise``) and
    located by them (``combine`` ``ROW``): each row scored once, the same scores as at any stride."""
    return int(length) if combine == ROW and alone else int(stride)


def window_scores(rows: np.ndarray, unit: str | None) -> np.ndarray:
    """Each window's score from its rows' (``[n, T]``) as the surrogate set judges a candidate
    (``trainer.judging.surrogate``): their mean, but for a candidate located by its rows' own scores (``unit`` ``ROW``)
    their largest: a window holds an anomaly when its most anomalous row does, which a mean over the window dilutes
    ``T`` times."""
    rows = np.asarray(rows, np.float64)
    return rows.max(axis=1) if unit == ROW else rows.mean(axis=1)


def fixed_for_rows(combine: str, labelled: bool) -> bool:
    """Whether a job's verdict serves the fixed choice for rows (``trainer.judging.selection.basis``): its rows are
    scored by their own errors (``combine`` ``ROW``) and it has no labelled set to choose by. The model such a job
    trains is then never served by a verdict that selects by detection, so it needs no GPU
    (``landfall.submit.unserved``)."""
    return combine == ROW and not labelled


# A labelled recording's windows for the labelled check (``labelled_windows``): at most this many values, as float32
LABELLED_VALUES = 32 * 2**20


def labelled_windows(rows: np.ndarray, labels: np.ndarray, starts: np.ndarray, length: int,
                     max_values: int = LABELLED_VALUES) -> tuple[np.ndarray, np.ndarray, int]:
    """The windows a labelled recording (``rows`` [n, C] in time order, a 0/1 label per row, each segment's first
    row in ``starts``) gives a job whose windows are ``length`` rows: ``(windows [m, length, C], labels [m], stride)``.
    Every segment's windows ``stride`` rows apart from its first row, in time order; the stride the smallest that
    keeps them within ``max_values`` values, and never over ``length``, so every row of a segment but a last few is
    in one. A window is labelled 1 when any of its rows is (an anomaly one row long makes every window over it
    anomalous, as it makes their errors higher). ``ValueError`` when no segment is a window long."""
    n = len(rows)
    bounds = [(int(a), int(b)) for a, b in zip(starts, [*starts[1:], n], strict=True) if b - a >= length]
    total = sum(b - a - length + 1 for a, b in bounds)
    if not total:
        raise ValueError(f"no window of {length} rows fits the labelled recording ({n} rows in {len(starts)} "
                         "segments): it needs a stretch without gaps at least one window long")
    per = length * rows.shape[1]
    stride = int(min(length, max(1, -(-total * per // max(per, max_values)))))
    first = np.concatenate([np.arange(a, b - length + 1, stride) for a, b in bounds])
    view = np.lib.stride_tricks.sliding_window_view(rows, length, axis=0)  # [n - length + 1, C, length]
    windows = np.ascontiguousarray(view[first].transpose(0, 2, 1), dtype=np.float32)
    marked = np.concatenate([[0], np.cumsum(np.asarray(labels) > 0)])
    return windows, (marked[first + length] > marked[first]).astype(np.uint8), stride


BLOCK_ROWS = 1024  # rows per TFRecord record of a series shard
MIN_SHARD_WINDOWS = 16  # a shard (but an arrival's last) holds at least this many window lengths of rows


GAP_TRIGGER = 0.25  # the default max_gap is raised only when 3 x the median step would drop more than this share ...
GAP_LOSS = 0.05  # ... and then until it drops at most this share of the rows in segments shorter than a window


def rows_lost(steps: np.ndarray, gap: float, length: int) -> int:
    """Rows in runs shorter than ``length`` (no window fits them) when a series of time ``steps`` is cut at every step
    longer than ``gap``: what ``default_max_gap`` holds under ``GAP_TRIGGER`` and ``GAP_LOSS``."""
    cuts = np.flatnonzero(steps > gap)
    bounds = np.concatenate([[0], cuts + 1, [len(steps) + 1]])
    runs = np.diff(bounds)
    return int(runs[runs < length].sum())


def default_max_gap(times: np.ndarray, length: int | None = None) -> float:
    """``max_gap`` when a spec sets none, from ``times`` (an arrival's first chunk): 3 x the median step; when its cuts
    would drop more than ``GAP_TRIGGER`` of these rows in segments shorter than a window of ``length`` rows, raised to
    the smallest longer step at which they drop at most ``GAP_LOSS`` (the longest step when none does: then nothing
    in these rows is cut). A regularly
    sampled series gets 3 x its step, as before issue #47; an irregularly sampled one (a road sensor reporting when
    traffic passes, a facility meter with outages: NAB's TravelTime_451 has 95 steps over 3 x its median in its first
    500 rows) is split only at its rare long gaps, instead of into pieces no window fits."""
    steps = np.diff(np.asarray(times, dtype=np.float64))
    if not len(steps):
        return float("inf")
    base = 3.0 * float(np.median(steps))
    if length is None or length <= 1 or rows_lost(steps, base, length) <= GAP_TRIGGER * (len(steps) + 1):
        return base
    longer = np.unique(steps[steps > base])  # ascending; the rows lost only fall as the gap grows
    if not len(longer):  # nothing to raise it to: the rows are too few for a window whatever the gap
        return base
    lo, hi = 0, len(longer)  # the first candidate that loses little enough, by bisection (hi: none)
    while lo < hi:
        mid = (lo + hi) // 2
        if rows_lost(steps, float(longer[mid]), length) <= GAP_LOSS * (len(steps) + 1):
            hi = mid
        else:
            lo = mid + 1
    return float(longer[min(lo, len(longer) - 1)])


def windows_in(rows: int | np.ndarray, length: int, stride: int) -> Any:
    """Windows of ``length`` rows every ``stride`` rows in ``rows`` consecutive rows (0 when too few)."""
    r = np.asarray(rows, dtype=np.int64)
    out = np.where(r >= length, (r - length) // stride + 1, 0)
    return int(out) if out.ndim == 0 else out


@dataclasses.dataclass(frozen=True)
class Segment:
    """A run of rows without a gap: stored rows ``[row, row + rows)``, ``windows`` windows, times ``start``..``end``
    (the time column's values: seconds since the epoch for ISO-8601 timestamps)."""

    row: int
    rows: int
    windows: int
    start: float
    end: float

    def to_list(self) -> list[Any]:
        return [self.row, self.rows, self.windows, self.start, self.end]


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where an arrival's windows are: its window ``length`` and ``stride`` and its segments."""

    length: int
    stride: int
    segments: tuple[Segment, ...]

    @property
    def windows(self) -> int:
        return sum(s.windows for s in self.segments)

    def starts(self, index: np.ndarray | Sequence[int]) -> np.ndarray:
        """The stored row each of the arrival's windows ``index`` starts at (int64)."""
        index = np.asarray(index, dtype=np.int64)
        counts = np.array([s.windows for s in self.segments], dtype=np.int64)
        firsts = np.concatenate([[0], np.cumsum(counts)])[:-1]
        rows = np.array([s.row for s in self.segments], dtype=np.int64)
        which = np.searchsorted(firsts, index, side="right") - 1
        # A segment without windows is never listed; ties (none) would pick the last segment of a first.
        return rows[which] + (index - firsts[which]) * self.stride

    def times(self, index: np.ndarray | Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """(segment, offset in rows from the segment's first row) of the arrival's windows ``index``."""
        index = np.asarray(index, dtype=np.int64)
        counts = np.array([s.windows for s in self.segments], dtype=np.int64)
        firsts = np.concatenate([[0], np.cumsum(counts)])[:-1]
        which = np.searchsorted(firsts, index, side="right") - 1
        return which, (index - firsts[which]) * self.stride

    @classmethod
    def of(cls, series: Mapping[str, Any], length: int) -> Layout:
        """From a manifest's ``series`` section and its shape's ``length`` (``shape[0]``)."""
        return cls(int(length), int(series["stride"]),
                   tuple(Segment(int(r), int(n), int(w), float(a), float(b)) for r, n, w, a, b in series["segments"]))


def check(series: Mapping[str, Any], shape: Sequence[int], count: int, where: str) -> str | None:
    """What is wrong with a manifest's ``series`` section (None: nothing)."""
    try:
        layout = Layout.of(series, int(shape[0]))
    except (KeyError, TypeError, ValueError) as exc:
        return f"{where}: series section is not readable ({type(exc).__name__}: {exc})"
    if layout.stride < 1 or not layout.segments:
        return f"{where}: series has stride {layout.stride} and {len(layout.segments)} segments"
    for s in layout.segments:
        if s.windows != windows_in(s.rows, layout.length, layout.stride) or s.windows < 1:
            return f"{where}: series segment at row {s.row} has {s.rows} rows but says {s.windows} windows"
    if layout.windows != count:
        return f"{where}: series segments hold {layout.windows} windows, count says {count}"
    return None
