"""``landfall report [--out report.html] [--dataset ...]``: the bucket as one self-contained HTML page
(``landfall.views.page``): arrivals, champions, recent jobs with loss curves and verdicts, thresholds,
rejections, dead letters and pending requests, and ``--scored`` series files with their ranges. Read-only; next
to a ``landfall up`` stack it reads that stack unless a flag or variable names a target. Prints the page's path."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from landfall.cli.common import add_target_arguments, job_config, on_the_stack
from landfall.core.artifacts import detections
from landfall.core.errors import NotFound


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="report.html", help="where to write the page (default report.html)")
    add_target_arguments(p)
    p.add_argument("--dead-letter", action="append", default=None, metavar="SUBSCRIPTION",
                   help="dead-letter subscription to peek at (repeatable; default LANDFALL_DEAD_LETTER_SUBSCRIPTION "
                        "and the scorer's, LANDFALL_SCORER_DEAD_LETTER_SUBSCRIPTION)")
    p.add_argument("--no-dead-letter", action="store_true", help="do not peek at dead-letter subscriptions")
    p.add_argument("--scored", action="append", default=[], metavar="SCORES.parquet",
                   help="a scored series (landfall score on a series file) to draw with its ranges (repeatable)")


def run(args: argparse.Namespace) -> int:
    return on_the_stack(args, write_report)


def write_report(args: argparse.Namespace) -> int:
    """The command on its target (``run`` picks it): the page written, its path printed."""
    from landfall.cli.trace import open_reader
    from landfall.core.services.pubsub import PubSub
    from landfall.views import page

    cfg = job_config(args, "bucket", "backend", "local_state", "namespace", "project")
    if not cfg.bucket:
        raise NotFound("name the bucket: --bucket or LANDFALL_BUCKET")
    scorer = os.environ.get("LANDFALL_SCORER_DEAD_LETTER_SUBSCRIPTION", detections.SCORER_DEAD_LETTER)
    subscriptions = () if args.no_dead_letter else tuple(args.dead_letter or [cfg.dead_letter_subscription, scorer])
    path = page.write(Path(args.out), open_reader(cfg, cfg.bucket), None if args.no_dead_letter else
                        PubSub(cfg.project), subscriptions, tuple(args.scored))
    print(path.resolve())
    return 0
