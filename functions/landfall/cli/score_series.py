"""``landfall score`` on a series file of a series dataset: a score per moment and the anomalous ranges.

The file (CSV, CSV.gz or Parquet; local or gs://) is read as the converter reads a series arrival
(``landfall.arrival.series``: the spec's time column and channels, ISO-8601 or numeric times, sorted in memory when
it is not), windowed with the spec's window (at ``--stride``, default the spec's stride) without crossing a gap longer
than ``max_gap``, every window scored with the model (``trainer.scoring.Scorer``: its reconstruction MSE in original
units), and the windows' errors combined into a score per row (``landfall.core.located``: the mean of the windows
covering it, or ``--combine max``). Writes:

- ``--out`` (default ``<src name>.scores.parquet``): one row per row of the time-sorted series: ``row``, ``time`` (the
  time column's value; seconds since the epoch for ISO-8601 times), ``score`` (NaN where no window covers the row),
  ``anomaly`` (score above the threshold) and, when the file has a label column, ``label``;
- beside it, ``<out without .parquet>.json`` (``landfall.series_scores/v1``): the summary, every anomalous range
  (start, end, peak time and peak score; ``*_at`` as ISO-8601 for timestamped series) and, with labels, point-wise
  and range-based precision and recall at the threshold.

The label column is ``--label``, else the first of the spec's ``verdict.labelled.label``, ``label`` and
``is_anomaly`` that the file has and that is not a channel. Memory: one chunk of rows and one window length.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from landfall.core.errors import BadInput, Invalid
from landfall.core.located import Block, Locator, Unsorted
from landfall.core.specs import DatasetSpec
from landfall.core.storage import Storage

SCHEMA = "landfall.series_scores/v1"
LABELS = ("label", "is_anomaly")  # label columns looked for when --label is not given
ROW_GROUP = 1 << 16  # output rows per Parquet row group


def summary_path(out: str | Path) -> Path:
    """The summary beside a scores file: ``X.scores.parquet`` -> ``X.scores.json``."""
    out = Path(out)
    return out.with_name(out.name.removesuffix(".parquet") + ".json")


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _label_column(args: argparse.Namespace, spec: DatasetSpec, names: list[str], cfg: Any) -> str | None:
    channels = set(cfg.series_channels) if cfg.series_channels else {
        n for n in names if n != cfg.series_time_column and n not in cfg.series_drop_columns}
    if args.label:
        if args.label not in names:
            raise BadInput("missing_column", f"no label column {args.label!r} among the columns {names[:12]}")
        if args.label in channels or args.label == cfg.series_time_column:
            raise Invalid(f"--label {args.label}: that column is a channel (or the time) of dataset {spec.name}'s "
                          "series, not a label")
        return args.label
    wanted = [(spec.verdict.get("labelled") or {}).get("label"), *LABELS]
    return next((c for c in wanted if c and c in names and c not in channels and c != cfg.series_time_column), None)


def score(args: argparse.Namespace, storage: Storage, spec: DatasetSpec, model: str, scorer: Any,
          threshold: float) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from landfall.arrival import formats, series
    from landfall.arrival.config import ConverterConfig
    from trainer import scoring

    cfg = dataclasses.replace(ConverterConfig.load(), **spec.converter_fields())
    if scorer.shape is not None and tuple(scorer.shape) != cfg.shape:
        raise Invalid(f"model {model} takes windows of shape {list(scorer.shape)}, dataset {spec.name}'s series "
                      f"spec cuts {list(cfg.shape)}")
    stride = args.stride or cfg.window_stride
    if stride < 1:
        raise Invalid(f"--stride {stride}: a stride is at least 1 row")
    src = args.src
    fmt = formats.format_of(src)
    info = storage.stat(src)
    with storage.open_read(src) as fh:
        names, stamped = series.header(fmt, fh, cfg)
    label = _label_column(args, spec, names, cfg)
    extra = (label,) if label else ()
    out = Path(args.out or f"{Path(src.rstrip('/')).name.split('.', 1)[0]}.scores.parquet")
    out.parent.mkdir(parents=True, exist_ok=True)
    fields = [("row", pa.int64()), ("time", pa.float64()), ("score", pa.float64()), ("anomaly", pa.bool_())]
    schema = pa.schema(fields + ([("label", pa.uint8())] if label else []))
    features = cfg.features

    def once(chunks: Any) -> tuple[Locator, scoring.Histogram]:
        hist = scoring.Histogram()
        loc = Locator(cfg.timesteps, stride, threshold, scorer.errors, cfg.series_max_gap, args.combine,
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
        return loc, hist

    sorted_in_file = True
    try:
        with storage.open_read(src) as fh:
            loc, hist = once(series.chunks(fmt, fh, info.size, cfg, extra))
    except Unsorted:
        sorted_in_file = False
        loc, hist = once(series.sorted_whole(fmt, storage, src, None, info.size, cfg, extra))
    if not loc.windows:
        out.unlink(missing_ok=True)
        if loc.rows < cfg.timesteps:
            raise BadInput("too_short", f"{loc.rows} rows, fewer than one window of {cfg.timesteps}")
        raise BadInput("all_gaps", f"{loc.rows} rows, but no run of {cfg.timesteps} rows without a step longer than "
                       f"max_gap={loc.max_gap:g}: every window would span a gap")

    def located(r: Any) -> dict[str, Any]:
        doc = r.as_dict()
        if stamped:
            doc |= {"start_at": _iso(r.start), "end_at": _iso(r.end), "peak_at": _iso(r.peak)}
        return doc

    doc = {"schema": SCHEMA, "src": src, "model": model, "dataset": spec.name, "threshold": float(threshold),
           "combine": args.combine, "length": cfg.timesteps, "stride": stride, "max_gap": loc.max_gap,
           "time": "timestamp" if stamped else "number", "sorted": sorted_in_file, "rows": loc.rows,
           "dropped_nonfinite": loc.dropped_nonfinite, "windows": loc.windows, "anomalies": loc.flagged,
           "quantiles": hist.quantiles(), "min": hist.min, "max": hist.max, "label": label,
           "labelled": loc.metrics(), "ranges": [located(r) for r in loc.ranges], "out": str(out)}
    path = summary_path(out)
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return {**doc, "count": loc.rows, "summary": str(path)}


def print_summary(summary: dict[str, Any], shown: int = 10) -> None:
    stamped = summary["time"] == "timestamp"
    share = summary["anomalies"] / summary["rows"] if summary["rows"] else 0.0
    print(f"{summary['rows']} rows ({summary['windows']} windows of {summary['length']}, stride {summary['stride']}) "
          f"scored with {summary['model']}: {summary['anomalies']} anomalous rows ({share:.2%}) above "
          f"{summary['threshold']:.6g} ({summary['combine']} of the windows over each row), "
          f"{len(summary['ranges'])} range{'' if len(summary['ranges']) == 1 else 's'}")
    strongest = sorted(summary["ranges"], key=lambda r: -r["peak_score"])[:shown]
    for r in sorted(strongest, key=lambda r: r["first_row"]):
        start, end, peak = ((r["start_at"], r["end_at"], r["peak_at"]) if stamped else
                            (f"{r['start']:g}", f"{r['end']:g}", f"{r['peak']:g}"))
        print(f"  {start} .. {end} ({r['rows']} rows): peak {r['peak_score']:.6g} at {peak}")
    if len(summary["ranges"]) > shown:
        print(f"  ... and {len(summary['ranges']) - shown} weaker ranges (all in {summary['summary']})")
    m = summary.get("labelled")
    if m:
        def f(v: Any) -> str:
            return "undefined" if v is None else f"{v:.3f}"

        print(f"label {summary['label']!r}: {m['positives']} rows labelled anomalous; point-wise precision "
              f"{f(m['point']['precision'])}, recall {f(m['point']['recall'])}; range-based precision "
              f"{f(m['range']['precision'])}, recall {f(m['range']['recall'])} ({m['range']['labelled']} labelled "
              "ranges)")
        print(f"  threshold-free: average precision {f(m.get('average_precision'))}, VUS-PR {f(m.get('vus_pr'))}"
              + (f" ({m['ranking_note']})" if m.get("ranking_note") else ""))
    print(f"  {summary['out']}\n  {summary['summary']}")
