"""Series arrivals (a dataset whose spec sets ``shape.window`` and ``arrival.series``): a time column and one column
per channel, as a sensor exports it, stored once as the series itself (``landfall.core.rules.series_windows`` says
how), never as windows. ``landfall.arrival.converter.convert`` hands such an arrival here.

Formats: CSV and CSV.gz with a header row naming the columns (read with pyarrow's streaming CSV reader, channels as
float64; the CSV module's dialect rules of ``csvfile`` do not apply: comma-separated, UTF-8, an optional BOM), and
Parquet (read in batches of ``chunk_instances`` rows, channels of any integer or float type). Time values: ISO-8601
strings (``2024-01-01T00:00:00``, a space for the ``T``, a ``Z`` or an offset; naive ones are read as UTC) become
seconds since the epoch; numbers (epoch seconds or milliseconds, plain integer counters) are taken as they are, in
their own units, and ``max_gap`` is in those units. A Parquet timestamp column is read as seconds.

Decisions:
- **Sorted within an arrival.** Rows are streamed while the time column increases; at the first row out of order the
  attempt is abandoned and the arrival is read again whole, sorted in memory (stable), when its rows fit in 40 % of
  ``LANDFALL_MEMORY_LIMIT_MIB`` (else ``unsorted_too_large``: sort the export, or cut it into files). A sorted file of
  any size streams with the converter's bounded memory. The manifest records ``sorted: false`` when it sorted.
- **Duplicate timestamps** follow the spec's ``arrival.series.duplicate_times`` (``landfall.core.rules.duplicates``): by
  default the rows of one time become one row, their mean, counted in the manifest's ``series.merged_rows``;
  ``reject`` refuses the arrival (``duplicate_timestamps``), naming the time as the file wrote it. A time repeated
  exactly where two ranged tasks' shares meet splits the series there, as a gap does (no window holds both rows).
- **Gaps.** A step longer than ``max_gap`` ends a segment (no window spans it); unset, ``max_gap`` is 3 x the median
  step of the arrival's first chunk of stored rows that has a step (``SeriesWriter.feed``; ``head_max_gap`` takes it
  alike for ranged tasks); for an irregularly sampled series whose cuts would drop more than a quarter of
  those rows, raised until they drop at most 5 % (``landfall.core.rules.series_windows.default_max_gap``; recorded in
  the manifest). A
  segment shorter than one window is dropped (its rows counted in ``dropped_rows``); an arrival whose every segment is,
  while it has enough rows, is ``all_gaps``; an arrival with fewer rows than one window is ``too_short``.
- **Windows never span two arrivals**: each arrival is its own series (arrivals may overlap in time, come late or be
  retracted), so a file boundary costs at most ``length - 1`` rows' windows.
- **Non-finite values** are ``non_finite``, or with ``LANDFALL_DROP_NONFINITE=true`` the row is dropped, which makes
  a gap if it is longer than ``max_gap``. A chunk that drops to nothing (every row non-finite, or the merger's one-row
  last chunk of a file whose last row is) adds nothing and ends no segment (issue #54: it raised ``IndexError``); an
  arrival left with fewer rows than a window is ``too_short``, saying how many rows were dropped.
- Statistics (``RunningStats``) are those of the stored rows, per channel.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import logging
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from landfall import __version__
from landfall.arrival import commit, format_registry, formats, ranges, screen
from landfall.arrival.config import ConverterConfig
from landfall.arrival.stats import RunningStats
from landfall.core.contracts import records
from landfall.core.contracts.messages import Manifest, Source
from landfall.core.errors import BadInput, TemporaryError
from landfall.core.quality.profile import Profile
from landfall.core.rules import duplicates
from landfall.core.rules import series_windows as windows
from landfall.core.services.storage import Storage, join

log = logging.getLogger("landfall.arrival")
SORT_SHARE = 0.4  # of memory_limit_mib: an unsorted arrival is sorted in memory up to this
CSV_BLOCK = 4 << 20
Chunk = tuple[np.ndarray, np.ndarray]  # (times float64 [n], values float32 [n, C])


class _Unsorted(Exception):
    """The arrival is not sorted by time: read it again, whole, and sort it."""


# -- reading -------------------------------------------------------------------------------------------------
def _columns(names: list[str], cfg: ConverterConfig) -> list[str]:
    """The channel columns of a file with these ``names``, checked against the spec."""
    if cfg.series_time_column not in names:
        raise BadInput("missing_time_column", f"no time column {cfg.series_time_column!r} among the columns "
                       f"{names[:12]}")
    if cfg.series_channels:
        missing = [c for c in cfg.series_channels if c not in names]
        if missing:
            raise BadInput("wrong_channel_count", f"channels {missing[:5]} named by the spec are not in the file "
                           f"(columns {names[:12]})")
        channels = list(cfg.series_channels)
    else:
        channels = [n for n in names if n != cfg.series_time_column and n not in cfg.series_drop_columns]
    if len(channels) != cfg.features:
        raise BadInput("wrong_channel_count", f"{len(channels)} channels {channels[:12]}, the spec's series has "
                       f"{cfg.features} (shape.features)")
    return channels


def _times(column: pa.Array | pa.ChunkedArray, first_row: int) -> np.ndarray:
    """A time column as float64: numbers as they are, timestamps and ISO-8601 text as seconds since the epoch."""
    kind = column.type
    if pa.types.is_timestamp(kind) or pa.types.is_date(kind):
        values = pc.cast(column, pa.timestamp("ns", tz=getattr(kind, "tz", None))).cast(pa.int64())
        out = values.to_numpy(zero_copy_only=False).astype(np.float64) / 1e9
    elif pa.types.is_integer(kind) or pa.types.is_floating(kind):
        out = pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False)
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        out = None
        for target in (pa.float64(), pa.timestamp("ns"), pa.timestamp("ns", tz="UTC")):
            try:
                parsed = pc.cast(column, target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                continue
            out = parsed.to_numpy(zero_copy_only=False) if target == pa.float64() else \
                parsed.cast(pa.int64()).to_numpy(zero_copy_only=False).astype(np.float64) / 1e9
            break
        if out is None:
            bad = next((i for i, v in enumerate(column.to_pylist()) if not _parses(v)), 0)
            raise BadInput("unparseable_time", f"time value {str(column[bad])[:60]!r} in row {first_row + bad} is "
                           "neither a number nor an ISO-8601 timestamp")
    else:
        raise BadInput("unparseable_time", f"the time column holds {kind}, not timestamps or numbers")
    out = np.asarray(out, dtype=np.float64)
    if column.null_count or not np.isfinite(out).all():
        bad = int(np.argmin(np.isfinite(out)))
        raise BadInput("unparseable_time", f"row {first_row + bad} has no time (an empty or non-finite time value)")
    return out


def _parses(value: Any) -> bool:
    for target in (pa.float64(), pa.timestamp("ns"), pa.timestamp("ns", tz="UTC")):
        try:
            pc.cast(pa.array([value], pa.string()), target)
            return True
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
    return False


def _values(batch: pa.RecordBatch | pa.Table, channels: list[str], extra: Sequence[str] = ()) -> np.ndarray:
    names = [*channels, *extra]
    out = np.empty((batch.num_rows, len(names)), dtype=np.float32)
    for j, name in enumerate(names):
        col = batch.column(name)
        if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_null(col.type)):
            what = "channel" if j < len(channels) else "column"
            raise BadInput("non_numeric", f"{what} {name!r} holds {col.type}, not numbers")
        with np.errstate(over="ignore"):
            out[:, j] = pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False)
    return out


def _csv_names(stream: Any) -> list[str]:
    head = stream.readline(16 << 20)
    try:
        names = next(csv.reader([head.decode("utf-8-sig")]))
    except StopIteration:
        raise BadInput("empty_file", "the file holds no header row") from None
    except UnicodeDecodeError:
        raise BadInput("bad_encoding", "the header row is not UTF-8") from None
    return [n.strip() for n in names]


def csv_chunks(stream: Any, cfg: ConverterConfig, extra: Sequence[str] = ()) -> Iterator[Chunk]:
    names = _csv_names(stream)
    yield from _csv_rows(stream, names, _columns(names, cfg), cfg, extra)


def _csv_rows(stream: Any, names: list[str], channels: list[str], cfg: ConverterConfig,
              extra: Sequence[str] = ()) -> Iterator[Chunk]:
    """The rows of a CSV stream after its header (``names``), in chunks."""
    _check_extra(names, extra)
    types = {c: pa.float64() for c in [*channels, *extra]} | {cfg.series_time_column: pa.string()}
    try:
        reader = pacsv.open_csv(
            stream, read_options=pacsv.ReadOptions(column_names=names, block_size=CSV_BLOCK),
            convert_options=pacsv.ConvertOptions(column_types=types,
                                                 include_columns=[cfg.series_time_column, *channels, *extra]))
        seen = 0
        for batch in reader:
            if batch.num_rows:
                yield _times(batch.column(cfg.series_time_column), seen + 1), _values(batch, channels, extra)
                seen += batch.num_rows
    except pa.ArrowInvalid as exc:
        text = str(exc)
        if "conversion error to double" in text:
            raise BadInput("non_numeric", f"a channel value is not a number: {text[:300]}") from None
        raise BadInput("corrupt_csv", f"not readable as CSV: {text[:300]}") from None


def _check_extra(names: list[str], extra: Sequence[str]) -> None:
    missing = [c for c in extra if c not in names]
    if missing:
        raise BadInput("missing_column", f"no column {missing[0]!r} among the columns {names[:12]}")


def _parquet_names(pf: pq.ParquetFile, cfg: ConverterConfig) -> list[str]:
    """A Parquet series' columns, less an index pandas stored beside them unless it is the time column."""
    return formats.data_columns(pf.schema_arrow, keep=(cfg.series_time_column,))


