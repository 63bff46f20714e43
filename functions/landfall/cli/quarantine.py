"""``landfall admit ARRIVAL`` and ``landfall reject ARRIVAL``: an operator's decision on a quarantined arrival.

An arrival whose checks against its dataset's reference quarantined it (docs/datasets.md#arrival-checks) is not
trained on until ``admit`` writes its admission record (who and when; its profile then joins the reference), or
``reject`` retracts it for good (a retraction record, reason ``rejected``, with who). ``ARRIVAL`` is an arrival id
with ``--dataset`` (and the bucket), or the URI (or local path) of its manifest. Who: ``--by``, else
``LANDFALL_ACTOR``, else the login name. Both are create-only: a second decision is refused or reported as the first.
"""

from __future__ import annotations

import argparse
import json
import sys

from landfall.cli.common import job_config, on_the_stack
from landfall.core.artifacts import champion
from landfall.core.contracts import layout
from landfall.core.contracts.layout import Layout
from landfall.core.errors import Invalid
from landfall.core.quality import quarantine
from landfall.core.services.storage import Storage


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    p.add_argument("arrival", help="an arrival id (with --dataset), or its manifest's URI or path")
    p.add_argument("--dataset", help="the arrival's dataset")
    p.add_argument("--bucket", help="bucket (LANDFALL_BUCKET)")
    p.add_argument("--by", help="who decides (default: LANDFALL_ACTOR, else the login name)")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    return on_the_stack(args, decide)


def manifest_uri(args: argparse.Namespace) -> tuple[Storage, str]:
    cfg = job_config(args, "bucket")
    storage = Storage(cfg.project)
    if args.arrival.endswith("/" + layout.MANIFEST):
        return storage, args.arrival
    if not args.dataset or not cfg.bucket:
        raise Invalid(f"arrival {args.arrival}: pass --dataset and --bucket (or LANDFALL_BUCKET), or the "
                      "manifest's URI")
    return storage, layout.gs(cfg.bucket, layout.manifest_name(Layout.load(), args.dataset, args.arrival))


def decide(args: argparse.Namespace) -> int:
    storage, uri = manifest_uri(args)
    by = args.by or champion.who()
    if args.command == "admit":
        record, wrote = quarantine.admit(storage, uri, by)
        doc, when = json.loads(record.to_json()), record.admitted_at
    else:
        retraction, wrote = quarantine.reject(storage, uri, by)
        doc, when = json.loads(retraction.to_json()), retraction.retracted_at
    if args.json:
        print(json.dumps({**doc, "written": wrote}, indent=2))
        return 0
    verb = "admitted" if args.command == "admit" else "rejected"
    again = "" if wrote else " (already, before this call)"
    print(f"{verb}{again}: {doc['arrival_id']} of {doc['dataset']} by {doc['by']} at {when}", file=sys.stdout)
    return 0
