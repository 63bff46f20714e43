"""``landfall score`` on a series file of a series dataset: a score per moment and the anomalous ranges.

The file (CSV, CSV.gz or Parquet; local or gs://) is read as the converter reads a series arrival
(``landfall.arrival.series``: the spec's time column and channels, ISO-8601 or numeric times, sorted in memory when
it is not), windowed with the spec's window (at ``--stride``, default the spec's stride) without crossing a gap longer
than ``max_gap``, every window scored with the model (``core.scoring.Scorer``: its reconstruction MSE in original
units), and the windows' errors combined into a score per row (``landfall.detect.located``: the mean of the windows
covering it, ``--combine max`` the largest, or ``--combine row`` the mean of the row's own error in each, against the
champion's row threshold). Writes:

- ``--out`` (default ``<src name>.scores.parquet``): one row per data row of the file, in the file's order (rows of
  a repeated time each carry that time's score; an unsorted file's rows stay where they were): ``row`` (the row's
  0-based index), ``time`` (the time column's value; seconds since the epoch for ISO-8601 times), ``score`` (NaN
  where no window covers the row, or its row was dropped as non-finite), ``anomaly`` (score above the threshold)
  and, when the file has a label column, ``label`` (the row's own);
- beside it, ``<out without .parquet>.json`` (``landfall.series_scores/v1``): the summary (``rows`` the file's rows,
  ``merged_rows`` and ``dropped_nonfinite`` how many were merged with another row of their time or dropped), every
  anomalous range (start, end, peak time and peak score; ``*_at`` as ISO-8601 for timestamped series; its first,
  last and peak row as rows of the file) and, with labels, point-wise and range-based precision and recall at the
  threshold.

The scoring itself is ``landfall.detect.score.score_series``, which the scorer runs on every arrival.
The label column is ``--label``, else the first of the spec's ``verdict.labelled.label``, ``label`` and
``is_anomaly`` that the file has and that is not a channel. Memory: one chunk of rows and one window length, and for a
file that repeats a time, drops a row or is not sorted, 16 bytes per distinct time (``landfall.detect.score``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from landfall.core.artifacts.specs import DatasetSpec
from landfall.core.rules.series_windows import SAYS
from landfall.core.services.storage import Storage


def summary_path(out: str | Path) -> Path:
    """The summary beside a scores file: ``X.scores.parquet`` -> ``X.scores.json``."""
    out = Path(out)
    return out.with_name(out.name.removesuffix(".parquet") + ".json")


def score(args: argparse.Namespace, storage: Storage, spec: DatasetSpec, model: str, scorer: Any,
          threshold: float) -> dict[str, Any]:
    from landfall.detect.score import SeriesOptions, score_series

    out = Path(args.out or f"{Path(args.src.rstrip('/')).name.split('.', 1)[0]}.scores.parquet")
    doc = score_series(storage, args.src, spec, model, scorer, threshold, out,
                       SeriesOptions(args.stride, args.combine, args.label))
    path = summary_path(out)
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return {**doc, "count": doc["rows"], "summary": str(path)}


def print_summary(summary: dict[str, Any], shown: int = 10) -> None:
    stamped = summary["time"] == "timestamp"
    share = summary["anomalies"] / summary["rows"] if summary["rows"] else 0.0
    print(f"{summary['rows']} rows ({summary['windows']} windows of {summary['length']}, stride {summary['stride']}) "
          f"scored with {summary['model']}: {summary['anomalies']} anomalous rows ({share:.2%}) above "
          f"{summary['threshold']:.6g} (a row's score: {SAYS.get(summary['combine'], summary['combine'])}), "
          f"{len(summary['ranges'])} range{'' if len(summary['ranges']) == 1 else 's'}")
    merged, dropped = summary.get("merged_rows") or 0, summary.get("dropped_nonfinite") or 0
    if merged or dropped:
        print(f"  {summary['series_rows']} distinct times scored: {merged} rows merged with another row of their "
              f"time (duplicate_times {summary['duplicate_times']}; each carries its time's score), {dropped} rows "
              "dropped as non-finite (no score)")
    strongest = sorted(summary["ranges"], key=lambda r: -r["peak_score"])[:shown]
    for r in sorted(strongest, key=lambda r: r["start"]):  # in time order (an unsorted file's rows are not)
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