def parquet_chunks(fh: BinaryIO, cfg: ConverterConfig, extra: Sequence[str] = ()) -> Iterator[Chunk]:
    try:
        pf = pq.ParquetFile(fh)
        names = _parquet_names(pf, cfg)
        channels = _columns(names, cfg)
        _check_extra(names, extra)
        for batch in pf.iter_batches(batch_size=cfg.chunk_instances,
                                     columns=[cfg.series_time_column, *channels, *extra]):
            yield _times(batch.column(cfg.series_time_column), 0), _values(batch, channels, extra)
    except (pa.ArrowInvalid, OSError) as exc:
        raise BadInput("corrupt_parquet", f"not a readable Parquet file: {str(exc)[:300]}") from None


def chunks(fmt: str, fh: BinaryIO, size: int, cfg: ConverterConfig, extra: Sequence[str] = ()) -> Iterator[Chunk]:
    """The arrival's (times, values) in file order, in bounded chunks. ``extra`` columns (numeric: a label, for
    ``landfall score``) follow the channels in ``values``. The format's reader (``format_registry``) reads them."""
    if size == 0:
        raise BadInput("empty_file", "the file is empty")
    return format_registry.series_reader(fmt).chunks(formats.guarded(fh), cfg, extra)


def header(fmt: str, fh: BinaryIO, cfg: ConverterConfig) -> tuple[list[str], bool]:
    """A series file's column names, and whether its time column holds timestamps (ISO-8601 text or a Parquet
    timestamp) rather than numbers: the first data row decides. Reads the header (and one row) only."""
    names, value = format_registry.series_reader(fmt).head(formats.guarded(fh), cfg)
    if value is None or isinstance(value, bool):
        return names, bool(value)
    try:
        float(value)
        return names, False
    except (TypeError, ValueError):
        return names, True


