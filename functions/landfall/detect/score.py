"""Scoring a file or an arrival with a model: what ``landfall score`` prints and what the scorer publishes.

Two kinds, by the dataset's spec:

- **series** (``score_series``): the series file (CSV, CSV.gz or Parquet; local or gs://, at a pinned generation when
  given) is read as the converter reads a series arrival (``landfall.arrival.series``: the spec's time column and
  channels, ISO-8601 or numeric times, sorted in memory when it is not), windowed with the spec's window (at
  ``stride``, default the spec's stride) without crossing a gap longer than ``max_gap``, every window scored with the
  model (``core.scoring.Scorer``: its reconstruction MSE, each feature in its ``error_scale``), and the windows'
  errors combined into a score per row of the time-sorted series (``landfall.detect.located``: the mean of the
  windows covering it, ``combine="max"``, or ``combine="row"``, the mean of the row's own error in each, from the
  scorer's ``row_errors``; the rows of one time merged first, by the spec's ``duplicate_times``, and non-finite rows
  dropped under ``LANDFALL_DROP_NONFINITE``, as the converter stores them). Writes ``out`` with **one row per data
  row of the file, in the file's order** (issue #55: a user's rows and labels line up with the scores): ``row`` (the
  row's 0-based index among the file's data rows), ``time`` (its time column's value; seconds since the epoch for
  ISO-8601 times), ``score`` (its time's score: rows merged into one time each carry that time's; NaN where no
  window covers the time, or where the row's time has no row in the series, its rows dropped as non-finite),
  ``anomaly`` (score above the threshold) and, when the file has a label column, ``label`` (the row's own, as the
  file has it). Returns the summary (``landfall.series_scores/v1``): ``rows`` (the file's data rows, the rows of
  ``out``), ``series_rows`` (the rows of the time-sorted series scored), ``merged_rows`` (rows folded into
  another row of their time), ``dropped_nonfinite`` (rows left without a score because their time's row was not
  finite), ``anomalies`` (rows of ``out`` flagged), every anomalous range (start, end, peak time and peak score;
  ``*_at`` as ISO-8601 for timestamped series; ``first_row``, ``last_row`` and ``peak_row`` rows of the file, as
  ``out``'s ``row``: its first and last row and the first at the peak's time, ``rows`` how many of the file's rows
  it holds) and, with labels, point-wise and range-based precision and recall at the threshold, AP and VUS-PR:
  these are figures of the time-sorted series, the order a window reads (one sample per time, labelled as
  ``duplicate_times`` merges its rows: ``mean`` anomalous when any of them is, ``first``/``last`` that row's).
  The label column is ``label``, else the first of the spec's ``verdict.labelled.label``, ``label`` and
  ``is_anomaly`` that the file has and that is not a channel.

  How the rows come back: the scores of the time-sorted series are written first (one chunk of rows and one window
  length in memory). A sorted file with every time once and no row dropped is that series row for row, so those
  scores are ``out``. Otherwise (a repeated time, a dropped row, an unsorted file) a second pass reads the file in
  its order as the converter parses it and gives each row its time's score (``InputRows``: ``np.searchsorted`` over
  the series' distinct times), holding the series' times and scores, 16 bytes per distinct time (about the size of
  the scores file itself), and one chunk. For a file not sorted by time (summary ``sorted: false``), a range's rows
  are the rows whose time lies in ``start..end``, not every row of the file between ``first_row`` and ``last_row``.
- **instances** (``score_instances``): every instance of ``chunks_of(src)`` (any converter input, or a manifest whose
  shards are read record by record) scored, ``out`` holding ``index``, ``error`` and ``anomaly`` (``core.scoring``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from landfall.core.artifacts.specs import DatasetSpec
from landfall.core.errors import BadInput, Invalid
from landfall.core.rules import duplicates
from landfall.core.rules.series_windows import MEAN, ROW, served_stride
from landfall.core.services.storage import Storage, resolve
from landfall.detect import located
from landfall.detect.located import Block, Locator, Range, Unsorted

SCHEMA = "landfall.series_scores/v1"
LABELS = ("label", "is_anomaly")  # label columns looked for when none is named
ROW_GROUP = 1 << 16  # output rows per Parquet row group
RECORDS_PER_CHUNK = 4096


@dataclasses.dataclass(frozen=True)
class SeriesOptions:
    """How a series is scored: rows between scored windows (None: the spec's stride), a row's score from the windows
    over it (``mean`` | ``max``), and the label column (None: looked for)."""

    stride: int | None = None
    combine: str = MEAN
    label: str | None = None


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _label_column(opts: SeriesOptions, spec: DatasetSpec, names: list[str], cfg: Any) -> str | None:
    """The file's label column: ``--label``, else the spec's labelled set's label or one of ``LABELS`` when present.
    A spec that names its channels decides what a channel is: naming one of them (or the time) as the label is an
    error. A spec that names none takes its channels as "every other column", so the label is taken out of them
    (``--label`` always; a looked-for one when what is left is the spec's channel count)."""
    named = set(cfg.series_channels)
    others = [n for n in names if n != cfg.series_time_column and n not in cfg.series_drop_columns]
    if opts.label:
        if opts.label not in names:
            raise BadInput("missing_column", f"no label column {opts.label!r} among the columns {names[:12]}")
        if opts.label in named or opts.label == cfg.series_time_column:
            raise Invalid(f"--label {opts.label}: that column is a channel (or the time) of dataset {spec.name}'s "
                          "series, not a label")
        return opts.label
    wanted = [(spec.verdict.get("labelled") or {}).get("label"), *LABELS]
    for c in wanted:
        if not c or c not in names or c in named or c == cfg.series_time_column:
            continue
        if named or c not in others or len(others) - 1 == cfg.features:
            return c
    return None


def score_series(storage: Storage, src: str, spec: DatasetSpec, model: str, scorer: Any, threshold: float,
                 out: str | Path, opts: SeriesOptions = SeriesOptions(), generation: int | None = None,
                 ) -> dict[str, Any]:
    """Scores the series file ``src`` (of ``generation`` when given) into ``out``; returns the summary (module doc).
    ``BadInput`` when the file has no window to score, ``Invalid`` when the model does not fit the spec."""
    import pyarrow as pa

    from landfall.arrival import formats, series
    from landfall.arrival.config import ConverterConfig
    from landfall.core import scoring

    cfg = dataclasses.replace(ConverterConfig.load(), **spec.converter_fields())
    if scorer.shape is not None and tuple(scorer.shape) != cfg.shape:
        raise Invalid(f"model {model} takes windows of shape {list(scorer.shape)}, dataset {spec.name}'s series "
                      f"spec cuts {list(cfg.shape)}")
    stride = opts.stride or served_stride(opts.combine, bool(getattr(scorer, "alone", False)), cfg.timesteps,
                                          cfg.window_stride)
    if stride < 1:
        raise Invalid(f"--stride {stride}: a stride is at least 1 row")
    fmt = formats.format_of(src)
    info = storage.stat(src, generation)
    with storage.open_read(src, generation) as fh:
        names, stamped = series.header(fmt, fh, cfg)
    label = _label_column(opts, spec, names, cfg)
    if label and not cfg.series_channels and label not in cfg.series_drop_columns:
        cfg = dataclasses.replace(cfg, series_drop_columns=(*cfg.series_drop_columns, label))
    extra = (label,) if label else ()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fields = [("row", pa.int64()), ("time", pa.float64()), ("score", pa.float64()), ("anomaly", pa.bool_())]
    schema = pa.schema(fields + ([("label", pa.uint8())] if label else []))
    features = cfg.features
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")  # what becomes ``out``
    by_time = out.with_name(f".{out.name}.series-{os.getpid()}")  # the time-sorted series' scores

    def once(chunks: Any) -> tuple[Locator, scoring.Histogram, duplicates.Merger]:
        merger = duplicates.Merger(cfg.series_duplicate_times, stamped, labels_from=features if label else None)
        hist = scoring.Histogram()
        errors = scorer.row_errors if opts.combine == ROW else scorer.errors  # row: each window row's own error
        loc = Locator(cfg.timesteps, stride, threshold, errors, cfg.series_max_gap, opts.combine,
                      cfg.drop_nonfinite)
        loc.on_errors = hist.add
        with _Rows(by_time, schema) as rows:
            for t, v in merger.chunks(chunks):
                for block in loc.feed(t, v[:, :features], v[:, features] if label else None):
                    rows.add(_columns(block))
            for block in loc.finish():
                rows.add(_columns(block))
        return loc, hist, merger

    try:
        sorted_in_file = True
        try:
            with storage.open_read(src, generation) as fh:
                loc, hist, merger = once(series.chunks(fmt, fh, info.size, cfg, extra))
        except Unsorted:
            sorted_in_file = False
            loc, hist, merger = once(series.sorted_whole(fmt, storage, src, generation, info.size, cfg, extra))
        if not loc.windows:
            out.unlink(missing_ok=True)  # no scores of an earlier run left beside the error
            if loc.rows < cfg.timesteps:
                raise BadInput("too_short", f"{loc.rows} rows, fewer than one window of {cfg.timesteps}")
            raise BadInput("all_gaps", f"{loc.rows} rows, but no run of {cfg.timesteps} rows without a step longer "
                           f"than max_gap={loc.max_gap:g}: every window would span a gap")
        if sorted_in_file and not merger.merged and not loc.dropped_nonfinite:
            # The series is the file, row for row: its scores are the input rows' as they stand.
            os.replace(by_time, tmp)
            rows, anomalies, dropped, ranges = loc.rows, loc.flagged, 0, loc.ranges
        else:  # a second pass over the file gives every input row its time's score
            back = InputRows(*_series_scores(by_time), threshold, loc.ranges)
            with storage.open_read(src, generation) as fh, _Rows(tmp, schema) as written:
                for t, v in series.chunks(fmt, fh, info.size, cfg, extra):
                    written.add(back.add(t, v[:, features] if label else None))
            rows, anomalies, dropped, ranges = back.rows, back.anomalies, back.dropped, back.ranges()
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
        by_time.unlink(missing_ok=True)

    def located(r: Any) -> dict[str, Any]:
        doc = r.as_dict()
        if stamped:
            doc |= {"start_at": iso(r.start), "end_at": iso(r.end), "peak_at": iso(r.peak)}
        return doc

    return {"schema": SCHEMA, "src": src, "model": model, "dataset": spec.name, "threshold": float(threshold),
            "combine": opts.combine, "length": cfg.timesteps, "stride": stride, "max_gap": loc.max_gap,
            "time": "timestamp" if stamped else "number", "sorted": sorted_in_file, "rows": rows,
            "series_rows": loc.rows, "duplicate_times": cfg.series_duplicate_times, "merged_rows": merger.merged,
            "dropped_nonfinite": dropped, "windows": loc.windows, "anomalies": anomalies,
            "quantiles": hist.quantiles(), "min": hist.min, "max": hist.max, "label": label,
            "labelled": loc.metrics(), "ranges": [located(r) for r in ranges], "out": str(out)}


def _series_scores(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The time-sorted series' times and scores from its scores file, read a row group at a time into two arrays."""
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    times, scores = np.empty(pf.metadata.num_rows), np.empty(pf.metadata.num_rows)
    at = 0
    for batch in pf.iter_batches(columns=["time", "score"]):
        n = batch.num_rows
        times[at:at + n] = batch.column("time").to_numpy()
        scores[at:at + n] = batch.column("score").to_numpy(zero_copy_only=False)
        at += n
    return times, scores


def _columns(block: Block) -> dict[str, np.ndarray]:
    cols = {"row": np.arange(block.row, block.row + len(block.times), dtype=np.int64), "time": block.times,
            "score": block.scores, "anomaly": block.anomaly}
    if block.labels is not None:
        cols["label"] = block.labels
    return cols


class _Rows:
    """A Parquet file of ``schema`` written from column chunks, a row group per ``ROW_GROUP`` rows or so."""

    def __init__(self, path: Path, schema: Any) -> None:
        import pyarrow.parquet as pq

        self.schema, self.count = schema, 0
        self.held: list[dict[str, np.ndarray]] = []
        self.writer = pq.ParquetWriter(str(path), schema)

    def add(self, cols: dict[str, np.ndarray]) -> None:
        self.held.append(cols)
        self.count += len(cols["row"])
        if self.count >= ROW_GROUP:
            self.flush()

    def flush(self) -> None:
        import pyarrow as pa

        if self.held:
            self.writer.write_table(pa.table({f.name: np.concatenate([c[f.name] for c in self.held])
                                              for f in self.schema}, schema=self.schema))
        self.held, self.count = [], 0

    def __enter__(self) -> _Rows:
        return self

    def __exit__(self, kind: Any, *_: Any) -> None:
        if kind is None:
            self.flush()
        self.writer.close()


class InputRows:
    """The time-sorted series' scores given back to the rows of the file as it was sent (module doc): fed the file's
    (times, labels) chunks in file order, each row gets the score of its time in the series (``np.searchsorted``
    over the series' distinct times; NaN, never anomalous, where the series has no row of that time: every row of it
    dropped as non-finite), and each range the input rows it holds. Memory: the series' times and scores, 16 bytes
    per distinct time (about the size of the scores file itself), and one chunk."""

    def __init__(self, times: np.ndarray, scores: np.ndarray, threshold: float, ranges: list[Range]) -> None:
        self.times, self.scores = np.asarray(times, np.float64), np.asarray(scores, np.float64)
        self.threshold = float(threshold)
        self._ranges = ranges
        self.first = np.array([r.first for r in ranges], np.int64)
        self.peak = np.array([r.peak_row for r in ranges], np.int64)
        none = np.iinfo(np.int64).max
        self.lo = np.full(len(ranges), none, np.int64)  # per range: its first and last input row, the first at its
        self.hi = np.full(len(ranges), -1, np.int64)  # peak, and how many input rows it holds
        self.at_peak = np.full(len(ranges), none, np.int64)
        self.count = np.zeros(len(ranges), np.int64)
        self.rows = self.anomalies = self.dropped = 0

    def add(self, times: np.ndarray, labels: np.ndarray | None) -> dict[str, np.ndarray]:
        """The output columns of the next rows of the file."""
        row = np.arange(self.rows, self.rows + len(times), dtype=np.int64)
        cols = {"row": row, "time": np.asarray(times, np.float64)}
        if labels is not None:
            bad = ~np.isin(labels, (0.0, 1.0))
            if bad.any():
                at = int(np.argmax(bad))
                raise BadInput("label_values", f"label {labels[at]:g} in row {self.rows + at + 1}: labels are 0 "
                               "(normal) or 1 (anomalous)")
            cols["label"] = labels.astype(np.uint8)
        pos = np.searchsorted(self.times, cols["time"])
        found = pos < len(self.times)
        found[found] = self.times[pos[found]] == cols["time"][found]
        score = np.full(len(row), np.nan)
        score[found] = self.scores[pos[found]]
        with np.errstate(invalid="ignore"):
            flags = score > self.threshold  # NaN compares False, as the series' flags
        cols |= {"score": score, "anomaly": flags}
        if len(self.first) and flags.any():  # every flagged row's time is in one range: the last starting by it
            k = np.searchsorted(self.first, pos[flags], "right") - 1
            rows = row[flags]
            np.minimum.at(self.lo, k, rows)
            np.maximum.at(self.hi, k, rows)
            np.add.at(self.count, k, 1)
            peak = pos[flags] == self.peak[k]
            np.minimum.at(self.at_peak, k[peak], rows[peak])
        self.rows += len(row)
        self.anomalies += int(flags.sum())
        self.dropped += int((~found).sum())
        return cols

    def ranges(self) -> list[Range]:
        """The series' ranges with the input rows they hold: ``first``/``last`` the first and last of them in the
        file, ``peak_row`` the first at the peak's time, ``count`` how many."""
        return [dataclasses.replace(r, first=int(lo), last=int(hi), peak_row=int(p), count=int(n))
                for r, lo, hi, p, n in zip(self._ranges, self.lo, self.hi, self.at_peak, self.count, strict=True)]


def chunks_of(src: str, storage: Storage, shape: tuple[int, int]) -> Iterator[np.ndarray]:
    """Float32 ``[k, T, F]`` chunks of SRC (any converter input, or a ``manifest.json``), streamed."""
    if src.endswith(".json"):
        yield from _manifest_chunks(src, storage, shape)
        return
    from landfall.arrival import formats
    from landfall.arrival.config import ConverterConfig

    cfg = ConverterConfig.load(timesteps=shape[0], features=shape[1])
    size = storage.stat(src).size
    with storage.open_read(src) as fh:
        yield from formats.read(formats.format_of(src), fh, size, cfg).chunks


def _manifest_chunks(uri: str, storage: Storage, shape: tuple[int, int]) -> Iterator[np.ndarray]:
    from landfall.core.contracts.messages import Manifest
    from landfall.core.contracts.records import decode_example, iter_records

    manifest = Manifest.from_json(storage.read_bytes(uri), f"manifest {uri}")
    if tuple(manifest.shape) != tuple(shape):
        raise Invalid(f"manifest {uri}: instances of shape {manifest.shape}, the model expects {list(shape)}")
    for shard in manifest.shards:
        shard_uri = resolve(uri, shard.uri)
        batch: list[np.ndarray] = []
        with storage.open_read(shard_uri) as fh:
            try:
                for record in iter_records(fh):
                    batch.append(decode_example(record, tuple(shape)))
                    if len(batch) == RECORDS_PER_CHUNK:
                        yield np.stack(batch)
                        batch = []
            except ValueError as exc:
                raise Invalid(f"shard {shard_uri}: {exc}") from None
        if batch:
            yield np.stack(batch)


def score_instances(storage: Storage, src: str, model: str, scorer: Any, threshold: float,
                    out: str | Path) -> dict[str, Any]:
    """Scores every instance of ``src`` into ``out``; returns the summary (count, anomalies, quantiles ...) and the
    runs of consecutive anomalous instances as ``ranges`` (``start``/``end`` are instance indices)."""
    from landfall.core import scoring

    shape = scorer.shape or (36, 10)
    runs = InstanceRuns()
    summary = scoring.score_chunks(chunks_of(src, storage, shape), scorer, out, threshold,  # type: ignore[arg-type]
                                   on_chunk=lambda index, errors: runs.add(index, errors, threshold))
    return {**summary.as_dict(), "model": model, "src": src, "ranges": runs.finish()}


class InstanceRuns:
    """Maximal runs of consecutive anomalous instances (by index), with each run's peak: ``located.Runs`` over the
    instances' indices, which stand for their times (``start``, ``end`` and ``peak`` are instance indices)."""

    def __init__(self) -> None:
        self.runs = located.Runs()

    def add(self, index: np.ndarray, errors: np.ndarray, threshold: float) -> None:
        if len(index):  # the chunks come in order, their indices contiguous
            flags = errors > threshold
            self.runs.add(located.Block(int(index[0]), index, errors, flags, None), flags, errors)

    def finish(self) -> list[dict[str, Any]]:
        self.runs.end()
        return [{**r.as_dict(), "start": int(r.start), "end": int(r.end), "peak": int(r.peak)} for r in self.runs.done]
