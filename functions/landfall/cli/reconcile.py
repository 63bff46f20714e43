"""``landfall reconcile``: the production reconcile loop (``landfall.reconcile``), next to a cluster.

Configuration comes from ``LANDFALL_*`` (``JobConfig``: backend, namespace, bucket); flags win.
SIGTERM or SIGINT stops it after the current pass.
"""

from __future__ import annotations

import argparse
import signal
import threading

from landfall.core import logs
from landfall.core.storage import Storage
from landfall.reconcile import loop
from landfall.submit.backends import open_backend
from landfall.submit.config import JobConfig


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", choices=["local", "kubernetes"], help="default: LANDFALL_BACKEND")
    p.add_argument("--namespace")
    p.add_argument("--bucket", help="bucket (LANDFALL_BUCKET)")
    p.add_argument("--poll-s", type=float, default=loop.MIN_POLL_S)


def run(args: argparse.Namespace) -> int:
    logs.setup()
    cfg = JobConfig.load(backend=args.backend, namespace=args.namespace, bucket=args.bucket)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return loop.run(cfg, Storage(cfg.project), open_backend(cfg), stop, args.poll_s)
