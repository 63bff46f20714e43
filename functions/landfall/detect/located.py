"""Scores located in time: a series' window errors turned back into a score per moment, the anomalous ranges, and
precision and recall against a label column (``landfall score`` on a series file; ``landfall.core.rules.series_windows``
has the window arithmetic it mirrors).

``Locator`` is fed a series' rows in time order (bounded chunks) and an ``errors`` function (a window block, float32
``[n, length, channels]``, to one error each: ``landfall.core.scoring.Scorer.errors``). It cuts the rows into segments
where a step is longer than ``max_gap`` (the converter's rule: no window spans a gap; unset, taken from the first
chunk of rows that has a step, as ``landfall.arrival.series.SeriesWriter`` takes it), scores every window of a
segment, ``stride`` rows apart, plus one window ending at the segment's last row when the stride leaves rows after
the last (so every row of a segment at least one window long is covered), and gives each row a score from the
windows covering it:

- ``mean`` (the default): the mean of their errors. A moment's score peaks where the anomaly is (every window over it
  holds it, fewer and fewer do on either side), so ranges are located to about the anomaly itself; on normal
  stretches it is a typical window error, on the scale of the champion's threshold (a quantile of held-out window
  errors). This is the "reverse windowing" of TimeEval (Wenig, Schmidl, Papenbrock, "TimeEval: a benchmarking
  toolkit for time series anomaly detection algorithms", VLDB 2022), which averages the scores of the windows a
  point belongs to.
- ``max``: the largest of their errors: a row is anomalous when any window over it is. Never misses a moment an
  anomalous window covers, but smears every range by up to ``length - 1`` rows on either side.
- ``row``: the mean of **the row's own error** in each of them (its reconstruction's MSE over the channels,
  ``Scorer.row_errors``; ``errors`` then returns ``[n, length]``), flagged against the champion's row threshold
  (``threshold.json``'s ``row``). A window's error is the mean of its rows', so ``mean`` spreads a one-row anomaly
  over ``2 x length - 1`` rows at ``1/length`` of its height, and ``row`` keeps it on its row: on the Server Machine
  Dataset recordings of TSB-AD-M, where the labelled anomalies are rows that leave every channel's normal range,
  the mean window's VUS-PR goes from 0.33 to 0.67 (066) and 0.22 to 0.64 (075), while on recordings whose anomalies
  are shapes over many rows (NAB, MSL, Genesis) it falls (docs/benchmarks.md, "A row's own error").

A row is anomalous when its score is above the threshold; a row no window covers (in a segment shorter than one
window) has no score (NaN) and is never anomalous. A **range** is a maximal run of anomalous rows within one segment
(a gap ends it): its first and last row and their times, and where its score peaks.

With labels (0/1 per row, 1 anomalous) ``Locator.metrics`` gives the threshold-free average precision and VUS-PR of
the rows' scores (``landfall.core.rules.vus``; up to ``RANKED_ROWS`` rows), and two precisions and recalls at the
threshold:

- **point-wise**: every row is one sample; precision = TP / (TP + FP) over the rows flagged, recall = TP / (TP + FN)
  over the rows labelled 1 (rows without a score count as not flagged);
- **range-based**, the existence form of Tatbul, Lee, Zdonik, Alam, Gottschlich, "Precision and Recall for Time
  Series" (NeurIPS 2018) with alpha = 1: recall = the share of labelled ranges (maximal runs of 1s) that some found
  range overlaps; precision = the share of found ranges that overlap some labelled range.

Each is None when undefined (nothing flagged, or no row labelled 1).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from landfall.core.errors import BadInput
from landfall.core.rules import duplicates, vus
from landfall.core.rules.series_windows import COMBINE, MEAN, ROW, default_max_gap

RANKED_ROWS = 20_000_000  # labelled rows kept (5 bytes each) for the threshold-free figures, AP and VUS-PR


class Unsorted(Exception):
    """A row's time is before the previous row's: read the series sorted (``landfall.arrival.series.sorted_whole``)."""


@dataclasses.dataclass
class Range:
    """Rows ``[first, last]`` (positions in the time-sorted series) anomalous, times ``start``..``end``; the score
    peaks at row ``peak_row`` (time ``peak``) with ``peak_score``. ``count``: the rows it holds, where they are not
    all of ``first..last`` (``landfall.detect.score`` gives a range back to an input file's rows; None: all)."""

    first: int
    last: int
    start: float
    end: float
    peak_row: int
    peak: float
    peak_score: float
    count: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "peak": self.peak, "peak_score": self.peak_score,
                "first_row": self.first, "last_row": self.last, "peak_row": self.peak_row,
                "rows": self.last - self.first + 1 if self.count is None else self.count}


