"""``landfall up``, ``landfall demo``, ``landfall upload``, ``landfall scaling``: the system on this machine."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from landfall.core.config import ENGINES, Seed
from landfall.core.errors import LandfallError

SEED_UNITS = ",".join(map(str, Seed.UNITS))


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    if name == "up":
        p.add_argument("--state-dir", help="where everything lives (default .landfall, LANDFALL_STATE_DIR)")
        for port in ("pubsub", "gcs", "arrival", "submit"):
            p.add_argument(f"--{port}-port", type=int, help="default: a free port")
        p.add_argument("--bucket")
        p.add_argument("--workers", type=int, help="workers of each local TFJob (default 2)")
        p.add_argument("--engine", choices=list(ENGINES),
                       help="TFJobs, JobSets or Vertex AI CustomJobs (LANDFALL_ENGINE)")
        p.add_argument("--epochs", type=int)
        p.add_argument("--inline-max-bytes", type=int,
                       help="larger arrivals are converted by Cloud Run job tasks, here processes the local operator "
                            "starts (LANDFALL_INLINE_MAX_BYTES; default: the deployed per-format thresholds)")
    elif name == "demo":
        # Unset options take DemoOptions' defaults (landfall.local.demo): a shape that shows every stage within
        # 150 s on 2 CPU cores with the seed's model (issue #67); the batch is smaller than the seed's 1024 so the
        # small dataset still gives the optimizer enough steps.
        p.add_argument("--instances", type=int, help="instances of the first upload (default 4096)")
        p.add_argument("--workers", type=int, help="workers of each job (default 2)")
        p.add_argument("--engine", choices=list(ENGINES), default="tfjob",
                       help="TFJobs, JobSets or Vertex AI CustomJobs (on the local stand-in)")
        p.add_argument("--epochs", type=int, help="each job's epochs (default 3)")
        p.add_argument("--batch-size-per-worker", type=int, help="default 128")
        p.add_argument("--units", default=SEED_UNITS, help=f"GRU units of the encoder (the seed's {SEED_UNITS})")
        p.add_argument("--min-skill", type=float,
                       help="the verdict's floor: promoted only at 1 - loss / baseline loss >= this (default 0.1)")
        p.add_argument("--out", default="./landfall-demo")
        p.add_argument("--stage-timeout", type=float,
                       help="fail a stage that makes no progress for this many seconds (default 150)")
        p.add_argument("--no-follow-up", action="store_true", help="skip the second, coalesced arrival")
        p.add_argument("--keep-running", action="store_true", help="leave the stack up afterwards")
        p.add_argument("--inline-max-bytes", type=int,
                       help="uploads larger than this are converted by Cloud Run job tasks, here local processes "
                            "(default 4000000: the first upload of the default demo takes that path)")
        p.add_argument("--task-bytes", type=int,
                       help="bytes per conversion task of such an upload (default 2000000: three tasks)")
    elif name == "upload":
        p.add_argument("file")
        p.add_argument("--dataset", required=True)
        p.add_argument("--state-dir", default=os.environ.get("LANDFALL_STATE_DIR", ".landfall"))
        p.add_argument("--name", help="object name under incoming/<dataset>/ (default: the file's name)")
    elif name == "scaling":
        p.add_argument("--workers", default="1,2,4", help="worker counts, comma-separated")
        p.add_argument("--instances", type=int, default=8192)
        p.add_argument("--epochs", type=int, default=3)
        p.add_argument("--batch-size-per-worker", type=int, default=256)
        p.add_argument("--units", default=SEED_UNITS)
        p.add_argument("--from-runs", help="read finished runs' metrics.json under this gs:// prefix instead")
        p.add_argument("--engine", default="tfjob",
                       help=f"one or more of {', '.join(ENGINES)} (comma-separated): what runs each count")
        p.add_argument("--out", default="./landfall-scaling")


def run(args: argparse.Namespace) -> int:
    return {"up": up, "demo": demo, "upload": upload, "scaling": scaling}[args.command](args)


def up(args: argparse.Namespace) -> int:
    from landfall.core import logs
    from landfall.local.stack import Stack, StackConfig, wait_for_signal

    logs.setup()
    cfg = StackConfig.load(state_dir=args.state_dir, pubsub_port=args.pubsub_port, gcs_port=args.gcs_port,
                           arrival_port=args.arrival_port, submit_port=args.submit_port, bucket=args.bucket,
                           workers=args.workers, epochs=args.epochs, inline_max_bytes=args.inline_max_bytes,
                           engine=args.engine)
    stack = Stack(cfg)
    try:
        stack.start()
    except LandfallError as exc:
        print(f"landfall up: {exc}", file=sys.stderr)
        return 1
    try:
        i = stack.info
        print(f"""Landfall is up (state: {i['state_dir']}).
  Pub/Sub emulator     {i['pubsub_emulator_host']}
  fake-gcs-server      {i['storage_emulator_host']}   bucket gs://{i['bucket']}
  on_data_arrival      {i['functions']['on_data_arrival']}
  on_training_request  {i['functions']['on_training_request']}
  local operator       pid {i['processes']['operator']}, jobs under {i['local_state']}

