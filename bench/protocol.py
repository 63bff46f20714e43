"""Detection on TSB-AD's protocol: the champion Landfall picks, beside the simple detectors and TSB-AD's figures.

``landfall bench detect [--set dev,aeon,multivariate] [--series NAMES] [--seeds 3] [--epochs 60]
[--options default,gru] [--baselines-only] [--out DIR]``

The series:
- ``dev``: the six NAB recordings of ``bench/data/nab-dev/`` (TSB-AD-U series 008, 009, 014, 017, 018, 025;
  its README says how TSB-AD cuts them: the NAB file's values from its second data row, a row labelled when it lies in
  one of NAB's windows, start included, end excluded), with TSB-AD's published per-series VUS-PR;
- ``aeon``: the labelled series of ``landfall_bench.realdata`` (UCR InternalBleeding16, GutenTAG ecg-diff-count-3,
  BasicMotions with Running put in, from the aeon 1.6.0 wheel): their training part then their test part, one series;
- ``multivariate`` (issue #55): the six real recordings of TSB-AD-M's evaluation split in ``mv_root()``
  (``LANDFALL_MV_DEV``; by default the workspace's ``shared/benchmarks/multivariate-dev/`` beside the checkout when it
  exists, else ``bench/data/multivariate-dev/``, which ships one of them, MSL's, unchanged): three SMD machines,
  Genesis, MSL, Daphnet. Each file's name holds ``tr_N``, its anomaly-free training prefix; its last column is the
  row label; ``series.json`` holds TSB-AD-M's published VUS-PR of its 23 detectors per series. The window is the
  period of the **first channel** (TSB-AD's ``find_length_rank`` on ``data[:, 0]``), and so is VUS-PR's sliding
  window; the printed table puts the published best, PCA, AutoEncoder, CNN, LSTMAD, USAD, OmniAnomaly and KMeansAD
  beside each series.

The protocol (TSB-AD's ``benchmark_exp/Run_Detector_U.py`` for its semi-supervised detectors):
1. the window is one period, ``landfall.arrival.period.length`` of the whole series (TSB-AD's ``find_length_rank``,
   rank 1); VUS-PR's sliding window is the same;
2. the first ``train_rows`` rows (TSB-AD's ``tr_N``) are cut into stride-1 windows and trained on by the real trainer
   (``python -m trainer.task``: the ``segment`` hold-out, early stopping under the ``--epochs`` ceiling, the verdict
   with ``--select detection``: the champion is whichever candidate the surrogate picks), once per seed and option:
   ``default`` is what a series dataset's spec without a ``model`` block trains
   (``landfall.core.artifacts.specs.SERIES_MODEL``:
   the dense autoencoder, units 128,32, no dropout; the spec issue #47 recommends, now the default), ``gru`` the
   seed's recurrent autoencoder at its defaults (no model flag at all: what the defaults were before);
3. the whole series is scored: every detector's stride-1 window errors located per row (``landfall score``'s ``mean``:
   the mean error of the windows covering a row), VUS-PR as TSB-AD's ``get_metrics`` computes it
   (``landfall.core.rules.vus.tsb_ad_vus_pr``, checked against the TSB_AD 1.5 wheel) and AP against the row labels. The
   detectors: **the champion** (the folder ``champion.json`` names: the model or a baseline, served by
   ``landfall.core.scoring.Scorer`` as on arrival), the model, and the baselines as that run's verdict fitted them (mean
   window, PCA at the model's code size, nearest neighbour, on the seed's training windows: the same ``segment``
   hold-out; medians over the seeds in the table).

Printed per series: the champion's VUS-PR (median over the seeds, with its range), the detector it was, the
baselines', and TSB-AD's published best, Sub-PCA, AutoEncoder and median; then the goal (the champion >= the better
of PCA and the nearest neighbour, and >= TSB-AD's AutoEncoder) met or not, and the surrogate's agreement with the
labels (Kendall's tau between the candidates' surrogate AP and their labelled VUS-PR); after the tables, issue #55's
goals on the multivariate set, each met or NOT met with its shortfall (``goals``). ``PCA+NN``: ensembling, measured
beside them (the mean of PCA's and the nearest neighbour's errors, each over its median on the seed's held-out
windows). ``protocol.json`` holds all.

``--baselines-only``: no trainer run, only the baselines as the verdict fits them (``trainer.judging.baselines.Panel``
on each seed's ``segment`` hold-out training windows, the PCA at the model's code size 32): the table in minutes on a
CPU, with the champion's and the model's columns empty.
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

from landfall.arrival import period
from landfall.arrival.config import ConverterConfig
from landfall.arrival.converter import convert
from landfall.core.artifacts import specs
from landfall.core.rules.series_windows import COMBINE, MEAN, served_stride
from landfall.core.services.storage import Storage
from landfall_bench import controls
from landfall_bench.detect import located, option_list
from landfall_bench.realdata import LABELLED, labelled_series, sliding_windows

DEV = Path(__file__).resolve().parent / "data" / "nab-dev"  # bench/data/README.md: copied unchanged
OPTIONS = {"default": ["--model-kind", str(specs.SERIES_MODEL["kind"]),
                       "--dropout", str(specs.SERIES_MODEL["dropout"])],
           "gru": [],
           # issue #55's candidates for the kind a GPU trains (trainer.training.model_kinds), at the series
           # defaults' dropout
           "conv": ["--model-kind", "conv", "--dropout", str(specs.SERIES_MODEL["dropout"])],
           "forecast": ["--model-kind", "forecast", "--dropout", str(specs.SERIES_MODEL["dropout"])],
           # the series model at the trainer's own default dropout (trainer.config.TrainerConfig.dropout, 0.2)
           "dense-dropout": ["--model-kind", str(specs.SERIES_MODEL["kind"])]}
PUBLISHED = ("Sub-PCA", "AutoEncoder")
ENSEMBLE = "pca+nearest_neighbour"  # the mean of the two, each error scaled by its held-out median
FIGURES = ("ts_len", "anomaly_len", "num_anomaly", "avg_anomaly_len", "anomaly_ratio", "point_anomaly", "seq_anomaly")


UNLABELLED_HALF, LABELLED_HALF = "unlabelled", "labelled"  # --half
MV_DEV = Path(__file__).resolve().parent / "data" / "multivariate-dev"  # ships MSL's recording (bench/data/README.md)
MV_SHARED = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "multivariate-dev"  # the workspace's six
MV_PUBLISHED = ("PCA", "AutoEncoder", "CNN", "LSTMAD", "USAD", "OmniAnomaly", "KMeansAD")  # TSB-AD-M's, beside ours
MULTIVARIATE = "multivariate"


def dev_root() -> Path:
    return Path(os.environ.get("LANDFALL_NAB_DEV", DEV))


def dev_series(name: str) -> dict:
    """One TSB-AD NAB series of the dev set: values ``[n, 1]``, row labels, ``train_rows`` and the published row."""
    import pandas as pd

    doc = json.loads((dev_root() / "series.json").read_text())[name]
    frame = pd.read_csv(dev_root() / doc["file"])
    n = int(doc["tsb_ad_vus_pr"]["ts_len"])
    times = pd.to_datetime(frame["timestamp"]).to_numpy()[1:n + 1]
    labels = np.zeros(n, np.uint8)
    for start, end in doc["windows"]:
        labels[(times >= np.datetime64(pd.Timestamp(start))) & (times < np.datetime64(pd.Timestamp(end)))] = 1
    values = frame["value"].to_numpy(np.float32)[1:n + 1, None]
    return {"values": values, "labels": labels, "train_rows": int(doc["train_rows"]),
            "published": doc["tsb_ad_vus_pr"], "source": f"NAB {doc['nab_path']}, TSB-AD-U {name}"}


def mv_root() -> Path:
    """The multivariate dev set's folder: ``LANDFALL_MV_DEV``, else the workspace's copy of all six when there is one,
    else the one recording shipped in ``bench/data/multivariate-dev/``."""
    if os.environ.get("LANDFALL_MV_DEV"):
        return Path(os.environ["LANDFALL_MV_DEV"])
    return MV_SHARED if (MV_SHARED / "series.json").is_file() else MV_DEV


def mv_docs() -> dict[str, dict]:
    """``series.json``'s row of every recording present in ``mv_root()``, by name (the file's stem)."""
    doc = json.loads((mv_root() / "series.json").read_text())
    return {Path(d["csv"]).stem: d for d in doc["series"] if (mv_root() / d["csv"]).is_file()}


def train_prefix(name: str) -> int:
    """TSB-AD's ``tr_N`` in a file's name: its training prefix, in rows."""
    return int(name.split("_tr_")[1].split("_")[0])


def mv_series(name: str) -> dict:
    """One TSB-AD-M recording: values ``[n, channels]`` (every column but an ``index`` and the last, the label),
    row labels, ``train_rows`` (the name's ``tr_N``) and the published VUS-PR of TSB-AD-M's detectors."""
    import pandas as pd

    doc = mv_docs()[name]
    frame = pd.read_csv(mv_root() / doc["csv"])
    channels = [c for c in frame.columns[:-1] if c != "index"]
    values = frame[channels].to_numpy(np.float32)
    labels = (frame[frame.columns[-1]].to_numpy() > 0).astype(np.uint8)
    n_train = train_prefix(name)
    if n_train != int(doc["tr_X"]) or len(values) != int(doc["length"]):
        raise SystemExit(f"{name}: tr_N {n_train} or {len(values)} rows disagree with series.json")
    return {"values": values, "labels": labels, "train_rows": n_train, "published": doc["tsbad_published_vus_pr"],
            "set": MULTIVARIATE, "source": f"TSB-AD-M {doc['tsbad_m_file']} ({mv_root()})"}


def aeon_series(name: str) -> dict:
    train, test, labels = labelled_series(name)
    return {"values": np.concatenate([train, test]).astype(np.float32),
            "labels": np.concatenate([np.zeros(len(train), np.uint8), labels]), "train_rows": len(train),
            "published": None, "source": f"aeon 1.6.0 ({name})"}


def train(work: Path, windows: np.ndarray, window: int, option: str, seed: int, epochs: int,
          combine: str = MEAN, labelled: str = "") -> Path:
    """The real trainer on the windows (one arrival, converted by the real converter), its defaults but ``option``."""
    storage = Storage()
    work.mkdir(parents=True, exist_ok=True)
    src = work / "train.npy"
    if not src.exists():
        np.save(src, windows)
        cfg = ConverterConfig.load({}, timesteps=window, features=windows.shape[2])
        convert(str(src), str(work / "tfrecords" / "train"), "bench", cfg, storage, arrival_id="train")
    job = work / "runs" / ("-".join([option, *([combine] if combine != MEAN else []),
                                     *(["labelled"] if labelled else []), f"s{seed}"]))
    cmd = [sys.executable, "-m", "trainer.task", "--manifest", str(work / "tfrecords" / "train" / "manifest.json"),
           "--job-dir", str(job), "--epochs", str(epochs), *OPTIONS[option], "--timesteps", str(window),
           "--features", str(windows.shape[2]), "--seed", str(seed), "--holdout", "segment", "--warm-start", "none",
           "--verbose", "0", "--combine", combine, *(["--labelled", labelled] if labelled else [])]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "-1", "LANDFALL_RESULTS_TOPIC": "", "PYTHONHASHSEED": str(seed),
           "LANDFALL_MODELS": str(job / "models")}  # every run its own dataset's first champion
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return job


def split_masks(seed: int, count: int, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Which of the arrival's windows the run trained on and which it held out: the trainer's ``segment`` hold-out
    (with its rescue; the gap between them in neither)."""
    from landfall.core.rules import holdout

    split = holdout.Split(seed, holdout.VALIDATION_FRACTION, holdout.SEGMENT, window).rescued([("train", count)])
    return split.sides("train", np.arange(count), count)


def trained_mask(seed: int, count: int, window: int) -> np.ndarray:
    """Which of the arrival's windows the run trained on (``split_masks``)."""
    return split_masks(seed, count, window)[0]


def located_panel(panel, rows: np.ndarray, window: int, combine: str = MEAN) -> dict[str, np.ndarray]:
    """Every candidate of ``panel`` located as it is served (``located_many`` per unit): in its own unit when it
    declares one (``Panel.unit``), else in ``combine``; the detectors whose rows are scored alone, by rows, at stride
    ``window`` (each row once, the same scores)."""
    from trainer.judging import baselines

    groups: dict[tuple[str, int], list[str]] = {}
    for name in baselines.NAMES:
        if name != baselines.MEAN_WINDOW and name not in panel.kinds:  # not fitted here (it does not apply)
            continue
        unit = panel.unit(name) or combine
        stride = served_stride(unit, bool(getattr(panel.kinds.get(name), "alone", False)), window, 1)
        groups.setdefault((unit, stride), []).append(name)
    out: dict[str, np.ndarray] = {}
    for (unit, stride), names in groups.items():  # each window row's error: the Locator makes the unit's scores
        out.update(located_many(lambda x, names=names: panel.row_errors(x, names), rows, window, unit, stride))
    return {n: out[n] for n in baselines.NAMES if n in out}


def located_many(errors: Callable[[np.ndarray], dict[str, np.ndarray]], rows: np.ndarray, window: int,
                 combine: str = MEAN, stride: int = 1) -> dict[str, np.ndarray]:
    """``located`` for several detectors from one pass: ``errors`` turns a block of windows into each detector's
    errors (``Panel.errors``); every detector's row scores are then located from its recorded errors, block by block in
    the order the first pass asked for them (the same ``Locator``, so the same rows and windows)."""
    recorded: list[dict[str, np.ndarray]] = []

    def first(x: np.ndarray) -> np.ndarray:
        recorded.append(errors(x))
        return next(iter(recorded[-1].values()))

    head = located(first, rows, window, combine, stride)
    if not recorded:
        return {}
    names = list(recorded[0])
    out = {names[0]: head}
    for name in names[1:]:
        replay = iter(recorded)
        out[name] = located(lambda x, n=name, r=replay: next(r)[n], rows, window, combine, stride)
    return out


def ranking(labels: np.ndarray, scores: np.ndarray, window: int) -> dict[str, float]:
    """AP and VUS-PR as TSB-AD's ``get_metrics`` computes it (``landfall.core.rules.vus.tsb_ad_vus_pr``, its sliding
    window
    the series' period), so the figures sit beside TSB-AD's published ones in one metric."""
    from landfall.core.rules import vus

    return {"average_precision": vus.average_precision(labels, scores),
            "vus_pr": vus.tsb_ad_vus_pr(labels, scores, window)}


def kendall(a: list[float], b: list[float]) -> float | None:
    """Kendall's tau-b of two rankings (None with fewer than two items)."""
    from scipy.stats import kendalltau

    if len(a) < 2:
        return None
    tau = kendalltau(a, b).statistic
    return None if not np.isfinite(tau) else float(tau)


def halves(labels: np.ndarray, n_train: int) -> int | None:
    """``--half``: the first row of the second half of the rows after the training prefix, where the run is judged
    (the first half's labels are the verdict's labelled recording under ``--half labelled``); None when either half
    has no labelled row."""
    mid = n_train + (len(labels) - n_train) // 2
    return mid if labels[n_train:mid].any() and labels[mid:].any() else None


def labelled_recording(root: Path, name: str, values: np.ndarray, labels: np.ndarray, n_train: int, mid: int) -> str:
    """The first half's rows and labels, stored as a series dataset's labelled recording
    (``landfall.core.artifacts.labelled``) beside the runs: what ``--half labelled`` gives the verdict."""
    from landfall.core.artifacts import labelled

    folder = root / name / "labelled"
    folder.mkdir(parents=True, exist_ok=True)
    return labelled.write_under(Storage(), f"{folder}/", name, values[n_train:mid].astype(np.float32),
                                labels[n_train:mid].astype(np.uint8), source=f"{name} rows {n_train}..{mid - 1}",
                                label="label", starts=np.array([0]))


def run_series(name: str, data: dict, args: argparse.Namespace, root: Path) -> dict:
    from landfall.core.scoring import Scorer
    from trainer.judging import baselines

    values, labels, n_train = data["values"], data["labels"], data["train_rows"]
    w = period.length(values[:, 0])
    start = halves(labels, n_train) if args.half else 0  # the rows every figure is judged on: [start:]
    if start is None:
        raise ValueError(f"{name}: no labelled row in one half of the rows after the training prefix")
    judged_labels = labels[start:]

    def judge(scores: np.ndarray) -> dict[str, float]:
        return ranking(judged_labels, scores[start:], w)

    given = labelled_recording(root, name, values, labels, n_train, start) if args.half == LABELLED_HALF else ""
    x_train = sliding_windows(values[:n_train], w, 1).astype("<f4")
    stats = x_train.reshape(-1, x_train.shape[2]).astype(np.float64)  # the manifest's: over the windows' values
    out: dict = {"series": name, "set": data.get("set", "univariate"), "source": data["source"], "rows": len(values),
                 "channels": int(values.shape[1]), "train_rows": n_train, "anomalous_rows": int(labels.sum()),
                 "window": w, "published": data["published"], "runs": {}, "baselines": {}, "fitted_on": [],
                 "judged_from": start, "half": args.half}
    if not labels.sum():
        raise SystemExit(f"{name}: no labelled row")
    kept: list[tuple[dict, dict, np.ndarray]] = []  # per seed: the baselines' row scores, held-out errors, mask
    for seed in range(args.seeds):  # the baselines as the run's verdict fits them: on that seed's training windows
        train_mask, held_mask = split_masks(seed, len(x_train), w)
        panel = baselines.Panel.fit([x_train[train_mask]], int(train_mask.sum()), stats.mean(0), stats.std(0),
                                    (w, values.shape[1]), 32)
        out["fitted_on"].append(int(panel.fitted_on))  # the windows PCA (and the others) were fitted on
        located_scores = located_panel(panel, values, w, args.combine)  # every baseline's rows, as each is served
        for base in located_scores:  # every candidate fitted on this series
            out["baselines"].setdefault(base, []).append(judge(located_scores[base]))
        # Ensembling (issue #47's candidate): PCA and the nearest neighbour, each error over its median on the
        # windows this seed held out, averaged; measured here, not a candidate of the verdict (docs/benchmarks.md).
        held = panel.errors(x_train[~train_mask]) if (~train_mask).any() else None
        if held is not None:
            parts = [located_scores[b] / max(float(np.median(held[b])), 1e-12) for b in (baselines.PCA,
                                                                                         baselines.NEAREST)]
            out["baselines"].setdefault(ENSEMBLE, []).append(judge((parts[0] + parts[1]) / 2))
        # The verdict's label-free choice among these candidates and the ensemble of all (landfall_bench.controls).
        held_errors = panel.errors(x_train[held_mask])
        out.setdefault("controls", []).append(controls.seed_figures(
            panel, located_scores, x_train[held_mask], seed, name, judge, held_errors,
            args.combine))
        kept.append((located_scores, held_errors, held_mask))  # for the ensemble with each run's model
    for option in args.options:
        runs = []
        for seed in range(args.seeds):
            t0 = time.monotonic()
            job = train(root / name, x_train, w, option, seed, args.epochs, args.combine, given)
            metrics = json.loads((job / "metrics.json").read_text())
            detection = metrics.get("detection") or {}
            champion = metrics.get("champion")
            scored, ensemble = {}, None
            for who, uri in (("champion", champion), ("model", str(job / "model"))):
                if uri:
                    scorer = Scorer.load(Storage(), uri)
                    unit = scorer.combine(args.combine)  # the champion's own unit, else the run's
                    rows = located(scorer.row_errors, values, w, unit, served_stride(unit, scorer.alone, w, 1))
                    scored[who] = judge(rows)
                    if who == "model":  # control (b) with the model among its candidates
                        located_scores, held_errors, held_mask = kept[seed]
                        ensemble = controls.ensemble({**located_scores, "model": rows}, {
                            **held_errors, "model": scorer.errors(x_train[held_mask])}, judge)
            labelled_vus = {"model": scored.get("model", {}).get("vus_pr"),
                            **{b: out["baselines"][b][seed]["vus_pr"] for b in out["baselines"]}}
            basis_key = detection.get("key") or "average_precision"  # the figure the verdict ranked by
            surrogate_ap = {c: f.get(basis_key) for c, f in (detection.get("candidates") or {}).items()}
            both = [c for c in labelled_vus if surrogate_ap.get(c) is not None and labelled_vus[c] is not None]
            runs.append({"seed": seed, "verdict": metrics.get("verdict"), "detector": detection.get("detector"),
                         "why": detection.get("why"), "champion": scored.get("champion"), "model": scored.get("model"),
                         "surrogate_ap": surrogate_ap, "labelled_vus_pr": labelled_vus,
                         "candidates": detection.get("candidates"),  # every surrogate figure (by_kind, vus_pr)
                         "kendall_tau": kendall([surrogate_ap[c] for c in both], [labelled_vus[c] for c in both]),
                         "ensemble": ensemble,
                         "epochs_run": metrics.get("epochs_run"), "stopped_early": metrics.get("stopped_early"),
                         "seconds": round(time.monotonic() - t0, 1)})
            r = runs[-1]
            print(f"  {name} {option} seed {seed}: champion {r['detector']} VUS-PR "
                  f"{(r['champion'] or {}).get('vus_pr', float('nan')):.3f}, model "
                  f"{(r['model'] or {}).get('vus_pr', float('nan')):.3f}, tau {r['kendall_tau']} "
                  f"({r['epochs_run']} epochs, {r['seconds']} s)", flush=True)
        out["runs"][option] = runs
    return out


def _median(values: list) -> float | None:
    got = [v for v in values if v is not None]
    return float(np.median(got)) if got else None


def table(results: list[dict]) -> str:
    """The univariate sets' table, then (when the multivariate set ran) ``mv_table``'s."""
    uni = [r for r in results if r.get("set") != MULTIVARIATE]
    multi = [r for r in results if r.get("set") == MULTIVARIATE]
    tables = ([uni_table(uni)] if uni else []) + ([mv_table(multi)] if multi else [])
    if any(r.get("controls") for r in results):  # the choice against its controls, over every series run
        tables.append("The verdict's choice among the fixed detectors against its controls (landfall_bench.controls), "
                      "VUS-PR medians over the seeds:\n\n" + controls.table([r for r in results if r.get("controls")]))
    for option in dict.fromkeys(o for r in results for o in r["runs"]):  # with the model among the candidates
        tables.append(f"The verdict's choice against its controls, option {option} (its champion; the model a "
                      "candidate):\n\n" + controls.table([r for r in results if option in r["runs"]], option))
    return "\n\n".join(tables)


def uni_table(results: list[dict]) -> str:
    lines = ["| series | window | option | champion VUS-PR, median [min-max] | picked | model | mean window | PCA | "
             "nearest | PCA+NN | TSB-AD best | Sub-PCA | AutoEncoder | median of 32 | goal | tau |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        pub = r["published"] or {}
        detectors = {k: v for k, v in pub.items() if k not in FIGURES}
        best = max(detectors.items(), key=lambda kv: kv[1]) if detectors else None
        base = {b: float(np.median([x["vus_pr"] for x in f])) for b, f in r["baselines"].items()}
        if not r["runs"]:  # --baselines-only: the baselines and the published figures, no champion
            lines.append(
                f"| {r['series']} | {r['window']} | baselines only | - | - | - | {base['mean_window']:.3f} | "
                f"{base['pca']:.3f} | {base['nearest_neighbour']:.3f} | "
                + (f"{base[ENSEMBLE]:.3f} | " if ENSEMBLE in base else "- | ")
                + (f"{best[1]:.3f} ({best[0]}) | {pub['Sub-PCA']:.3f} | {pub['AutoEncoder']:.3f} | "
                   f"{float(np.median(list(detectors.values()))):.3f}" if best else "- | - | - | -")
                + " | - | - |")
        for option, runs in r["runs"].items():
            champ = [(x["champion"] or {}).get("vus_pr") for x in runs]
            model = _median([(x["model"] or {}).get("vus_pr") for x in runs])
            med = _median(champ)
            picked = ",".join(sorted({str(x["detector"]) for x in runs}))
            need = max(base["pca"], base["nearest_neighbour"], pub.get("AutoEncoder", 0.0))
            goal = "met" if med is not None and med >= need - 1e-9 else "NOT met"
            got = [c for c in champ if c is not None]
            lines.append(
                f"| {r['series']} | {r['window']} | {option} | "
                + (f"{med:.3f} [{min(got):.3f}-{max(got):.3f}]" if got else "-")
                + f" | {picked} | {model:.3f} | {base['mean_window']:.3f} | {base['pca']:.3f} | "
                f"{base['nearest_neighbour']:.3f} | "
                + (f"{base[ENSEMBLE]:.3f} | " if ENSEMBLE in base else "- | ")
                + (f"{best[1]:.3f} ({best[0]}) | {pub['Sub-PCA']:.3f} | {pub['AutoEncoder']:.3f} | "
                   f"{float(np.median(list(detectors.values()))):.3f}" if best else "- | - | - | -")
                + f" | {goal} | {_median([x['kendall_tau'] for x in runs])} |")
    return "\n".join(lines)


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def mv_table(results: list[dict]) -> str:
    """The multivariate set: per series and option (one row per series with ``--baselines-only``), the champion, the
    model and every in-run baseline (medians over the seeds), then TSB-AD-M's published best and ``MV_PUBLISHED``; a
    last row, the means over the series. ``goal``: the champion's median at least the better of in-run PCA and nearest
    neighbour (issue #55)."""
    names = list(dict.fromkeys(b for r in results for b in r["baselines"]))  # in-run: the registered baselines
    head = (["series", "rows x channels", "window", "fitted on", "option", "champion VUS-PR, median [min-max]",
             "picked", "model", *names, "TSB-AD-M best", *(f"TSB {d}" for d in MV_PUBLISHED), "goal"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    sums: dict[str, list[float]] = {}
    for r in results:
        pub = r["published"] or {}
        best = max(pub.items(), key=lambda kv: kv[1]) if pub else None
        base = {b: float(np.median([x["vus_pr"] for x in f])) for b, f in r["baselines"].items()}
        published = [f"{best[1]:.3f} ({best[0]})" if best else "-", *(_f(pub.get(d)) for d in MV_PUBLISHED)]
        for key, value in [*base.items(), ("TSB-AD-M best", best[1] if best else None),
                           *((f"TSB {d}", pub.get(d)) for d in MV_PUBLISHED)]:
            if value is not None:
                sums.setdefault(key, []).append(value)
        fitted = ",".join(str(n) for n in sorted(set(r.get("fitted_on") or [])))
        lead = [r["series"], f"{r['rows']} x {r['channels']}", str(r["window"]), fitted or "-"]
        rows = list(r["runs"].items()) or [("baselines only", [])]
        for option, runs in rows:
            champ = [c for c in ((x["champion"] or {}).get("vus_pr") for x in runs) if c is not None]
            med = _median(champ)
            need = max(base.get("pca", 0.0), base.get("nearest_neighbour", 0.0))
            goal = "-" if med is None else ("met" if med >= need - 1e-9 else f"NOT met ({need - med:.3f} short)")
            lines.append("| " + " | ".join([
                *lead, option, f"{med:.3f} [{min(champ):.3f}-{max(champ):.3f}]" if champ else "-",
                ",".join(sorted({str(x["detector"]) for x in runs})) or "-",
                _f(_median([(x["model"] or {}).get("vus_pr") for x in runs])), *(_f(base.get(b)) for b in names),
                *published, goal]) + " |")
            if med is not None:
                sums.setdefault(f"champion {option}", []).append(med)
    if len(results) > 1:
        mean = {k: float(np.mean(v)) for k, v in sums.items() if len(v) == len(results)}
        champs = ", ".join(f"{k.split(' ', 1)[1]} {v:.3f}" for k, v in mean.items() if k.startswith("champion "))
        lines.append("| " + " | ".join([
            f"**mean of {len(results)}**", "", "", "", "", champs or "-", "", "",
            *(_f(mean.get(b)) for b in names), _f(mean.get("TSB-AD-M best")),
            *(_f(mean.get(f"TSB {d}")) for d in MV_PUBLISHED), ""]) + " |")
    return "\n".join(lines)


def goals(results: list[dict]) -> list[str]:
    """Issue #55's goals on the multivariate set, each said met or NOT met with its shortfall, per option (medians over
    the seeds; "labelled best": the highest median VUS-PR of the model and the in-run baselines):

    - the champion at least the better of in-run PCA and nearest neighbour on every series;
    - the champion's mean over the series at least TSB-AD-M's best published detector's mean on them;
    - the model at least TSB-AD-M's published AutoEncoder on all series but one;
    - the champion at least the model wherever the model is the labelled best;

    and on the univariate series with TSB-AD's published row (the NAB dev set), the champion's mean at least TSB-AD's
    Sub-PCA mean. Nothing without a trained run (``--baselines-only``): the goals are the champion's and the model's."""
    multi = [r for r in results if r.get("set") == MULTIVARIATE]
    lines: list[str] = []
    for option in dict.fromkeys(o for r in multi for o in r["runs"]):
        runs = [r for r in multi if option in r["runs"]]
        short, models, missed, chosen, best = [], [], [], [], []
        for r in runs:
            base = {b: float(np.median([x["vus_pr"] for x in f])) for b, f in r["baselines"].items()}
            champ = _median([(x["champion"] or {}).get("vus_pr") for x in r["runs"][option]])
            model = _median([(x["model"] or {}).get("vus_pr") for x in r["runs"][option]])
            pub = r["published"] or {}
            series = r["series"].split("_", 2)
            name = "_".join(series[:2])
            need = max(base.get("pca", 0.0), base.get("nearest_neighbour", 0.0))
            if champ is None or champ < need - 1e-9:
                short.append(f"{name} {need - (champ or 0.0):.3f}")
            chosen.append(champ or 0.0)
            if pub:
                best.append(max(pub.values()))
            if model is not None and "AutoEncoder" in pub:
                models.append(model >= pub["AutoEncoder"] - 1e-9)
            if model is not None and model >= max(base.values(), default=0.0) - 1e-9 and (champ or 0.0) < model - 1e-9:
                missed.append(f"{name} (model {model:.3f}, champion {champ or 0.0:.3f})")
        n = len(runs)
        lines.append(f"Issue #55's goals, option {option}, {n} series (medians over the seeds):")
        lines.append(f"- the champion >= the better of in-run PCA and nearest neighbour: {n - len(short)} of {n}: "
                     + ("met" if not short else "NOT met (short: " + ", ".join(short) + ")"))
        if len(best) == n and n:
            gap = float(np.mean(best)) - float(np.mean(chosen))
            lines.append(f"- the champion's mean {np.mean(chosen):.3f} >= TSB-AD-M's best per series, mean "
                         f"{np.mean(best):.3f}: " + ("met" if gap <= 1e-9 else f"NOT met ({gap:.3f} short)"))
        if models:
            lines.append(f"- the model >= TSB-AD-M's AutoEncoder: {sum(models)} of {len(models)}: "
                         + ("met" if sum(models) >= len(models) - 1 else "NOT met (all but one wanted)"))
        lines.append("- the champion >= the model where the model is the labelled best: "
                     + ("met" if not missed else "NOT met on " + "; ".join(missed)))
    uni = [r for r in results if r.get("set") != MULTIVARIATE and "Sub-PCA" in (r.get("published") or {})]
    for option in dict.fromkeys(o for r in uni for o in r["runs"]):
        runs = [r for r in uni if option in r["runs"]]
        champs = [_median([(x["champion"] or {}).get("vus_pr") for x in r["runs"][option]]) or 0.0 for r in runs]
        gap = float(np.mean([r["published"]["Sub-PCA"] for r in runs])) - float(np.mean(champs))
        lines.append(f"Issue #55's goal, option {option}, the univariate {len(runs)}: the champion's mean "
                     f"{np.mean(champs):.3f} >= TSB-AD's Sub-PCA mean {np.mean(champs) + gap:.3f}: "
                     + ("met" if gap <= 1e-9 else f"NOT met ({gap:.3f} short)"))
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="landfall bench detect", description=__doc__.split("\n", 1)[0])
    p.add_argument("--set", default="dev,aeon",
                   help="dev (the NAB series of nab-dev), aeon, multivariate (TSB-AD-M's recordings), comma-separated")
    p.add_argument("--series", default="", help="names to run (default: every series of the sets)")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=60, help="the ceiling (early stopping decides)")
    p.add_argument("--options", default="default,gru")
    p.add_argument("--baselines-only", action="store_true",
                   help="no trainer run: only the baselines as the verdict fits them (minutes on a CPU)")
    p.add_argument("--combine", choices=COMBINE, default=MEAN,
                   help="a row's score from the windows over it, as landfall score --combine (default mean); the "
                        "verdict chooses for it, as for a spec's shape.window.combine (trainer --combine)")
    p.add_argument("--half", choices=("", UNLABELLED_HALF, LABELLED_HALF), default="",
                   help="judge every figure on the second half of the rows after the training prefix only (series "
                        "with a labelled row in each half); labelled: the verdict also gets the first half as the "
                        "dataset's labelled recording (verdict.labelled), so it chooses by labels")
    p.add_argument("--out", default="")
    args = p.parse_args(argv)
    args.options = [] if args.baselines_only else option_list(p, args.options, OPTIONS)
    sets = args.set.split(",")
    names: list[tuple[str, str]] = []
    if "dev" in sets:
        names += [("dev", n) for n in json.loads((dev_root() / "series.json").read_text())]
    if "aeon" in sets:
        names += [("aeon", n) for n in LABELLED]
    if MULTIVARIATE in sets:
        names += [(MULTIVARIATE, n) for n in sorted(mv_docs())]
    unknown = set(sets) - {"dev", "aeon", MULTIVARIATE}
    if unknown:
        p.error(f"--set: no set {', '.join(sorted(unknown))} (dev, aeon, {MULTIVARIATE})")
    if args.series:
        wanted = set(args.series.split(","))
        names = [(s, n) for s, n in names if n in wanted or n.split("_")[0] in wanted]
    root = Path(args.out or tempfile.mkdtemp(prefix="landfall-protocol-"))
    root.mkdir(parents=True, exist_ok=True)
    results = []
    for which, name in names:
        data = {"dev": dev_series, "aeon": aeon_series, MULTIVARIATE: mv_series}[which](name)
        if args.half and halves(data["labels"], data["train_rows"]) is None:
            print(f"  {name}: left out: no labelled row in one half of the rows after its training prefix")
            continue
        results.append(run_series(name, data, args, root))
        (root / "protocol.json").write_text(json.dumps(results, indent=2, default=float))
    print(table(results))
    if args.half:
        print(f"\n(--half {args.half}: every figure of this run is judged on the second half of the rows after the "
              "training prefix; TSB-AD's published figures beside them are the whole series')")
    said = goals(results)
    if said:
        print("\n" + "\n".join(said))
    print(f"\n(written to {root / 'protocol.json'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