@dataclasses.dataclass
class Block:
    """Rows ``[row, row + len(times))`` with their score (NaN: no window), flag and label (None: unlabelled)."""

    row: int
    times: np.ndarray
    scores: np.ndarray
    anomaly: np.ndarray
    labels: np.ndarray | None


class Runs:
    """Maximal runs of True across blocks; ``end()`` closes the open one (a segment boundary)."""

    def __init__(self) -> None:
        self.done: list[Range] = []
        self.open: Range | None = None

    def add(self, block: Block, flags: np.ndarray, scores: np.ndarray | None) -> None:
        if not len(flags):
            return
        if not flags[0]:
            self.end()  # the open run, if any, ended with the previous block
        edges = np.flatnonzero(np.diff(np.concatenate([[False], flags, [False]]).astype(np.int8)))
        for lo, hi in zip(edges[0::2].tolist(), edges[1::2].tolist(), strict=True):
            peak = lo + int(np.argmax(scores[lo:hi])) if scores is not None else lo
            value = float(scores[peak]) if scores is not None else 1.0
            run = self.open
            if run is None:
                run = self.open = Range(block.row + lo, block.row + lo, float(block.times[lo]), float(block.times[lo]),
                                        block.row + peak, float(block.times[peak]), value)
            elif value > run.peak_score:
                run.peak_row, run.peak, run.peak_score = block.row + peak, float(block.times[peak]), value
            run.last, run.end = block.row + hi - 1, float(block.times[hi - 1])
            if hi < len(flags):
                self.end()

    def end(self) -> None:
        if self.open is not None:
            self.done.append(self.open)
            self.open = None


