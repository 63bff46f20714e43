"""``landfall operator [--state DIR]``: the local backend's controller (``landfall.local.tfjob_controller``).

It runs the TFJobs the submit function recorded in the state folder, as the training operator runs them
on a cluster, or with ``--engine jobset`` (``LANDFALL_ENGINE``) the JobSets, as the JobSet controller does
(``landfall.local.jobset_controller``). ``--backend kubernetes`` is kept for existing deployments: it runs the
production reconcile loop, which is ``landfall reconcile``.
"""

from __future__ import annotations

import argparse

from landfall.core import logs
from landfall.core.services.storage import Storage
from landfall.submit.config import BACKENDS, ENGINES, JobConfig


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    p.add_argument("--state", dest="local_state", help="state folder (LANDFALL_LOCAL_STATE)")
    p.add_argument("--backend", choices=list(BACKENDS))
    p.add_argument("--namespace")
    p.add_argument("--engine", choices=list(ENGINES), help="what it runs (LANDFALL_ENGINE, default tfjob)")
    p.add_argument("--poll-s", type=float, default=0.5)
    p.add_argument("--bucket", help="bucket (LANDFALL_BUCKET)")


def run(args: argparse.Namespace) -> int:
    logs.setup()
    cfg = JobConfig.load(local_state=args.local_state, backend=args.backend, namespace=args.namespace,
                         bucket=args.bucket, engine=getattr(args, "engine", None))
    if cfg.backend == "kubernetes":
        from landfall.cli import reconcile

        return reconcile.run(args)
    from landfall.local.controllers import make_operator

    op = make_operator(cfg.local_state, cfg.namespace, cfg, Storage(cfg.project), poll_s=args.poll_s)
    op.install_signal_handlers()
    return op.run()