Use it from another shell:
{stack.exports()}

Drop a file in:   landfall upload FILE --dataset NAME   (or any client writing gs://{i['bucket']}/incoming/NAME/...)
Watch:            landfall status
Ctrl-C or SIGTERM stops everything.""", flush=True)
        return wait_for_signal(stack)
    finally:
        stack.stop()


def demo(args: argparse.Namespace) -> int:
    from landfall.core import logs
    from landfall.local.demo import DemoOptions
    from landfall.local.demo import run as run_demo

    logs.setup(level="WARNING")
    given = {"instances": args.instances, "workers": args.workers, "epochs": args.epochs,
             "batch_size_per_worker": args.batch_size_per_worker, "stage_timeout": args.stage_timeout,
             "inline_max_bytes": args.inline_max_bytes, "task_bytes": args.task_bytes}
    return run_demo(DemoOptions(engine=args.engine, units=args.units, out=args.out, min_skill=args.min_skill,
                                keep_running=args.keep_running, follow_up=not args.no_follow_up,
                                **{k: v for k, v in given.items() if v is not None}))


def upload(args: argparse.Namespace) -> int:
    from landfall.core.services.storage import Storage
    from landfall.local.stack import named_target, read_running, use_running_stack

    use_running_stack(args.state_dir, args)
    bucket = os.environ.get("LANDFALL_BUCKET")
    if not bucket:
        running = read_running(args.state_dir)
        target = named_target(args, running) if running and "processes" in running else None
        why = (f"a stack runs on {args.state_dir} but {target} names another target" if target
               else f"no stack running on {args.state_dir}")
        print(f"landfall upload: {why} and LANDFALL_BUCKET is not set", file=sys.stderr)
        return 1
    uri = f"gs://{bucket}/incoming/{args.dataset}/{args.name or Path(args.file).name}"
    try:
        Storage().upload(args.file, uri)
    except (LandfallError, OSError) as exc:
        print(f"landfall upload: {args.file}: {exc}", file=sys.stderr)
        return 1
    print(uri)
    return 0


def scaling(args: argparse.Namespace) -> int:
    from landfall.core import logs
    from landfall.local.scaling import ScalingOptions
    from landfall.local.scaling import run as run_scaling

    logs.setup(level="WARNING")
    try:
        workers = [int(w) for w in args.workers.split(",") if w.strip()]
    except ValueError:
        print(f"landfall scaling: --workers {args.workers!r} must be comma-separated integers", file=sys.stderr)
        return 2
    engines = [e.strip() for e in args.engine.split(",") if e.strip()]
    if not engines or set(engines) - set(ENGINES):
        print(f"landfall scaling: --engine {args.engine!r} must name one or more of {', '.join(ENGINES)}",
              file=sys.stderr)
        return 2
    table = run_scaling(ScalingOptions(workers=workers, instances=args.instances, epochs=args.epochs,
                                       batch_size_per_worker=args.batch_size_per_worker, units=args.units,
                                       from_runs=args.from_runs, out=args.out,
                                       engines=engines))
    print(json.dumps(table, indent=2))
    return 0
