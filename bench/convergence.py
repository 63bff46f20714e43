"""``landfall bench train --convergence``: a fixed ceiling of epochs against early stopping, on a real series.

The series is Daphnet S06R02E0 (``landfall_bench.realdata.daphnet``: 7,040 rows of 9 acceleration channels, a
public recording shipped with aeon, see bench/data/README.md), cut into stride-``--convergence-stride`` windows of
``--convergence-window`` rows and converted by the real converter. Each contender is a real ``landfall train``
process (one worker, the same seed, so the same hold-out split and initial weights):

- ``ceiling``: ``--early-stopping-patience 0``, every one of ``--convergence-epochs`` epochs;
- ``early``: the default stopping rule (``trainer.training.stopping``: the mean val_loss of the last 10 epochs, patience
  20, min_delta 0.005, min_gain 0.01), the same ceiling.

Both run ``--deterministic`` (every epoch's batches a function of seed, worker and epoch): without it two runs of
the same settings differ by tens of percent on this series (measured), which would swamp the comparison; with it
the early-stopping run is exactly the ceiling run until it stops.

For each it reports the final held-out loss (the verdict's ``challenger_loss``: reconstruction MSE in the data's
original units on the held-out windows, of the weights the run keeps, its best epoch's), the epochs run, and the
GPU-seconds (``LANDFALL_GPUS_PER_WORKER=1``: one GPU for the run's wall time; on a CPU machine this prices the
CPU time as if it were a GPU's). Goal: early stopping within 2 % of the ceiling's loss at no more than 60 % of its
epochs. Repeated over ``--convergence-seeds`` seeds; the ratios' medians are the figures.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from landfall.arrival.config import ConverterConfig
from landfall.arrival.converter import convert
from landfall.core.services.storage import Storage
from landfall_bench import realdata


def windows(width: int, stride: int) -> np.ndarray:
    _, values, _ = realdata.daphnet()
    return realdata.sliding_windows(values, width, stride).astype(np.float32)


def run(manifest: str, work: Path, name: str, epochs: int, seed: int, extra: list[str], args) -> dict:
    job_dir = work / name
    env = {**os.environ, "LANDFALL_GPUS_PER_WORKER": "1", "LANDFALL_ACCELERATOR": "nvidia-l4"}
    env.pop("TF_CONFIG", None)
    cmd = [sys.executable, "-m", "trainer.task", "--manifest", manifest, "--job-dir", str(job_dir),
           "--epochs", str(epochs), "--batch-size-per-worker", str(args.convergence_batch),
           "--units", args.convergence_units, "--timesteps", str(args.convergence_window), "--features", "9",
           "--learning-rate", str(args.convergence_learning_rate), "--seed", str(seed),
           "--holdout", "blocks", "--min-skill", "-1", "--work-dir", str(work / f"{name}-work"), "--verbose", "0",
           # The same batches in both contenders: the early-stopping run is the ceiling run's prefix until it stops,
           # so the difference is what stopping cost, not two runs' noise.
           "--deterministic",
           *extra]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"landfall train ({name}) failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    m = json.loads((job_dir / "metrics.json").read_text())
    return {"loss": m["challenger_loss"], "epochs_run": m["epochs_run"], "best_epoch": m["best_epoch"],
            "stopped_early": m["stopped_early"], "gpu_seconds": m["gpu_seconds"], "skill": m["skill"],
            "ceiling_gpu_seconds": m["ceiling_gpu_seconds"]}


def main(args) -> int:
    with tempfile.TemporaryDirectory(prefix="landfall-bench-convergence-") as tmp:
        work = Path(args.work_dir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        x = windows(args.convergence_window, args.convergence_stride)
        np.save(work / "daphnet.npy", x)
        cfg = ConverterConfig.load({}, timesteps=args.convergence_window, features=9)
        convert(str(work / "daphnet.npy"), str(work / "tfrecords"), "daphnet", cfg, Storage())
        manifest = str(work / "tfrecords" / "manifest.json")
        print(f"Daphnet S06R02E0: {len(x)} windows of {args.convergence_window} x 9 (stride "
              f"{args.convergence_stride}); ceiling {args.convergence_epochs} epochs, units {args.convergence_units}",
              flush=True)
        rows = []
        for seed in range(args.convergence_seeds):
            ceiling = run(manifest, work, f"ceiling-{seed}", args.convergence_epochs, seed,
                          ["--early-stopping-patience", "0"], args)
            early = run(manifest, work, f"early-{seed}", args.convergence_epochs, seed, [], args)
            row = {"seed": seed, "ceiling": ceiling, "early": early,
                   "loss_ratio": round(early["loss"] / ceiling["loss"], 4),
                   "epochs_ratio": round(early["epochs_run"] / ceiling["epochs_run"], 4),
                   "gpu_seconds_ratio": round(early["gpu_seconds"] / ceiling["gpu_seconds"], 4)
                   if ceiling["gpu_seconds"] else None}
            rows.append(row)
            print(f"  seed {seed}: ceiling loss {ceiling['loss']:.5g} in {ceiling['epochs_run']} epochs "
                  f"({ceiling['gpu_seconds']:.0f} GPU-s, best epoch {ceiling['best_epoch']}); early stopping "
                  f"{early['loss']:.5g} in {early['epochs_run']} epochs ({early['gpu_seconds']:.0f} GPU-s, best "
                  f"{early['best_epoch']}): loss x{row['loss_ratio']:.3f}, epochs x{row['epochs_ratio']:.2f}, "
                  f"GPU-s x{row['gpu_seconds_ratio']}", flush=True)
        med = {k: statistics.median(r[k] for r in rows if r[k] is not None)
               for k in ("loss_ratio", "epochs_ratio", "gpu_seconds_ratio")}
        ok = med["loss_ratio"] <= 1.02 and med["epochs_ratio"] <= 0.60
        print(f"median over {len(rows)} seeds: loss x{med['loss_ratio']:.3f} (goal <= 1.02), epochs "
              f"x{med['epochs_ratio']:.2f} (goal <= 0.60), GPU-seconds x{med['gpu_seconds_ratio']:.2f}: "
              f"{'goal met' if ok else 'goal NOT met'}", flush=True)
        result = {"series": "Daphnet S06R02E0", "windows": len(x), "window": args.convergence_window,
                  "stride": args.convergence_stride, "ceiling_epochs": args.convergence_epochs,
                  "units": args.convergence_units, "rows": rows, "median": med, "goal_met": ok}
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2))
    return 0
