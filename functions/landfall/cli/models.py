"""``landfall promote --dataset D --run JOB`` and ``landfall rollback --dataset D``: a dataset's champion by hand.

``promote`` makes the run's model the champion whatever the losses say (``reason: forced``), recording who
asked (``--by``, else ``LANDFALL_ACTOR``, else the login name) and the run's own evaluation from its
``metrics.json``. ``rollback`` restores the champion before the current one (``reason: rollback``); a second
rollback goes one further back. Both are the guarded update of ``landfall.core.artifacts.champion``: a training job
finishing at the same moment cannot be overwritten unseen. Champions live in ``gs://BUCKET/models/<dataset>/``
(``--models`` names another root, a local folder for local job dirs).
"""

from __future__ import annotations

import argparse
import json
import sys

from landfall.cli.common import job_config, on_the_stack
from landfall.core.artifacts import champion, model_files
from landfall.core.contracts.layout import Layout
from landfall.core.errors import Invalid, NotFound
from landfall.core.services.storage import Storage, join


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", required=True)
    if name == "promote":
        p.add_argument("--run", required=True, help="the job whose model becomes the champion")
    p.add_argument("--by", help="who asks (default: LANDFALL_ACTOR, else the login name)")
    p.add_argument("--bucket", help="bucket (LANDFALL_BUCKET)")
    p.add_argument("--models", help="champions root (default gs://BUCKET/models)")
    p.add_argument("--runs", help="runs root for --run (default gs://BUCKET/runs)")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    return on_the_stack(args, promote if args.command == "promote" else rollback)


def roots(args: argparse.Namespace) -> tuple[Storage, str, str]:
    cfg = job_config(args, "bucket")
    if not (args.models or cfg.bucket):
        raise Invalid("no bucket: pass --bucket (or LANDFALL_BUCKET), or --models")
    models = args.models or champion.bucket_root(cfg.bucket)
    runs = getattr(args, "runs", None) or (f"gs://{cfg.bucket}/{Layout.load().runs_prefix.strip('/')}"
                                          if cfg.bucket else "")
    return Storage(cfg.project), models, runs


def _report(args: argparse.Namespace, outcome: champion.Outcome, verb: str) -> int:
    new = outcome.champion
    if args.json:
        print(json.dumps({"champion": json.loads(new.to_json()) if new else None,
                          "replaced": json.loads(outcome.replaced.to_json()) if outcome.replaced else None}, indent=2))
        return 0
    was = f" (was {outcome.replaced.run})" if outcome.replaced else ""
    print(f"{verb}: champion of {new.dataset} is {new.run} #{new.seq}{was}, by {new.promoted_by}: {new.model}")
    return 0


def promote(args: argparse.Namespace) -> int:
    storage, models, runs = roots(args)
    if not runs:
        raise Invalid("pass --runs (the runs root) or --bucket")
    job_dir = join(runs, args.run)
    try:
        doc = json.loads(storage.read_bytes(join(job_dir, "metrics.json")))
    except NotFound:
        raise NotFound(f"run {args.run} has no metrics.json under {runs}") from None
    except ValueError as exc:
        raise Invalid(f"run {args.run}: unreadable metrics.json: {exc}") from None
    if doc.get("status") != "succeeded":
        raise Invalid(f"run {args.run} has status {doc.get('status')!r}: only a finished run's model can be promoted")
    datasets = str(doc.get("dataset") or "").split(",")
    if args.dataset not in datasets:
        print(f"landfall promote: warning: run {args.run} trained on {doc.get('dataset')!r}, not {args.dataset!r}",
              file=sys.stderr)
    model = str(doc.get("model") or join(job_dir, "model"))
    if not storage.exists(join(model, "saved_model.pb")):
        raise NotFound(f"run {args.run}: no saved model at {model}")
    threshold = doc.get("threshold") if isinstance(doc.get("threshold"), dict) else {}
    evaluation = {"loss": doc.get("challenger_loss"), "metric": (doc.get("evaluation") or {}).get("metric"),
                  "instances": (doc.get("evaluation") or {}).get("instances"), "threshold": threshold.get("value")}
    outcome = champion.force(storage, models, args.dataset, run=args.run, model=model, evaluation=evaluation,
                             by=args.by or champion.who(), files=model_files.of_model(storage, model))
    return _report(args, outcome, "promoted")


def rollback(args: argparse.Namespace) -> int:
    storage, models, _ = roots(args)
    outcome = champion.rollback(storage, models, args.dataset, by=args.by or champion.who())
    return _report(args, outcome, "rolled back")
