"""Scoring a file or an arrival with a model: what ``landfall score`` prints and what the scorer publishes.

Two kinds, by the dataset's spec:

- **series** (``score_series``): the series file (CSV, CSV.gz or Parquet; local or gs://, at a pinned generation when
  given) is read as the converter reads a series arrival (``landfall.arrival.series``: the spec's time column and
  channels, ISO-8601 or numeric times, sorted in memory when it is not), windowed with the spec's window (at
  ``stride``, default the spec's stride) without crossing a gap longer than ``max_gap``, every window scored with the
  model (``trainer.scoring.Scorer``: its reconstruction MSE in original units), and the windows' errors combined into
  a score per row (``landfall.detect.located``: the mean of the windows covering it, or ``combine="max"``). Writes
  ``out``, one row per row of the time-sorted series: ``row``, ``time`` (the time column's value; seconds since the
  epoch for ISO-8601 times), ``score`` (NaN where no window covers the row), ``anomaly`` (score above the threshold)
  and, when the file has a label column, ``label``; returns the summary (``landfall.series_scores/v1``): every
  anomalous range (start, end, peak time and peak score; ``*_at`` as ISO-8601 for timestamped series) and, with
  labels, point-wise and range-based precision and recall at the threshold. The label column is ``label``, else the
  first of the spec's ``verdict.labelled.label``, ``label`` and ``is_anomaly`` that the file has and that is not a
  channel. Memory: one chunk of rows and one window length.
- **instances** (``score_instances``): every instance of ``chunks_of(src)`` (any converter input, or a manifest whose
  shards are read record by record) scored, ``out`` holding ``index``, ``error`` and ``anomaly`` (``trainer.scoring``).
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
from landfall.core.services.storage import Storage
from landfall.detect import located
from landfall.detect.located import Block, Locator, Unsorted

SCHEMA = "landfall.series_scores/v1"
LABELS = ("label", "is_anomaly")  # label columns looked for when none is named
ROW_GROUP = 1 << 16  # output rows per Parquet row group
RECORDS_PER_CHUNK = 4096


@dataclasses.dataclass(frozen=True)
class SeriesOptions:
    """How a series is scored: rows between scored windows (None: the spec's stride), a row's score from the windows
    over it (``mean`` | ``max``), and the label column (None: looked for)."""

    stride: int | None = None
    combine: str = "mean"
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
    import pyarrow.parquet as pq

    from landfall.arrival import formats, series
    from landfall.arrival.config import ConverterConfig
    from trainer import scoring

    cfg = dataclasses.replace(ConverterConfig.load(), **spec.converter_fields())
    if scorer.shape is not None and tuple(scorer.shape) != cfg.shape:
        raise Invalid(f"model {model} takes windows of shape {list(scorer.shape)}, dataset {spec.name}'s series "
                      f"spec cuts {list(cfg.shape)}")
    stride = opts.stride or cfg.window_stride
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

    merged = [0]

    def once(chunks: Any) -> tuple[Locator, scoring.Histogram]:
        merger = duplicates.Merger(cfg.series_duplicate_times, stamped, labels_from=features if label else None)
        chunks = merger.chunks(chunks)
        hist = scoring.Histogram()
        loc = Locator(cfg.timesteps, stride, threshold, scorer.errors, cfg.series_max_gap, opts.combine,
                      cfg.drop_nonfinite)
        loc.on_errors = hist.add
        tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
        held: list[Block] = []

        def write(writer: Any, blocks: list[Block]) -> None:
            if not blocks:
                return
            cols = {"row": np.concatenate([np.arange(b.row, b.row + len(b.times), dtype=np.int64) for b in blocks]),
                    "time": np.concatenate([b.times for b in blocks]),
                    "score": np.concatenate([b.scores for b in blocks]),
                    "anomaly": np.concatenate([b.anomaly for b in blocks])}
            if label:
                cols["label"] = np.concatenate([b.labels for b in blocks])  # type: ignore[misc]
            writer.write_table(pa.table(cols, schema=schema))

        try:
            with pq.ParquetWriter(str(tmp), schema) as writer:
                def take(blocks: Any) -> None:
                    for block in blocks:
                        held.append(block)
                        if sum(len(b.times) for b in held) >= ROW_GROUP:
                            write(writer, held)
                            held.clear()

                for t, v in chunks:
                    take(loc.feed(t, v[:, :features], v[:, features] if label else None))
                take(loc.finish())
                write(writer, held)
            os.replace(tmp, out)
        finally:
            tmp.unlink(missing_ok=True)
        merged[0] = merger.merged
        return loc, hist

    sorted_in_file = True
    try:
        with storage.open_read(src, generation) as fh:
            loc, hist = once(series.chunks(fmt, fh, info.size, cfg, extra))
    except Unsorted:
        sorted_in_file = False
        loc, hist = once(series.sorted_whole(fmt, storage, src, generation, info.size, cfg, extra))
    if not loc.windows:
        out.unlink(missing_ok=True)
        if loc.rows < cfg.timesteps:
            raise BadInput("too_short", f"{loc.rows} rows, fewer than one window of {cfg.timesteps}")
        raise BadInput("all_gaps", f"{loc.rows} rows, but no run of {cfg.timesteps} rows without a step longer than "
                       f"max_gap={loc.max_gap:g}: every window would span a gap")

    def located(r: Any) -> dict[str, Any]:
        doc = r.as_dict()
        if stamped:
            doc |= {"start_at": iso(r.start), "end_at": iso(r.end), "peak_at": iso(r.peak)}
        return doc

    return {"schema": SCHEMA, "src": src, "model": model, "dataset": spec.name, "threshold": float(threshold),
            "combine": opts.combine, "length": cfg.timesteps, "stride": stride, "max_gap": loc.max_gap,
            "time": "timestamp" if stamped else "number", "sorted": sorted_in_file, "rows": loc.rows + merged[0],
            "duplicate_times": cfg.series_duplicate_times, "merged_rows": merged[0],
            "dropped_nonfinite": loc.dropped_nonfinite, "windows": loc.windows, "anomalies": loc.flagged,
            "quantiles": hist.quantiles(), "min": hist.min, "max": hist.max, "label": label,
            "labelled": loc.metrics(), "ranges": [located(r) for r in loc.ranges], "out": str(out)}


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
    from trainer import inputs

    manifest = Manifest.from_json(storage.read_bytes(uri), f"manifest {uri}")
    if tuple(manifest.shape) != tuple(shape):
        raise Invalid(f"manifest {uri}: instances of shape {manifest.shape}, the model expects {list(shape)}")
    for shard in manifest.shards:
        shard_uri = inputs.shard_uri(uri, shard.uri)
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
    from trainer import scoring

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
