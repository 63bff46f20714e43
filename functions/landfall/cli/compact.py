"""``landfall compact --bucket B --dataset D``: compacts a dataset's small arrivals into shards of about
``--target-bytes`` and creates the snapshot that names them (``landfall.arrival.compaction``), then deletes
the snapshots and shards the collection rule allows (``landfall.core.artifacts.snapshots``). Prints one JSON line per
dataset."""

from __future__ import annotations

import argparse
import json

from landfall.arrival.config import ConverterConfig
from landfall.core import logs


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    p.add_argument("--bucket", help="bucket (LANDFALL_BUCKET)")
    p.add_argument("--dataset", action="append", required=True, help="repeatable")
    p.add_argument("--target-bytes", type=int, help="default: LANDFALL_SHARD_TARGET_BYTES")
    p.add_argument("--if-needed", action="store_true",
                   help="only past the trigger's thresholds (uncompacted arrivals or bytes)")


def run(args: argparse.Namespace) -> int:
    from landfall.core.services.storage import Storage
    from landfall.local import compactor
    from landfall.submit.config import JobConfig

    logs.setup()
    cfg = JobConfig.load(bucket=args.bucket)
    if not cfg.bucket:
        print("landfall compact: no bucket (--bucket or LANDFALL_BUCKET)")
        return 2
    target = args.target_bytes or ConverterConfig.load().shard_target_bytes
    storage = Storage(cfg.project)
    for dataset in args.dataset:
        print(json.dumps(compactor.run(storage, cfg.bucket, dataset, target, policy=cfg.concurrency,
                                        if_needed=args.if_needed)))
    return 0