def csv_head(stream: Any, cfg: ConverterConfig) -> tuple[list[str], Any]:
    """A CSV series' header names and its first row's time cell (None without one)."""
    try:
        names = _csv_names(stream)
        row = next(csv.reader([stream.readline(16 << 20).decode("utf-8-sig", "replace")]), [])
    except (OSError, EOFError) as exc:
        raise BadInput("corrupt_gzip", f"not a readable gzip stream: {exc}") from None
    at = names.index(cfg.series_time_column) if cfg.series_time_column in names else None
    return names, (row[at] if at is not None and at < len(row) else None)


def parquet_head(src: Any, cfg: ConverterConfig) -> tuple[list[str], Any]:
    """A Parquet series' column names and what its time column says: True for a timestamp or date type, False for
    numbers, else (text) its first value."""
    try:
        pf = pq.ParquetFile(src)
        names = _parquet_names(pf, cfg)
        if cfg.series_time_column not in names:
            return names, False
        kind = pf.schema_arrow.field(cfg.series_time_column).type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            return names, pa.types.is_timestamp(kind) or pa.types.is_date(kind)
        first = next(pf.iter_batches(batch_size=1, columns=[cfg.series_time_column]), None)
        return names, (first.column(0)[0].as_py() if first is not None and first.num_rows else None)
    except (pa.ArrowInvalid, OSError) as exc:
        raise BadInput("corrupt_parquet", f"not a readable Parquet file: {str(exc)[:300]}") from None


