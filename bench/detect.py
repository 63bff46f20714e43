"""Detection quality on public labelled series: the model against the detectors a data scientist tries first.

``landfall bench detect-options [--series kdd135,ecg3,basic_motions] [--seeds 3] [--epochs 30] [--window 64]
[--options default,small] [--out DIR]``

For each labelled series (``landfall_bench.realdata.labelled_series``: UCR InternalBleeding16 (KDD-TSAD 135),
GutenTAG ecg-diff-count-3 and BasicMotions' Walking with Running put in, all from the aeon 1.6.0 wheel):

1. the normal training part is cut into stride-1 windows of ``--window`` rows, converted by the real converter (one
   arrival) and trained on by the real trainer (``python -m trainer.task``: the ``segment`` hold-out, early stopping
   with ``--epochs`` as the ceiling), once per seed and per model option (``--options``: ``default`` is the seed's
   GRU 128 -> 32 with dropout 0.2; ``small`` GRU 32 -> 8; ``nodrop`` the seed's GRU without dropout; ``dense`` the
   ``dense`` model kind, 128 -> 32 without dropout);
2. the baselines (``trainer.judging.baselines``: the mean window, PCA with the model's code size, the nearest neighbour
   from a sample of 4,096 training windows) are fitted on the same training windows;
3. every detector scores the test part's stride-1 windows (reconstruction MSE in original units) and each row gets
   the mean of the errors of the windows covering it (``landfall score``'s ``mean`` location, TimeEval's reverse
   windowing);
4. against the test part's labels per row: **AP** (average precision,
   ``trainer.judging.labelled_check.average_precision``, as scikit-learn defines it) and **VUS-PR**
   (``landfall.core.rules.vus``, buffers 0 to the window length).

It prints one table per series (the model's figures as medians over the seeds, with their range) and writes
``detect.json``. A run takes minutes per series and option on a laptop's CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from landfall.arrival.config import ConverterConfig
from landfall.arrival.converter import convert
from landfall.core.services.storage import Storage
from landfall.detect.located import Locator
from landfall_bench.realdata import LABELLED, labelled_series, sliding_windows

OPTIONS = {"default": ["--units", "128,32"], "small": ["--units", "32,8"],
           "nodrop": ["--units", "128,32", "--dropout", "0"],
           "dense": ["--model-kind", "dense", "--units", "128,32", "--dropout", "0"],
           "dense-wide": ["--model-kind", "dense", "--units", "256,64", "--dropout", "0"],
           "dense-narrow": ["--model-kind", "dense", "--units", "128,16", "--dropout", "0"]}


def located(errors: Callable[[np.ndarray], np.ndarray], rows: np.ndarray, window: int,
            combine: str = "mean", stride: int = 1) -> np.ndarray:
    """Each row's score as ``landfall score`` gives it (``landfall.detect.located.Locator``, ``mean``: the mean error of
    the stride-1 windows covering the row), ``errors`` turning a block of windows into one error each (for ``combine``
    ``row``, each window row's own error: ``[n, window]``). ``stride``: rows between windows (a detector whose rows
    are scored alone, by rows, gives the same scores at any stride: ``landfall.detect.score``)."""
    locator = Locator(window, stride, float("inf"), errors, combine=combine)
    times = np.arange(len(rows), dtype=np.float64)
    blocks = [*locator.feed(times, rows), *locator.finish()]
    return np.concatenate([b.scores for b in blocks])


def figures(labels: np.ndarray, scores: np.ndarray, window: int) -> dict[str, float]:
    from trainer.judging.labelled_check import ranking

    return ranking(labels, scores, window)


def train(work: Path, windows: np.ndarray, window: int, option: str, seed: int, epochs: int) -> Path:
    storage = Storage()
    aid = "train"
    src = work / "train.npy"
    if not src.exists():
        np.save(src, windows)
        cfg = ConverterConfig.load({}, timesteps=window, features=windows.shape[2])
        convert(str(src), str(work / "tfrecords" / aid), "bench", cfg, storage, arrival_id=aid)
    job = work / "runs" / f"{option}-w{window}-s{seed}"
    cmd = [sys.executable, "-m", "trainer.task", "--manifest", str(work / "tfrecords" / aid / "manifest.json"),
           "--job-dir", str(job), "--epochs", str(epochs), "--batch-size-per-worker", "64", *OPTIONS[option],
           "--timesteps", str(window), "--features", str(windows.shape[2]), "--seed", str(seed),
           "--holdout", "segment", "--warm-start", "none", "--min-skill", "-100", "--verbose", "0",
           "--learning-rate", "0.003"]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "-1", "LANDFALL_RESULTS_TOPIC": "", "PYTHONHASHSEED": str(seed)}
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    return job


def run_series(name: str, args: argparse.Namespace, root: Path) -> dict:
    from landfall.core.scoring import Scorer
    from trainer.judging import baselines

    train_rows, test_rows, labels = labelled_series(name)
    w = args.window
    x_train = sliding_windows(train_rows, w, args.train_stride).astype("<f4")
    work = root / name
    work.mkdir(parents=True, exist_ok=True)
    out: dict = {"series": name, "train_rows": len(train_rows), "test_rows": len(test_rows),
                 "anomalous_rows": int(labels.sum()), "window": w, "train_stride": args.train_stride, "model": {},
                 "baselines": {}}
    flat = x_train.reshape(-1, x_train.shape[2])
    for option in args.options:
        runs = []
        for seed in range(args.seeds):
            t0 = time.monotonic()
            job = train(work, x_train, w, option, seed, args.epochs)
            metrics = json.loads((job / "metrics.json").read_text())
            scorer = Scorer.load(Storage(), str(job / "model"))
            scores = located(scorer.errors, test_rows, w)
            runs.append({"seed": seed, **figures(labels, scores, w), "epochs_run": metrics.get("epochs_run"),
                         "verdict": metrics.get("verdict"), "beaten_by": metrics.get("beaten_by"),
                         "held_out_skill": {k: v.get("skill") for k, v in (metrics.get("baselines") or {}).items()},
                         "seconds": round(time.monotonic() - t0, 1)})
            print(f"  {name} {option} seed {seed}: AP {runs[-1]['average_precision']:.3f} VUS-PR "
                  f"{runs[-1]['vus_pr']:.3f} ({runs[-1]['epochs_run']} epochs, {runs[-1]['seconds']} s)", flush=True)
        out["model"][option] = runs
        code = int(OPTIONS[option][OPTIONS[option].index("--units") + 1].split(",")[-1])
        panel = baselines.Panel.fit([x_train], len(x_train), flat.mean(0), flat.std(0), (w, x_train.shape[2]), code)
        for base in (baselines.MEAN_WINDOW, *panel.kinds):  # every candidate fitted here, located in its unit
            key = base if base != baselines.PCA else f"pca_{code}"
            unit = panel.unit(base) or "mean"
            scores = located(lambda x, b=base, p=panel: p.row_errors(x, [b])[b], test_rows, w, unit)
            out["baselines"][key] = figures(labels, scores, w)
    return out


def table(result: dict) -> str:
    lines = [f"### {result['series']} ({result['train_rows']:,} training rows, {result['test_rows']:,} test rows, "
             f"{result['anomalous_rows']} anomalous, window {result['window']}, training stride "
             f"{result['train_stride']})", "",
             "| detector | AP | VUS-PR |", "|---|---|---|"]
    for option, runs in result["model"].items():
        ap = [r["average_precision"] for r in runs]
        vus = [r["vus_pr"] for r in runs]
        lines.append(f"| model, {option} ({' '.join(OPTIONS[option])}), median of {len(runs)} seeds [min-max] | "
                     f"{np.median(ap):.3f} [{min(ap):.3f}-{max(ap):.3f}] | "
                     f"{np.median(vus):.3f} [{min(vus):.3f}-{max(vus):.3f}] |")
    for base, f in result["baselines"].items():
        lines.append(f"| {base} | {f['average_precision']:.3f} | {f['vus_pr']:.3f} |")
    return "\n".join(lines)


def option_list(p: argparse.ArgumentParser, text: str, known: dict) -> list[str]:
    """``--options A,B``: the names, each one of ``known`` (else argparse's error, exit 2)."""
    options = [o for o in text.split(",") if o]
    unknown = [o for o in options if o not in known]
    if unknown:
        p.error(f"--options: {', '.join(unknown)} not among {', '.join(known)}")
    return options


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="landfall bench detect-options", description=__doc__.split("\n", 1)[0])
    p.add_argument("--series", default=",".join(LABELLED))
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--window", type=int, default=64)
    p.add_argument("--options", default="default,small")
    p.add_argument("--train-stride", type=int, default=1, help="rows between training windows (scoring: always 1)")
    p.add_argument("--out", default="")
    args = p.parse_args(argv)
    args.options = option_list(p, args.options, OPTIONS)
    root = Path(args.out or tempfile.mkdtemp(prefix="landfall-detect-"))
    root.mkdir(parents=True, exist_ok=True)
    results = []
    for name in [s for s in args.series.split(",") if s]:
        results.append(run_series(name, args, root))
        print(table(results[-1]), flush=True)
    (root / "detect.json").write_text(json.dumps(results, indent=2))
    print(f"written: {root / 'detect.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
