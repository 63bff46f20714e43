"""``landfall convert SRC --out DST``: the data-arrival conversion from the command line.

Same code as the function: SRC and DST may be local paths or gs:// URIs. Bad input exits 2 with one
line naming the file and the reason; a storage outage exits 75 (EX_TEMPFAIL). ``--tasks N`` (N > 1) runs the
ranged conversion as N local processes (``landfall.arrival.ranged_local``), as a Cloud Run job would.
"""

from __future__ import annotations

import argparse
import sys

from landfall.arrival import converter, ranged_local
from landfall.arrival.config import ConverterConfig
from landfall.core.contracts.messages import Manifest
from landfall.core.errors import BadInput, NotFound, TemporaryError
from landfall.core.services.storage import Storage


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    p.add_argument("src", help="input file: .npy, .npz, .csv, .csv.gz or .parquet (local path or gs:// URI)")
    p.add_argument("--out", required=True, help="output folder or gs:// prefix for shards and manifest.json")
    p.add_argument("--dataset", help="dataset name recorded in the manifest (default: the input's stem)")
    p.add_argument("--shape", help="instance shape T,F (default 36,10)")
    p.add_argument("--shard-target-bytes", type=int, help="about this many bytes per shard (default 128 MiB)")
    p.add_argument("--drop-nonfinite", action="store_true", default=None, help="drop NaN/Inf instances")
    p.add_argument("--npz-array", help="the array to take from an .npz holding several")
    p.add_argument("--tasks", type=int, default=1,
                   help="convert in N processes, each a disjoint range of SRC (ranged conversion; default 1)")


def run(args: argparse.Namespace) -> int:
    try:
        shape = [int(v) for v in args.shape.split(",")] if args.shape else [None, None]
        if len(shape) != 2:
            raise ValueError
    except ValueError:
        print(f"landfall convert: --shape {args.shape!r} must be T,F", file=sys.stderr)
        return 2
    cfg = ConverterConfig.load(timesteps=shape[0], features=shape[1], shard_target_bytes=args.shard_target_bytes,
                               drop_nonfinite=args.drop_nonfinite, npz_array=args.npz_array)
    dataset = args.dataset or args.src.rstrip("/").rsplit("/", 1)[-1].split(".", 1)[0]
    if args.tasks < 1:
        print(f"landfall convert: --tasks {args.tasks} must be at least 1", file=sys.stderr)
        return 2
    progress = _progress_bar() if args.tasks == 1 else None
    try:
        if args.tasks > 1:
            manifest = _ranged(args, dataset, cfg)
        else:
            manifest = converter.convert(args.src, args.out, dataset, cfg, Storage(cfg.project),
                                         progress=progress.update if progress else None)
    except (BadInput, _Rejected) as exc:
        print(f"landfall convert: {args.src}: {exc.reason}: {exc.detail}", file=sys.stderr)
        return 2
    except NotFound as exc:
        print(f"landfall convert: {exc}", file=sys.stderr)
        return 2
    except TemporaryError as exc:
        print(f"landfall convert: {args.src}: temporary failure, retry: {exc}", file=sys.stderr)
        return 75
    finally:
        if progress:
            progress.close()
    print(f"{manifest.count} instances of shape {manifest.shape} in {len(manifest.shards)} shards"
          f"{f', {manifest.dropped_nonfinite} non-finite dropped' if manifest.dropped_nonfinite else ''}")
    for shard in manifest.shards:
        print(f"  {shard.uri}  {shard.count} records  {shard.bytes} bytes")
    print(f"  {args.out.rstrip('/')}/manifest.json")
    return 0


class _Rejected(Exception):
    """A ranged task's rejection record, as the tasks wrote it (``landfall.rejection/v1``)."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


def _ranged(args: argparse.Namespace, dataset: str, cfg: ConverterConfig) -> Manifest:
    """N task processes; the flags reach them as ``LANDFALL_*`` settings."""
    settings = {"LANDFALL_TIMESTEPS": str(cfg.timesteps), "LANDFALL_FEATURES": str(cfg.features),
                "LANDFALL_SHARD_TARGET_BYTES": str(cfg.shard_target_bytes),
                "LANDFALL_DROP_NONFINITE": str(cfg.drop_nonfinite).lower(), "LANDFALL_NPZ_ARRAY": cfg.npz_array or ""}
    run = ranged_local.run_local(args.src, args.out, tasks=args.tasks, dataset=dataset, settings=settings,
                                 storage=Storage(cfg.project))
    if run.manifest is not None:
        return run.manifest
    if run.rejection is not None:
        raise _Rejected(run.rejection["reason"], run.rejection["detail"])
    failed = [t.index for t in run.tasks if t.returncode != 0]
    raise TemporaryError(f"tasks {failed} failed after {max(t.attempts for t in run.tasks)} attempts")


class _Bar:
    def __init__(self) -> None:
        from tqdm import tqdm

        self.bar = tqdm(unit=" instances", file=sys.stderr, disable=not sys.stderr.isatty())
        self.last = 0

    def update(self, instances: int, shards: int) -> None:
        self.bar.update(instances - self.last)
        self.bar.set_postfix(shards=shards)
        self.last = instances

    def close(self) -> None:
        self.bar.close()


def _progress_bar() -> _Bar | None:
    try:
        return _Bar()
    except ImportError:  # tqdm ships with the `local` extra, not with the functions
        return None