class SeriesWriter:
    """Cuts sorted rows into segments at gaps and writes shards of whole windows
    (``landfall.core.rules.series_windows``)."""

    def __init__(self, storage: Storage, tmp_prefix: str, cfg: ConverterConfig, max_gap: float | None):
        self.storage, self.tmp_prefix, self.cfg = storage, tmp_prefix, cfg
        self.length, self.stride, self.channels = cfg.timesteps, cfg.window_stride, cfg.features
        self.max_gap = max_gap
        self.target = max(cfg.shard_target_bytes // (4 * self.channels), windows.MIN_SHARD_WINDOWS * self.length)
        self.stats = RunningStats(self.channels)
        # landfall.core.quality.profile, of the stored rows
        self.sketch = Profile(self.channels) if cfg.profile else None
        self.segments: list[windows.Segment] = []  # closed, kept
        self.open: list[Any] | None = None  # [row, rows, start, end] of the segment being read
        self.pending: list[np.ndarray] = []  # its rows while it is shorter than a window
        self.buffer: list[np.ndarray] = []  # stored rows from ``buf0`` on, not yet written
        self.buf0 = 0
        self.kept = 0  # stored rows so far
        self.rows = 0  # rows read
        self.dropped = 0  # rows in segments too short for a window
        self.dropped_nonfinite = 0
        self.next_window = 0
        self.last: float | None = None
        self.done: list[tuple[str, int, int, str]] = []

    def feed(self, times: np.ndarray, values: np.ndarray) -> None:
        if not len(times):
            return
        ok = np.isfinite(values).all(axis=1)
        if not ok.all():
            if not self.cfg.drop_nonfinite:
                raise BadInput("non_finite", f"row {self.rows + int(np.argmin(ok)) + 1} holds NaN, Inf or a missing "
                               "channel value (set LANDFALL_DROP_NONFINITE=true to drop such rows)")
            self.dropped_nonfinite += int((~ok).sum())
            if self.sketch is not None:
                self.sketch.dropped(values[~ok])
            times, values = times[ok], values[ok]
            if not len(times):  # every row of the chunk dropped: it adds nothing, and ends no segment (#54)
                return
        self.rows += len(times)
        steps = np.diff(times, prepend=times[0] if self.last is None else self.last)
        if (steps < 0).any():
            raise _Unsorted()
        dup = np.flatnonzero(steps == 0)
        dup = dup[dup > 0] if self.last is None else dup  # the first row of the arrival has no step
        if len(dup):  # never, behind a duplicates.Merger: a writer fed by anything else still refuses them
            raise BadInput("duplicate_timestamps", f"time {duplicates.number(times[dup[0]])} appears twice (row "
                           f"{self.rows - len(times) + int(dup[0]) + 1} of the sorted series)")
        if self.sketch is not None:  # every step, the first row's (none) left out
            self.sketch.update_steps(steps if self.last is not None else steps[1:])
        if self.max_gap is None and (self.last is not None or len(times) > 1):  # the first rows with a step
            self.max_gap = windows.default_max_gap(times if self.last is None else np.r_[self.last, times],
                                                   self.length)
        # A first chunk of one row has no step yet, so nothing to cut: the next chunk decides max_gap (with it).
        cuts = np.flatnonzero(steps > self.max_gap) if self.max_gap is not None else np.zeros(0, np.int64)
        lo = 0
        for cut in [*cuts.tolist(), len(times)]:
            for at in range(lo, cut, self.target):  # a shard is cut at most every ``target`` rows
                self._append(times[at:min(cut, at + self.target)], values[at:min(cut, at + self.target)])
            if cut < len(times):
                self._close()
            lo = cut
        self.last = float(times[-1])

    def feed_ahead(self, rows: Iterable[Chunk]) -> None:
        """A ranged task's look past its share: at most ``length - 1`` rows of the next share as that share stores
        them (its non-finite rows dropped under ``drop_nonfinite``, its repeated times merged by the caller's
        ``duplicates.Merger``), appended to the open segment up to the first gap (or out-of-order row, or non-finite
        one the spec does not drop), so every window that starts in this share is whole; they are not counted as
        this share's rows (the next task reads them as its own). ``rows`` is read only as far as needed."""
        if self.last is None:
            return
        want, last = self.length - 1, self.last
        if want < 1:
            return
        for times, values in rows:
            ok = np.isfinite(values).all(axis=1)
            stop = False
            if not ok.all():
                if self.cfg.drop_nonfinite:  # as the next share drops them: a chunk of them adds nothing
                    times, values = times[ok], values[ok]
                else:  # the next share refuses the arrival: nothing past the first
                    stop, end = True, int(np.argmin(ok))
                    times, values = times[:end], values[:end]
            times, values = times[:want], values[:want]
            steps = np.diff(times, prepend=last)
            bad = (steps <= 0) | (steps > self.max_gap)  # type: ignore[operator]
            take = int(np.argmax(bad)) if bad.any() else len(times)
            if take:
                self._append(times[:take], values[:take])
                want -= take
                last = float(times[take - 1])
            if stop or take < len(times) or want <= 0:
                break

    def _append(self, times: np.ndarray, values: np.ndarray) -> None:
        if self.open is None:
            self.open = [self.kept, 0, float(times[0]), float(times[0])]
        seg = self.open
        seg[3] = float(times[-1])
        if seg[1] < self.length:  # not yet a window long: held aside, dropped if the segment ends short
            self.pending.append(values)
            held = sum(len(p) for p in self.pending)
            if held < self.length:
                seg[1] = held
                return
            values = np.concatenate(self.pending)
            self.pending = []
            seg[1] = 0
        self.stats.update(values[:, None, :])
        if self.sketch is not None:
            self.sketch.update_rows(values)
        skip = max(0, self.buf0 - self.kept)  # stride > length: rows before the next window's start are never read
        if skip < len(values):
            self.buffer.append(values[skip:])
        seg[1] += len(values)
        self.kept += len(values)
        if self.kept - self.buf0 >= self.target:
            self._flush()

    def _close(self) -> None:
        if self.open is not None:
            row, rows, start, end = self.open
            if rows >= self.length and not self.pending:
                self.segments.append(windows.Segment(row, rows, windows.windows_in(rows, self.length, self.stride),
                                                     start, end))
            else:
                self.dropped += sum(len(p) for p in self.pending)
            self.pending, self.open = [], None

    def _all_segments(self) -> list[windows.Segment]:
        out = list(self.segments)
        if self.open is not None and not self.pending:
            row, rows, start, end = self.open
            out.append(windows.Segment(row, rows, windows.windows_in(rows, self.length, self.stride), start, end))
        return out

    def _flush(self) -> None:
        segs = self._all_segments()
        layout = windows.Layout(self.length, self.stride, tuple(s for s in segs if s.windows))
        total = layout.windows
        if total > self.next_window:
            w0, w1 = self.next_window, total
            r0, r1 = int(layout.starts([w0])[0]), int(layout.starts([w1 - 1])[0]) + self.length
            rows = np.concatenate(self.buffer) if len(self.buffer) != 1 else self.buffer[0]
            self._write(rows[r0 - self.buf0:r1 - self.buf0], w1 - w0)
            self.next_window = w1
            self.buffer = [rows]
        if not self.buffer:
            return
        # Keep only the rows a later window may need: from the open segment's next window start on.
        seg = self.open
        keep = self.kept if seg is None or self.pending else seg[0] + windows.windows_in(
            seg[1], self.length, self.stride) * self.stride
        rows = np.concatenate(self.buffer)
        cut = min(max(keep - self.buf0, 0), len(rows))
        self.buffer = [rows[cut:]] if cut < len(rows) else []
        self.buf0 = max(self.buf0 + cut, keep)

    def _write(self, rows: np.ndarray, count: int) -> None:
        uri = join(self.tmp_prefix, f"part-{len(self.done):05d}{records.SHARD_SUFFIX}")
        with self.storage.open_write(uri) as out:
            full = len(rows) // windows.BLOCK_ROWS * windows.BLOCK_ROWS
            if full:
                framer = records.RecordFramer((windows.BLOCK_ROWS, self.channels))
                for lo in range(0, full, 64 * windows.BLOCK_ROWS):
                    part = rows[lo:min(full, lo + 64 * windows.BLOCK_ROWS)]
                    out.write(framer.frame(part.reshape(-1, windows.BLOCK_ROWS, self.channels)))
            if full < len(rows):
                tail = rows[full:]
                out.write(records.RecordFramer(tail.shape).frame(tail[None]))
        self.done.append((uri, count, out.size, out.crc32c))

    def finish(self) -> list[windows.Segment]:
        if self.max_gap is None:  # never a step (one row at most): nothing was cut
            self.max_gap = float("inf")
        self._close()
        self._flush()
        return self.segments

    def abort(self) -> None:
        for uri, *_ in self.done:
            with contextlib.suppress(Exception):
                self.storage.delete(uri)
        self.storage.remove_empty_dir(self.tmp_prefix)


# -- ranged conversion (landfall.arrival.ranged) ---------------------------------------------------------------
@dataclasses.dataclass
class Share:
    """A ranged task's rows: ``chunks`` (its share, in file order), then ``ahead()``: the rows after it, in chunks of
    ``length - 1`` rows, read only as far as they are consumed (nothing at the end of the file)."""

    chunks: Iterator[Chunk]
    ahead: Callable[[], Iterator[Chunk]]
    where: str


def share(fmt: str, fh: BinaryIO, size: int, cfg: ConverterConfig, index: int, count: int) -> Share:
    """Task ``index`` of ``count``'s share of a series file, as its format splits it (``format_registry``): a CSV's
    lines from ``landfall.arrival.ranges``' byte split (every task reads the header from the first line), a Parquet
    file's row groups; a stream that cannot be split (``.csv.gz``) is read whole by task 0 (``whole_share``)."""
    if size == 0:
        raise BadInput("empty_file", "the file is empty")
    return format_registry.series_reader(fmt).share(fh, size, cfg, index, count)


def whole_share(read: Callable[[], Iterator[Chunk]], index: int) -> Share:
    """The share of a series file that cannot be split: all of it (``read()``) for task 0, nothing for the others."""
    if index == 0:
        return Share(read(), lambda: iter(()), "the whole file")
    return Share(iter(()), lambda: iter(()), "nothing (task 0 reads a compressed stream whole)")


def csv_share(fh: BinaryIO, size: int, cfg: ConverterConfig, index: int, count: int) -> Share:
    fh.seek(0)
    names = _csv_names(formats.guarded(fh))
    body = fh.tell()
    channels = _columns(names, cfg)
    lo, hi = ranges.split(size, index, count)
    start = body if index == 0 else max(body, ranges.after_newline(fh, lo, size))
    end = size if index == count - 1 else max(body, ranges.after_newline(fh, hi, size))

    def own() -> Iterator[Chunk]:
        if start < end:
            yield from _csv_rows(formats.guarded(ranges.Bounded(fh, start, end)), names, channels, cfg)

    def ahead() -> Iterator[Chunk]:
        """The lines after the share, ``length - 1`` at a time (rows dropped or merged may ask for more)."""
        want = cfg.timesteps - 1
        at = end
        while at < size and want >= 1:
            fh.seek(at)
            data, lines = b"", 0
            while lines < want and at + len(data) < size:
                block = fh.read(min(1 << 16, size - at - len(data)))
                if not block:
                    break
                data += block
                lines = data.count(b"\n")
            if lines >= want:
                cut = -1
                for _ in range(want):
                    cut = data.find(b"\n", cut + 1)
                data = data[: cut + 1]
            if not data:
                return
            at += len(data)
            if data.strip():
                yield from _csv_rows(io.BytesIO(data), names, channels, cfg)

    return Share(own(), ahead, f"bytes {start}..{end - 1}")


def parquet_share(fh: Any, cfg: ConverterConfig, index: int, count: int) -> Share:
    try:
        pf = pq.ParquetFile(fh)
        channels = _columns(_parquet_names(pf, cfg), cfg)
    except (pa.ArrowInvalid, OSError) as exc:
        raise BadInput("corrupt_parquet", f"not a readable Parquet file: {str(exc)[:300]}") from None
    groups = pf.num_row_groups
    g0, g1 = ranges.split(groups, index, count)
    columns = [cfg.series_time_column, *channels]

    def rows(which: list[int], size: int) -> Iterator[Chunk]:
        if not which:
            return
        try:
            for batch in pf.iter_batches(batch_size=size, row_groups=which, columns=columns):
                yield _times(batch.column(cfg.series_time_column), 0), _values(batch, channels)
        except (pa.ArrowInvalid, OSError) as exc:
            raise BadInput("corrupt_parquet", f"not a readable Parquet file: {str(exc)[:300]}") from None

    def ahead() -> Iterator[Chunk]:
        want = cfg.timesteps - 1
        return rows(list(range(g1, groups)), want) if want >= 1 else iter(())

    return Share(rows(list(range(g0, g1)), cfg.chunk_instances), ahead, f"row groups {g0}..{g1 - 1}")


def head_max_gap(fmt: str, fh: BinaryIO, size: int, cfg: ConverterConfig, stamped: bool = False) -> float:
    """``max_gap`` when the spec sets none, as the in-process conversion takes it (``SeriesWriter.feed``): from the
    first chunk of rows it stores (each time once, non-finite rows dropped under ``drop_nonfinite``) that has a step;
    a chunk that drops to nothing is passed over, and a first chunk of one row is taken with the next."""
    held: np.ndarray | None = None
    # Under ``reject`` a repeated time refuses the arrival where the conversion meets it, not here: its times are the
    # same under ``first``.
    policy = duplicates.FIRST if cfg.series_duplicate_times == duplicates.REJECT else cfg.series_duplicate_times
    for times, values in duplicates.Merger(policy, stamped).chunks(chunks(fmt, fh, size, cfg)):
        if cfg.drop_nonfinite:
            times = times[np.isfinite(values).all(axis=1)]
        if not len(times):
            continue
        if held is None and len(times) < 2:
            held = times
            continue
        return windows.default_max_gap(times if held is None else np.r_[held, times], cfg.timesteps)
    return float("inf")


def convert_share(storage: Storage, cfg: ConverterConfig, source: str, generation: int | None, size: int,
                  tmp_prefix: str, index: int, count: int,
                  stop: Callable[[], bool] = lambda: False) -> tuple[SeriesWriter, dict[str, Any]] | None:
    """Task ``index`` of ``count``: its share of a series file into shards under ``tmp_prefix`` (``SeriesWriter``,
    the task's rows numbered from 0) and what its part record says about it (``landfall.arrival.ranged_parts``
    merges the parts' segments). ``stop()`` is asked at each shard (another task rejected the arrival): None."""
    _estimated(cfg)
    fmt = formats.format_of(source)
    with storage.open_read(source, generation) as fh:
        stamped = header(fmt, fh, cfg)[1]
    max_gap = cfg.series_max_gap
    if max_gap is None:
        with storage.open_read(source, generation) as fh:
            max_gap = head_max_gap(fmt, fh, size, cfg, stamped)
    writer = SeriesWriter(storage, tmp_prefix, cfg, max_gap)
    first: float | None = None
    merger = duplicates.Merger(cfg.series_duplicate_times, stamped)
    try:
        try:
            with storage.open_read(source, generation) as fh:
                part = share(fmt, fh, size, cfg, index, count)
                for t, v in merger.chunks(part.chunks):
                    first = float(t[0]) if first is None and len(t) else first
                    done = len(writer.done)
                    writer.feed(t, v)
                    if len(writer.done) > done and stop():
                        writer.abort()
                        return None
                last = writer.last
                if writer.last is not None:
                    writer.feed_ahead(_as_stored(part.ahead(), cfg, stamped))
        except _Unsorted:
            if count > 1:
                raise BadInput("unsorted_too_large", f"the series is not sorted by time ({part.where} of the file): "
                               f"a series converted in {count} ranged tasks must be sorted; sort it by time, or "
                               "upload it in smaller files") from None
            writer.abort()  # one task: sorted in memory, as in-process
            writer = SeriesWriter(storage, tmp_prefix, cfg, max_gap)
            merger = duplicates.Merger(cfg.series_duplicate_times, stamped)
            for t, v in merger.chunks(sorted_whole(fmt, storage, source, generation, size, cfg)):
                first = float(t[0]) if first is None and len(t) else first
                writer.feed(t, v)
            last = writer.last
        segments = writer.finish()
    except BaseException:
        writer.abort()
        raise
    return writer, {"rows": writer.rows + merger.merged, "stored_rows": writer.kept, "dropped_rows": writer.dropped,
                    "segments": [s.to_list() for s in segments], "first": first, "last": last,
                    "max_gap": writer.max_gap, "sorted": True, "merged_rows": merger.merged, "stamped": stamped}


def _as_stored(rows: Iterator[Chunk], cfg: ConverterConfig, stamped: bool) -> Iterator[Chunk]:
    """The rows past a share with each time once, as the next share's ``duplicates.Merger`` makes them (it starts at
    the same row); under ``reject`` a repeated time stops the look there instead (the next share refuses it)."""
    if cfg.series_duplicate_times == duplicates.REJECT:
        return rows
    return duplicates.Merger(cfg.series_duplicate_times, stamped).chunks(rows)


def merge_parts(parts: list[dict[str, Any]], cfg: ConverterConfig) -> dict[str, Any]:
    """The manifest's series section from the tasks' parts (in task order): each part's segments, its rows numbered
    after the earlier parts' stored rows. A part's times must all come after the previous part's (a series split
    into ranged tasks is sorted): else ``unsorted_too_large`` or ``duplicate_timestamps``."""
    segments: list[list[Any]] = []
    base, last, rows = 0, None, 0
    for part in parts:
        sec = part["series"]
        rows += sec["rows"]
        if sec["first"] is None:
            continue
        if last is not None and sec["first"] <= last:
            stamped = bool(sec.get("stamped"))
            if sec["first"] == last and cfg.series_duplicate_times == duplicates.REJECT:
                raise BadInput("duplicate_timestamps", f"time {duplicates.shown_time(last, stamped)} appears twice "
                               f"(where task {part['task']}'s share of the file begins)")
            if sec["first"] < last:
                raise BadInput("unsorted_too_large", f"the series is not sorted by time: task {part['task']}'s share "
                               f"begins at {duplicates.shown_time(sec['first'], stamped)}, before the previous "
                               f"share's last time {duplicates.shown_time(last, stamped)}; a series converted in "
                               "ranged tasks must be sorted")
        segments += [[r + base, n, w, a, b] for r, n, w, a, b in sec["segments"]]
        base += sec["stored_rows"]
        if sec["last"] is not None:  # a share whose rows all dropped leaves the order to the share before it
            last = sec["last"]
    if not segments:
        if rows < cfg.timesteps:
            raise BadInput("too_short", f"{rows} rows{_dropped(sum(int(p['dropped']) for p in parts))}, fewer than "
                           f"one window of {cfg.timesteps}")
        raise BadInput("all_gaps", f"{rows} rows, but no run of {cfg.timesteps} rows without a step longer than "
                       f"max_gap={parts[0]['series']['max_gap']:g}: every window would span a gap")
    return {"time_column": cfg.series_time_column, "stride": cfg.window_stride,
            "max_gap": parts[0]["series"]["max_gap"], "rows": rows, "stored_rows": base,
            "dropped_rows": sum(p["series"]["dropped_rows"] for p in parts), "sorted": True, "segments": segments,
            "tasks": len(parts), "duplicate_times": cfg.series_duplicate_times,
            "merged_rows": sum(int(p["series"].get("merged_rows", 0)) for p in parts)}


# -- the conversion -------------------------------------------------------------------------------------------
def _dropped(rows: int) -> str:
    """What a refusal for too few rows says of the rows ``drop_nonfinite`` dropped (they are not counted)."""
    return f" left after dropping {rows} with a non-finite or missing value (arrival.drop_nonfinite)" if rows else ""


def _estimated(cfg: ConverterConfig) -> None:
    """A window still ``auto`` (``landfall.arrival.autowindow`` has not written it yet) cuts nothing: retried."""
    if cfg.window_auto:
        raise TemporaryError("the dataset's shape.window.length is auto and not estimated yet (its first arrival "
                             "writes it into the spec); retried")


def sorted_whole(fmt: str, storage: Storage, source_uri: str, generation: int | None, size: int,
                 cfg: ConverterConfig, extra: Sequence[str] = ()) -> Iterator[Chunk]:
    """The arrival read whole and sorted by time (stable), in chunks: for an arrival that is not sorted."""
    budget = int(cfg.memory_limit_mib * 2**20 * SORT_SHARE)
    times, values, held = [], [], 0
    with storage.open_read(source_uri, generation) as fh:
        for t, v in chunks(fmt, fh, size, cfg, extra):
            held += t.nbytes + v.nbytes
            if held > budget:
                raise BadInput("unsorted_too_large", f"the series is not sorted by time and holds more than "
                               f"{budget >> 20} MiB of rows (40% of LANDFALL_MEMORY_LIMIT_MIB), more than the "
                               "converter sorts in memory: sort it by time, or upload it in smaller files")
            times.append(t)
            values.append(v)
    t = np.concatenate(times)
    v = np.concatenate(values)
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    step = max(1, cfg.chunk_instances)
    for lo in range(0, len(t), step):
        yield t[lo:lo + step], v[lo:lo + step]


def convert(source_uri: str, out_prefix: str, dataset: str, cfg: ConverterConfig, storage: Storage, *,
            arrival_id: str | None = None, generation: int | None = None, tmp_prefix: str | None = None,
            progress: Any = None) -> Manifest:
    """A series arrival into shards of whole windows and a manifest (written last, create-only)."""
    _estimated(cfg)
    fmt = formats.format_of(source_uri)
    info = storage.stat(source_uri, generation)
    tmp = tmp_prefix or join(out_prefix, f"_tmp-{uuid.uuid4().hex[:12]}")
    in_order = True
    writer = SeriesWriter(storage, tmp, cfg, cfg.series_max_gap)
    with storage.open_read(source_uri, generation) as fh:
        stamped = header(fmt, fh, cfg)[1] if info.size else False
    merger = duplicates.Merger(cfg.series_duplicate_times, stamped)
    try:
        try:
            with storage.open_read(source_uri, generation) as fh:
                for t, v in merger.chunks(chunks(fmt, fh, info.size, cfg)):
                    writer.feed(t, v)
        except _Unsorted:
            writer.abort()
            in_order = False
            writer = SeriesWriter(storage, tmp, cfg, cfg.series_max_gap)
            merger = duplicates.Merger(cfg.series_duplicate_times, stamped)
            for t, v in merger.chunks(sorted_whole(fmt, storage, source_uri, generation, info.size, cfg)):
                writer.feed(t, v)
        segments = writer.finish()
        if not segments:
            if writer.rows < cfg.timesteps:
                raise BadInput("too_short", f"{writer.rows} rows{_dropped(writer.dropped_nonfinite)}, fewer than one "
                               f"window of {cfg.timesteps}")
            raise BadInput("all_gaps", f"{writer.rows} rows, but no run of {cfg.timesteps} rows without a step "
                           f"longer than max_gap={writer.max_gap:g}: every window would span a gap")
        sketch = None if writer.sketch is None else writer.sketch.finish(writer.stats.to_dict())
        checks = screen.screen(storage, out_prefix, cfg, sketch)
    except BaseException:
        writer.abort()
        raise
    shards = commit.publish_shards(storage, writer.done, out_prefix, tmp)
    bucket, _, name = source_uri[5:].partition("/") if source_uri.startswith("gs://") else ("", "", source_uri)
    layout = windows.Layout(cfg.timesteps, cfg.window_stride, tuple(segments))
    manifest = Manifest(
        dataset=dataset, arrival_id=arrival_id or out_prefix.rstrip("/").rsplit("/", 1)[-1],
        source=Source(bucket=bucket, name=name, generation=info.generation, size=info.size, crc32c=info.crc32c),
        shape=list(cfg.shape), count=layout.windows, shards=shards, stats=writer.stats.result(),
        dropped_nonfinite=writer.dropped_nonfinite, converter_version=__version__,
        spec_generation=cfg.spec_generation,
        series={"time_column": cfg.series_time_column, "stride": cfg.window_stride, "max_gap": writer.max_gap,
                "rows": writer.rows + merger.merged, "stored_rows": writer.kept, "dropped_rows": writer.dropped,
                "sorted": in_order, "segments": [s.to_list() for s in segments],
                "duplicate_times": cfg.series_duplicate_times, "merged_rows": merger.merged}, checks=checks)
    if merger.merged:
        log.warning(f"merged {merger.merged:,} rows of repeated times into the rows they repeat "
                    f"(arrival.series.duplicate_times: {cfg.series_duplicate_times})",
                    extra={"fields": {"source": source_uri, "merged_rows": merger.merged}})
    return commit.commit_manifest(storage, join(out_prefix, "manifest.json"), manifest)