class Locator:
    """Scores a series' rows from its windows' errors, streaming: feed sorted (times, values[, labels]) chunks, then
    ``finish``; each call yields the ``Block``s of rows whose score is final (memory: one chunk and ``length`` rows)."""

    def __init__(self, length: int, stride: int, threshold: float, errors: Callable[[np.ndarray], np.ndarray],
                 max_gap: float | None = None, combine: str = MEAN, drop_nonfinite: bool = False):
        if combine not in COMBINE:
            raise ValueError(f"combine must be one of {COMBINE}, not {combine!r}")
        if length < 1 or stride < 1:
            raise ValueError(f"length {length} and stride {stride} must be at least 1")
        self.length, self.stride, self.threshold, self.errors = int(length), int(stride), float(threshold), errors
        self.max_gap, self.combine, self.drop_nonfinite = max_gap, combine, drop_nonfinite
        self.rows = self.windows = self.flagged = self.dropped_nonfinite = 0
        self.labelled = False
        self.tp = self.fp = self.fn = 0
        self.found, self.truth = Runs(), Runs()
        self._ranked: list[tuple[np.ndarray, np.ndarray]] = []  # (scores, labels) of labelled rows, for AP and VUS-PR
        self._ranked_rows = 0
        self._t = np.zeros(0, np.float64)
        self._v: np.ndarray | None = None
        self._l: np.ndarray | None = None
        self._acc = np.zeros(0, np.float64)
        self._cnt = np.zeros(0, np.int32)
        self._b0 = 0  # series row of the buffer's first row
        self._seg0 = 0  # first row of the segment being read
        self._next = 0  # start of its next window
        self._last: float | None = None
        self.on_errors: Callable[[np.ndarray], None] | None = None

    # -- feeding -----------------------------------------------------------------------------------------------
    def feed(self, times: np.ndarray, values: np.ndarray, labels: np.ndarray | None = None) -> Iterator[Block]:
        times = np.asarray(times, np.float64)
        values = np.asarray(values, np.float32)
        if not len(times):
            return
        if labels is not None:
            labels = np.asarray(labels, np.float64)
            bad = ~np.isin(labels, (0.0, 1.0))
            if bad.any():
                at = int(np.argmax(bad))
                raise BadInput("label_values", f"label {labels[at]:g} in row {self.rows + at + 1}: labels are 0 "
                               "(normal) or 1 (anomalous)")
            labels = labels.astype(np.uint8)
            self.labelled = True
        ok = np.isfinite(values).all(axis=1)
        if not ok.all():
            if not self.drop_nonfinite:
                raise BadInput("non_finite", f"row {self.rows + int(np.argmin(ok)) + 1} holds NaN, Inf or a missing "
                               "channel value (set LANDFALL_DROP_NONFINITE=true to drop such rows)")
            self.dropped_nonfinite += int((~ok).sum())
            times, values = times[ok], values[ok]
            labels = labels[ok] if labels is not None else None
            if not len(times):
                return
        steps = np.diff(times, prepend=times[0] if self._last is None else self._last)
        if (steps < 0).any():
            raise Unsorted()
        dup = np.flatnonzero(steps == 0)
        dup = dup[dup > 0] if self._last is None else dup
        if len(dup):
            raise BadInput("duplicate_timestamps", f"time {duplicates.number(times[dup[0]])} appears twice (row "
                           f"{self.rows + int(dup[0]) + 1} of the sorted series)")
        if self.max_gap is None and (self._last is not None or len(times) > 1):  # the first rows with a step
            self.max_gap = default_max_gap(times if self._last is None else np.r_[self._last, times], self.length)
        # A first chunk of one row has no step, so nothing to cut: the next chunk decides max_gap (with that row), as
        # the converter's SeriesWriter.feed does; before, the one row made it inf and no gap was ever cut.
        cuts = np.flatnonzero(steps > self.max_gap).tolist() if self.max_gap is not None else []
        lo = 0
        for cut in [*cuts, len(times)]:
            if cut > lo:
                self._append(times[lo:cut], values[lo:cut], None if labels is None else labels[lo:cut])
                self._score(self.rows)
            if cut < len(times):
                yield from self._close()
            lo = cut
        self._last = float(times[-1])
        end = self.rows - self.length if self.rows - self._seg0 >= self.length else self._seg0
        yield from self._emit(min(self._next, end))

    def finish(self) -> Iterator[Block]:
        if self.max_gap is None:  # never a step (one row at most): nothing was cut
            self.max_gap = float("inf")
        yield from self._close()
        self.truth.end()

    # -- the windows -----------------------------------------------------------------------------------------------
    def _append(self, times: np.ndarray, values: np.ndarray, labels: np.ndarray | None) -> None:
        self._t = np.concatenate([self._t, times])
        self._v = values if self._v is None else np.concatenate([self._v, values])
        if labels is not None:
            self._l = labels if self._l is None else np.concatenate([self._l, labels])
        self._acc = np.concatenate([self._acc, np.full(len(times), -np.inf if self.combine == "max" else 0.0)])
        self._cnt = np.concatenate([self._cnt, np.zeros(len(times), np.int32)])
        self.rows += len(times)

    def _score(self, end: int, tail: bool = False) -> None:
        """Scores the segment's windows that end by row ``end``; with ``tail``, one more ending at ``end`` when the
        stride left rows after the last."""
        if end - self._seg0 < self.length:
            return
        starts = np.arange(self._next, end - self.length + 1, self.stride, dtype=np.int64)
        if tail:
            last = self._seg0 + (end - self.length - self._seg0) // self.stride * self.stride  # the last regular start
            if last + self.length < end:
                starts = np.append(starts, end - self.length)
        if not len(starts):
            return
        steps = np.arange(self.length, dtype=np.int64)
        for lo in range(0, len(starts), 4096):
            part = starts[lo:lo + 4096]
            index = (part - self._b0)[:, None] + steps[None, :]
            errors = np.asarray(self.errors(self._v[index]), np.float64)  # type: ignore[index]
            rows = errors if errors.ndim == 2 else None  # each window row's own error, [n, length]
            if rows is not None:
                errors = rows.mean(axis=1)  # a window's error is the mean of its rows'
            if self.combine == ROW:
                if rows is None:
                    raise ValueError(f"combine {ROW!r} needs each window row's error: errors of shape [n, length]")
                np.add.at(self._acc, index, rows)
            elif self.combine == "max":
                np.maximum.at(self._acc, index, errors[:, None])
            else:
                np.add.at(self._acc, index, errors[:, None])
            np.add.at(self._cnt, index, 1)
            self.windows += len(part)
            if self.on_errors is not None:
                self.on_errors(errors)
        self._next = max(self._next, int(starts[-1]) + self.stride)

    def _close(self) -> Iterator[Block]:
        """The segment being read ends at the rows read so far (a gap, or the end of the series)."""
        self._score(self.rows, tail=True)
        yield from self._emit(self.rows)
        self.found.end()
        self._seg0 = self._next = self.rows

    def _emit(self, upto: int) -> Iterator[Block]:
        n = upto - self._b0
        if n <= 0:
            return
        cnt = self._cnt[:n]
        with np.errstate(invalid="ignore", divide="ignore"):
            scores = np.where(cnt > 0, self._acc[:n] / np.maximum(cnt, 1) if self.combine != "max" else self._acc[:n],
                              np.nan)
        flags = scores > self.threshold  # NaN compares False
        labels = self._l[:n] if self._l is not None else None
        block = Block(self._b0, self._t[:n], scores, flags, labels)
        self.flagged += int(flags.sum())
        self.found.add(block, flags, scores)
        if labels is not None:
            truth = labels.astype(bool)
            self.tp += int((flags & truth).sum())
            self.fp += int((flags & ~truth).sum())
            self.fn += int((~flags & truth).sum())
            self.truth.add(block, truth, None)
            if self._ranked_rows + n <= RANKED_ROWS:  # kept for the threshold-free figures, up to a bound
                self._ranked.append((scores.astype(np.float32), labels.astype(np.uint8)))
            self._ranked_rows += n
        self._t, self._acc, self._cnt = self._t[n:], self._acc[n:], self._cnt[n:]
        self._v = self._v[n:] if self._v is not None else None
        self._l = self._l[n:] if self._l is not None else None
        self._b0 = upto
        yield block

    # -- results ---------------------------------------------------------------------------------------------------
    @property
    def ranges(self) -> list[Range]:
        return self.found.done

    def metrics(self) -> dict[str, Any] | None:
        """Point-wise and range-based precision and recall at the threshold (None: the series had no labels)."""
        if not self.labelled:
            return None
        return {"positives": self.tp + self.fn, "flagged": self.tp + self.fp,
                "point": {"tp": self.tp, "fp": self.fp, "fn": self.fn, "precision": _ratio(self.tp, self.tp + self.fp),
                          "recall": _ratio(self.tp, self.tp + self.fn)},
                "range": range_metrics(self.found.done, self.truth.done), **self.ranking()}

    def ranking(self) -> dict[str, Any]:
        """The threshold-free figures of the rows' scores against their labels: ``average_precision`` and ``vus_pr``
        (``landfall.core.rules.vus``, buffers of 0 to the window length; rows no window covers rank lowest); null, with
        ``ranking_note``, past ``RANKED_ROWS`` rows or without a positive row."""
        if self._ranked_rows > RANKED_ROWS or not self._ranked:
            why = (f"{self._ranked_rows:,} rows: over the {RANKED_ROWS:,} kept for ranking" if self._ranked_rows
                   else "no labelled row scored")
            return {"average_precision": None, "vus_pr": None, "ranking_note": why}
        s = np.concatenate([r[0] for r in self._ranked]).astype(np.float64)
        y = np.concatenate([r[1] for r in self._ranked])
        if not y.any():
            return {"average_precision": None, "vus_pr": None, "ranking_note": "no row labelled anomalous"}
        finite = np.isfinite(s)
        s = np.where(finite, s, (s[finite].min() - 1.0) if finite.any() else 0.0)  # unscored rows rank lowest
        return {"average_precision": vus.average_precision(y, s), "vus_pr": vus.vus_pr(y, s, self.length),
                "ranking_note": None}


def range_metrics(found: list[Range], truth: list[Range]) -> dict[str, Any]:
    """Existence-based range precision and recall (module docstring) of ``found`` against ``truth`` (sorted runs)."""
    def hits(a: list[Range], b: list[Range]) -> int:
        n, j = 0, 0
        for r in a:
            while j < len(b) and b[j].last < r.first:
                j += 1
            n += j < len(b) and b[j].first <= r.last
        return n

    return {"found": len(found), "labelled": len(truth), "precision": _ratio(hits(found, truth), len(found)),
            "recall": _ratio(hits(truth, found), len(truth))}


def _ratio(a: int, b: int) -> float | None:
    return a / b if b else None
