"""``landfall bench serving [--recording 075] [--repeats 3]``: what serving each candidate costs the scorer.

Every detector, default and opt-in (``trainer.judging.baselines.OPT_IN``), is fitted on one multivariate recording's
training prefix as a job's verdict fits it (``landfall_bench.protocol``: the first channel's period as the window, seed
0's training windows) and saved as the verdict saves a champion (``trainer.judging.detectors``: a SavedModel, never a
pickle). Then, per detector, medians over ``--repeats``:

- **cold start**: a new Python process that imports the scorer (``landfall.core.scoring``, TensorFlow with it) and loads
  the champion's folder, to its first score of one window: what a scorer instance pays before its first request;
- **load**: ``Scorer.load`` in a process that has TensorFlow already (a champion changed under a running scorer);
- **score**: every row of the whole recording scored as detection on arrival scores it (``landfall.detect.located``:
  the windows at the dataset's stride, a champion that scores rows alone at a window's stride), and rows per second;
- **size**: the folder's bytes.

Printed as a table; ``--out DIR`` also writes ``serving.json``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

COLD = ("import sys, time; t0 = time.perf_counter(); from landfall.core.scoring import Scorer; "
        "from landfall.core.services.storage import Storage; import numpy as np; "
        "s = Scorer.load(Storage(), sys.argv[1]); s.errors(np.zeros((1, *s.shape), np.float32)); "
        "print(time.perf_counter() - t0)")


def panel_of(recording: str):
    """Every detector fitted on ``recording``'s training prefix (the opt-in ones registered for it)."""
    from landfall.arrival import period
    from landfall_bench import protocol
    from landfall_bench.realdata import sliding_windows
    from trainer.judging import baselines

    name = next(n for n in protocol.mv_docs() if n.startswith(recording))
    data = protocol.mv_series(name)
    values, n_train = data["values"], data["train_rows"]
    w = period.length(values[:, 0])
    for module in baselines.OPT_IN:
        baselines.register(importlib.import_module(module).Detector)
    x = sliding_windows(values[:n_train], w, 1).astype("<f4")
    stats = x.reshape(-1, x.shape[2]).astype(np.float64)
    train_mask, _ = protocol.split_masks(0, len(x), w)
    panel = baselines.Panel.fit([x[train_mask]], int(train_mask.sum()), stats.mean(0), stats.std(0),
                                (w, values.shape[1]), 32)
    return name, values, w, panel


def scored(scorer, values: np.ndarray, window: int, stride: int) -> float:
    """Seconds to score every row of ``values`` as detection on arrival does."""
    from landfall.core.rules.series_windows import MEAN, ROW, served_stride
    from landfall.detect.located import Locator

    unit = scorer.combine(MEAN)
    t0 = time.perf_counter()
    loc = Locator(window, served_stride(unit, scorer.alone, window, stride), float("inf"),
                  scorer.row_errors if unit == ROW else scorer.errors, combine=unit)
    for _ in [*loc.feed(np.arange(len(values), dtype=np.float64), values), *loc.finish()]:
        pass
    return time.perf_counter() - t0


def run(recording: str, repeats: int) -> tuple[str, list[dict]]:
    from landfall.core.scoring import Scorer
    from landfall.core.services.storage import Storage
    from trainer.judging import baselines, detectors

    name, values, w, panel = panel_of(recording)
    stride = max(1, w // 4)  # landfall_bench.detections' dataset: a quarter of the window
    rows = []
    with tempfile.TemporaryDirectory(prefix="landfall-serving-") as tmp:
        for detector in [baselines.MEAN_WINDOW, *panel.kinds]:
            folder = detectors.save(panel, detector, Path(tmp) / detector)
            size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
            cold, load, score = [], [], []
            for _ in range(repeats):
                out = subprocess.run([sys.executable, "-c", COLD, str(folder)], capture_output=True, text=True,
                                     check=True, env={"TF_CPP_MIN_LOG_LEVEL": "3", **os.environ})
                cold.append(float(out.stdout.strip().splitlines()[-1]))
                t0 = time.perf_counter()
                scorer = Scorer.load(Storage(), str(folder))
                load.append(time.perf_counter() - t0)
                score.append(scored(scorer, values, w, stride))
            row = {"detector": detector, "unit": scorer.combine("mean"), "alone": scorer.alone, "bytes": size,
                   "cold_start_s": float(np.median(cold)), "load_s": float(np.median(load)),
                   "score_s": float(np.median(score)), "rows": len(values)}
            rows.append(row)
            print(f"  {detector}: cold start {row['cold_start_s']:.2f} s, load {row['load_s']:.3f} s, score "
                  f"{row['score_s']:.2f} s ({len(values) / row['score_s']:,.0f} rows/s)", flush=True)
    return name, rows


def table(name: str, rows: list[dict]) -> str:
    lines = [f"{name}: the whole recording scored as detection on arrival scores it, medians", "",
             "| detector | unit | served size | cold start (import, load, first score) | load | score | rows/s |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['detector']} | {r['unit']}{' (alone)' if r['alone'] else ''} | "
                     f"{r['bytes'] / 1e6:.2f} MB | {r['cold_start_s']:.2f} s | {r['load_s']:.3f} s | "
                     f"{r['score_s']:.2f} s | {r['rows'] / r['score_s']:,.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="landfall bench serving", description=__doc__.split("\n\n")[0])
    p.add_argument("--recording", default="075", help="a multivariate dev recording, by its name's start")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", help="write serving.json here")
    args = p.parse_args(argv)
    name, rows = run(args.recording, args.repeats)
    print(table(name, rows))
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "serving.json").write_text(json.dumps({"recording": name, "rows": rows}, indent=2))
    return 0
