"""Hold-out on overlapping windows: ``random`` against ``blocks`` (``landfall.core.rules.holdout``), on a real series.

``python -m landfall_bench.holdout [--epochs 12] [--timesteps 32] [--out DIR]``: Daphnet S06R02E0 (9 channels,
7,040 rows; ``landfall_bench.realdata``) is cut in time into ``--chunks`` chunks; the even ones are cut into stride-1
windows of ``--timesteps`` rows (one arrival each, converted by the real converter) and trained with ``landfall
train`` once per hold-out mode, the same seed, model and epochs; the odd ones, interleaved with them so they come from
the same stretches of the recording but never trained on by either, are the reference ("unseen"). For each mode it
prints the mean reconstruction error (MSE in original units, ``landfall.core.scoring``) on the training records, on that
mode's own held-out records (what ``val_loss``, the threshold and the verdict see) and on the unseen windows. A
hold-out is honest when its error is close to the unseen one; ``random`` puts near-identical windows on both sides.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from landfall.arrival.config import ConverterConfig
from landfall.arrival.converter import convert
from landfall.core.rules import holdout
from landfall.core.services.storage import Storage
from landfall_bench.realdata import daphnet, sliding_windows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m landfall_bench.holdout", description=__doc__.split("\n", 1)[0])
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--chunks", type=int, default=10)
    p.add_argument("--timesteps", type=int, default=32)
    p.add_argument("--units", default="32,8")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--out", default="")
    args = p.parse_args(argv)
    work = Path(args.out or tempfile.mkdtemp(prefix="landfall-holdout-"))
    work.mkdir(parents=True, exist_ok=True)
    _, values, _ = daphnet()
    storage = Storage()
    cfg = ConverterConfig.load({}, timesteps=args.timesteps, features=values.shape[1])
    pieces = np.array_split(values, args.chunks)
    arrivals, unseen_parts, manifests = [], [], []
    for k, piece in enumerate(pieces):
        windows = sliding_windows(piece, args.timesteps)
        if k % 2:
            unseen_parts.append(windows)
            continue
        aid = f"daphnet-{k:02d}"
        src = work / f"{aid}.npy"
        np.save(src, windows)
        convert(str(src), str(work / "tfrecords" / aid), "daphnet", cfg, storage, arrival_id=aid)
        arrivals.append((aid, windows))
        manifests += ["--manifest", str(work / "tfrecords" / aid / "manifest.json")]
    tail = np.concatenate(unseen_parts)
    head = np.concatenate([w for _, w in arrivals])
    rows = []
    for mode in holdout.MODES:
        job = work / "runs" / mode
        cmd = [sys.executable, "-m", "trainer.task", *manifests, "--job-dir", str(job),
               "--epochs", str(args.epochs), "--batch-size-per-worker", str(args.batch), "--units", args.units,
               "--timesteps", str(args.timesteps), "--features", str(values.shape[1]), "--seed", str(args.seed),
               "--holdout", mode, "--warm-start", "none", "--verbose", "0"]
        started = time.monotonic()
        subprocess.run(cmd, check=True, env={**os.environ, "CUDA_VISIBLE_DEVICES": "-1", "LANDFALL_RESULTS_TOPIC": ""})
        took = time.monotonic() - started
        from landfall.core.scoring import Scorer

        scorer = Scorer.load(storage, str(job / "model"))
        split = holdout.Split(args.seed, 0.1, mode, args.timesteps)
        sides = [split.sides(aid, np.arange(len(w))) for aid, w in arrivals]
        train, val = np.concatenate([t for t, _ in sides]), np.concatenate([v for _, v in sides])
        held, unseen, trained = (float(scorer.errors(x).mean()) for x in (head[val], tail, head[train]))
        rows.append({"holdout": mode, "train_windows": int(train.sum()), "held_out_windows": int(val.sum()),
                     "gap_windows": int((~train & ~val).sum()), "train_mse": trained, "held_out_mse": held,
                     "unseen_mse": unseen, "held_out_over_unseen": held / unseen, "seconds": round(took, 1)})
    print(f"Daphnet S06R02E0, {len(head)} stride-1 windows of {args.timesteps} x {values.shape[1]} in {len(arrivals)} "
          f"arrivals (chunks 0, 2, ...), unseen: {len(tail)} windows of the chunks between; units {args.units}, "
          f"{args.epochs} epochs, batch {args.batch}")
    print("| holdout | train / held out / gap windows | train MSE | held-out MSE | unseen MSE | held-out / unseen |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['holdout']} | {r['train_windows']} / {r['held_out_windows']} / {r['gap_windows']} | "
              f"{r['train_mse']:.0f} | {r['held_out_mse']:.0f} | {r['unseen_mse']:.0f} | "
              f"{r['held_out_over_unseen']:.2f} |")
    (work / "holdout.json").write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
