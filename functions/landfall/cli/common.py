"""What the commands share: their ``JobConfig`` from the environment and flags, one line on stderr (exit 1) for an
error Landfall raised on purpose, and the running ``landfall up`` stack as their default target."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from landfall.core import logs
from landfall.core.errors import LandfallError
from landfall.submit.config import JobConfig


def job_config(args: argparse.Namespace, *fields: str) -> JobConfig:
    """``LANDFALL_*`` first, then the flags of ``fields`` that were given."""
    return JobConfig.load(**{f: getattr(args, f, None) for f in fields})


def add_target_arguments(p: argparse.ArgumentParser) -> None:
    """The flags that name what a read-only command looks at: the bucket, the job backend and the project."""
    p.add_argument("--bucket", help="bucket (LANDFALL_BUCKET)")
    p.add_argument("--backend", choices=["local", "kubernetes"])
    p.add_argument("--state", dest="local_state", help="local backend state folder (LANDFALL_LOCAL_STATE)")
    p.add_argument("--namespace")
    p.add_argument("--project", help="Google Cloud project (GOOGLE_CLOUD_PROJECT)")


def reporting_errors(args: argparse.Namespace, command: Callable[[argparse.Namespace], int]) -> int:
    try:
        return command(args)
    except LandfallError as exc:
        print(f"landfall {args.command}: {exc}", file=sys.stderr)
        return 1


def on_the_stack(args: argparse.Namespace, command: Callable[[argparse.Namespace], int]) -> int:
    """``command`` with logs set up and, unless a flag or variable names another target, pointed at the stack that
    ``landfall up`` runs (``landfall.local.stack.use_running_stack``); its errors as ``reporting_errors`` says."""
    from landfall.local.stack import use_running_stack

    logs.setup()
    use_running_stack(args=args)
    return reporting_errors(args, command)
