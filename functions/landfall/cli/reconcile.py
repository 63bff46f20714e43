"""``landfall reconcile``: the production reconcile loop (``landfall.reconcile``), next to a cluster or, for the
``vertex`` engine, as the Cloud Run job ``landfall-reconcile`` that Cloud Scheduler starts every minute.

Configuration comes from ``LANDFALL_*`` (``JobConfig``: backend, namespace, bucket); flags win.
SIGTERM or SIGINT stops it after the current pass; so does ``--for-seconds`` once that long has passed (the
scheduled job: each execution reconciles for most of its minute, and the one that starts in an hour's first minute
also applies the collection rule, so the rule still runs once an hour across executions). The loop touches
``--heartbeat`` after every pass; ``landfall reconcile --check-heartbeat`` exits 0 while that file is younger than
``--max-age-s``, else 1: the Deployment's liveness probe. The probe runs every few seconds, so that path imports
almost nothing.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from landfall.core import logs
from landfall.reconcile import loop


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    from landfall.core.config import BACKENDS

    p.add_argument("--backend", choices=list(BACKENDS), help="default: LANDFALL_BACKEND")
    p.add_argument("--namespace")
    p.add_argument("--bucket", help="bucket (LANDFALL_BUCKET)")
    p.add_argument("--poll-s", type=float, default=loop.MIN_POLL_S)
    p.add_argument("--for-seconds", type=float, default=None,
                   help="stop after this long (a scheduled execution; default: run until SIGTERM)")
    p.add_argument("--heartbeat", default=loop.HEARTBEAT,
                   help=f"file touched after every pass (default {loop.HEARTBEAT}; '' for none)")
    p.add_argument("--check-heartbeat", action="store_true",
                   help="do not reconcile: exit 0 if the heartbeat is fresh, else 1 (a liveness probe)")
    p.add_argument("--max-age-s", type=float, default=loop.MAX_HEARTBEAT_AGE_S,
                   help=f"with --check-heartbeat: the oldest fresh heartbeat (default {loop.MAX_HEARTBEAT_AGE_S:g})")


def run(args: argparse.Namespace) -> int:
    heartbeat = getattr(args, "heartbeat", loop.HEARTBEAT)  # `landfall operator --backend kubernetes` has no flag
    if getattr(args, "check_heartbeat", False):
        return check_heartbeat(heartbeat, args.max_age_s)
    from landfall.core.services.storage import Storage
    from landfall.submit.backends import open_backend
    from landfall.submit.config import JobConfig

    logs.setup()
    cfg = JobConfig.load(backend=args.backend, namespace=args.namespace, bucket=args.bucket)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    for_seconds = getattr(args, "for_seconds", None)
    if for_seconds is not None:
        timer = threading.Timer(for_seconds, stop.set)
        timer.daemon = True
        timer.start()
    from landfall.core.services.pubsub import PubSub

    return loop.run(cfg, Storage(cfg.project), open_backend(cfg), stop, args.poll_s, heartbeat, PubSub(cfg.project),
                    collect_window_s=loop.SCHEDULE_S if for_seconds is not None else None)


def check_heartbeat(path: str, max_age_s: float) -> int:
    age = loop.heartbeat_age(path)
    if age is None or age > max_age_s:
        seen = "never written" if age is None else f"{age:.0f} s old"
        print(f"landfall reconcile: heartbeat {path} {seen} (max {max_age_s:g} s)", file=sys.stderr)
        return 1
    return 0
