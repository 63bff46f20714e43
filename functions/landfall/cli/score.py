"""``landfall score SRC --dataset D [--model URI] [--out FILE] [--threshold X]``: anomaly scores for every instance.

SRC is any input the converter reads (``.npy``, ``.npz``, ``.csv``, ``.csv.gz``, ``.parquet``; local or gs://),
read with the converter's own streaming readers (``landfall.arrival.formats``), or a ``manifest.json`` whose
TFRecord shards are read record by record. Every instance is scored with the dataset's champion
(``models/<dataset>/champion.json``), or the model ``--model`` names (``runs/<job>/model``): its
reconstruction MSE, each feature in its ``error_scale`` (``core.scoring``), and ``anomaly`` = error > the model's
threshold (``threshold.json``, or ``--threshold``). The output is a Parquet file (``index``, ``error``,
``anomaly``), written one row group per input chunk, so peak memory stays flat whatever the input size.
A summary goes to stdout: count, anomalies, error quantiles (``--json`` for the machine-readable form).
Exit 2 for bad input or a missing model, 75 when storage is temporarily unreachable.

For a series dataset (its spec, ``--spec FILE`` or the one stored in the bucket, sets ``shape.window``) SRC is a
series file as it was recorded, and the scores are located in time (``landfall.cli.score_series``): a score per
row and the anomalous ranges, with precision and recall when the file has a label column.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from landfall.core import logs
from landfall.core.artifacts import champion
from landfall.core.errors import BadInput, Invalid, NotFound, TemporaryError
from landfall.core.rules.series_windows import COMBINE, MEAN
from landfall.core.services.storage import Storage


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    p.add_argument("src", help="input file (.npy, .npz, .csv, .csv.gz, .parquet) or a manifest.json; local or gs://")
    p.add_argument("--dataset", required=True, help="whose champion scores (unless --model)")
    p.add_argument("--model", help="a model URI (runs/<job>/model) instead of the champion")
    p.add_argument("--out", help="Parquet output (default: <src name>.scores.parquet here)")
    p.add_argument("--threshold", type=float, help="anomaly threshold (default: the model's threshold.json)")
    p.add_argument("--bucket", help="bucket of the champion (LANDFALL_BUCKET)")
    p.add_argument("--models", help="champions root (default gs://BUCKET/models)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    series = p.add_argument_group("series datasets (landfall.cli.score_series)")
    series.add_argument("--spec", help="the dataset's spec file (default: the one stored in the bucket, if any)")
    series.add_argument("--stride", type=int, help="rows between scored windows (default: the spec's stride)")
    series.add_argument("--combine", choices=COMBINE,
                        help="a row's score from the windows covering it: the mean of their errors, the largest, or "
                             "(row) the mean of the row's own error in each (default: the champion's own unit, else "
                             "the spec's shape.window.combine, else mean)")
    series.add_argument("--label", help="the 0/1 label column (default: label or is_anomaly, when present)")
    series.add_argument("--plot", help="also draw the scored series with its ranges (PNG)")


def run(args: argparse.Namespace) -> int:
    from landfall.local.stack import use_running_stack

    logs.setup("WARNING")
    use_running_stack(args=args)
    try:
        summary = score(args)
    except (BadInput, Invalid, NotFound) as exc:
        print(f"landfall score: {exc}", file=sys.stderr)
        return 2
    except TemporaryError as exc:
        print(f"landfall score: temporary failure, retry: {exc}", file=sys.stderr)
        return 75
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    if "ranges" in summary:
        from landfall.cli.score_series import print_summary

        print_summary(summary)
        return 0
    q = summary["quantiles"]
    share = summary["anomalies"] / summary["count"] if summary["count"] else 0.0
    print(f"{summary['count']} instances scored with {summary['model']}: {summary['anomalies']} anomalies "
          f"({share:.2%}) above {summary['threshold']:.6g}")
    if q:
        print("error quantiles: " + ", ".join(f"{k} {v:.6g}" for k, v in q.items())
              + f", max {summary['max']:.6g}")
    print(f"  {summary['out']}")
    return 0


def model_of(args: argparse.Namespace, storage: Storage) -> tuple[str, dict[str, str] | None]:
    """The model to score with and the files it must have: ``--model`` as it is (no record to check it against),
    else the dataset's champion and its record's ``files`` (``landfall.core.artifacts.model_files``)."""
    if args.model:
        return args.model, None
    from landfall.cli.common import job_config

    cfg = job_config(args, "bucket")
    if not (args.models or cfg.bucket):
        raise Invalid("no model: pass --model, or --bucket (LANDFALL_BUCKET) for the dataset's champion")
    root = args.models or champion.bucket_root(cfg.bucket)
    current, _ = champion.read(storage, root, args.dataset)
    if current is None:
        raise NotFound(f"dataset {args.dataset} has no champion under {root}: pass --model")
    return current.model, current.files


def spec_of(args: argparse.Namespace, storage: Storage) -> Any:
    """The dataset's spec: ``--spec FILE``, else the one stored in the bucket when a bucket is named (None: no
    bucket; a dataset without a stored spec gets an empty one)."""
    from landfall.core.artifacts import specs

    if getattr(args, "spec", None):
        try:
            text = Path(args.spec).read_bytes()
        except OSError as exc:
            raise NotFound(f"spec {args.spec}: {exc.strerror or exc}") from None
        doc = specs.load_text(text, args.spec)
        if doc["name"] != args.dataset:
            raise Invalid(f"spec {args.spec} is dataset {doc['name']!r}'s, not {args.dataset!r}'s")
        return specs.DatasetSpec.from_document(doc, None)
    from landfall.cli.common import job_config

    bucket = job_config(args, "bucket").bucket
    return specs.for_dataset(storage, bucket, args.dataset) if bucket else None


def score(args: argparse.Namespace, storage: Storage | None = None) -> dict:
    from landfall.core import scoring

    storage = storage or Storage()
    model, files = model_of(args, storage)
    scorer = scoring.Scorer.load(storage, model, files=files)
    spec = spec_of(args, storage)
    combine = MEAN  # instances: one score each, no rows to combine
    if spec is not None and spec.series:
        combine = args.combine = args.combine or scorer.combine(spec.combine)  # its own unit, else the spec's
    threshold = args.threshold if args.threshold is not None else scoring.threshold_of(scorer, combine)
    if spec is not None and spec.series:
        if args.src.endswith(".json"):
            raise Invalid(f"dataset {spec.name} is a series dataset: score its series file (CSV, CSV.gz or "
                          "Parquet), not a manifest")
        from landfall.cli import score_series

        summary = score_series.score(args, storage, spec, model, scorer, threshold)
        if getattr(args, "plot", None):
            import pyarrow.parquet as pq

            from landfall.local import plots
            from landfall.views import page

            table = pq.read_table(summary["out"], columns=["time", "score"] + (["label"] if summary["label"] else []))
            if not summary["sorted"]:  # one row per row of the file, in its order: drawn in time's
                table = table.sort_by("time")
            plots.series_scores(page.scored_series(table, summary, name=summary["src"]), Path(args.plot))
        return summary
    from landfall.detect.score import score_instances

    out = args.out or f"{Path(args.src.rstrip('/')).name.split('.', 1)[0]}.scores.parquet"
    summary = score_instances(storage, args.src, model, scorer, threshold, out)
    summary.pop("ranges")
    return summary
