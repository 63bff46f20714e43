"""``landfall bench published [--out DIR]``: each detector of the registry that has a row in TSB-AD-M's published
table (its module's ``TSB_AD``) against that row, on the multivariate dev set, so we know it is the same detector.

Per series and detector, VUS-PR (TSB-AD's ``get_metrics``, its window the first channel's period:
``landfall.core.rules.vus.tsb_ad_vus_pr``) of the whole series' row scores:

- **as TSB-AD fits it**: on what its benchmark script fitted it on (the module's ``TSB_AD_FIT``: the whole series,
  test region included, for its unsupervised detectors; the training prefix ``tr_N`` for OCSVM and MCD), standardised
  with that part's statistics; KMeansAD with TSB-AD-M's window of 40 rows, each row the mean of the windows over it;
- **history only**: fitted on the training prefix alone, as a Landfall job fits it (production never sees the rows
  it scores); KMeansAD with the job's window (the first channel's period).

The detectors are deterministic (fixed seeds), so one run is the figure. The rows a row detector scores are its own
(``score_rows``); a window detector's are located as ``landfall score`` locates them (``landfall_bench.detect``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

import numpy as np

TSB_WINDOW = 40  # TSB-AD-M's KMeansAD window (HP_list: window_size=40)
CLOSE = 0.05  # "the same detector": within this of the published VUS-PR


def published_kinds() -> dict[str, tuple[type, str, str]]:
    """The detectors with a published row, registered or opt-in (``trainer.judging.baselines.OPT_IN``): name -> (class,
    TSB-AD's name, what TSB-AD fitted it on)."""
    from trainer.judging import baselines

    out = {}
    every = [*baselines.KINDS.values(), *(importlib.import_module(m).Detector for m in baselines.OPT_IN)]
    for kind in every:
        name, module = kind.name, sys.modules[kind.__module__]
        if getattr(module, "TSB_AD", None):
            out[name] = (kind, module.TSB_AD, module.TSB_AD_FIT)
    return out


def fitted(kind: type, rows: np.ndarray, window: int):
    """``kind`` fitted on ``rows`` (``[n, F]``, original units) cut into stride-1 windows of ``window`` rows, every
    value standardised with those rows' statistics (as a job standardises its windows)."""
    from landfall.core.rules import moments
    from landfall_bench.realdata import sliding_windows
    from trainer.judging import baselines
    from trainer.judging.baselines.space import Space

    rows = np.asarray(rows, np.float64)
    mean, std = rows.mean(axis=0), moments.scaled(rows.std(axis=0))
    x = sliding_windows(rows, window, 1)
    z = ((x - mean) / std).reshape(len(x), -1)
    z = z[:: max(1, -(-len(z) // baselines.FIT_SAMPLE))]
    return kind().fit(z, Space((window, rows.shape[1]), 32, mean, std, moments.error_scale(std)))


def row_scores(detector, values: np.ndarray, window: int) -> np.ndarray:
    """Every row's score as the detector is served: a row detector's own, a window detector's located (the mean of
    the windows over the row)."""
    from landfall_bench.detect import located

    if getattr(detector, "alone", False):
        return detector.score_rows(np.asarray(values, np.float64))
    space = detector.space

    def errors(x: np.ndarray) -> np.ndarray:
        z = ((np.asarray(x, np.float64) - space.mean) / space.std).reshape(len(x), -1)
        return detector.row_scores(z).mean(axis=1)

    return located(errors, values, window)


def run(names: list[str] | None = None) -> list[dict]:
    from landfall.arrival import period
    from landfall.core.rules import vus
    from landfall_bench import protocol

    kinds = {n: k for n, k in published_kinds().items() if not names or n in names}
    out = []
    for series in sorted(protocol.mv_docs()):
        data = protocol.mv_series(series)
        values, labels, n_train = data["values"], data["labels"], data["train_rows"]
        w = period.length(values[:, 0])
        for name, (kind, tsb, fit_on) in kinds.items():
            t0 = time.monotonic()
            window_detector = not getattr(kind, "alone", False)
            tsb_window = TSB_WINDOW if window_detector else 1
            as_tsb = fitted(kind, values if fit_on == "series" else values[:n_train], tsb_window)
            ours = fitted(kind, values[:n_train], w if window_detector else 1)
            figures = {"as_tsb_ad": vus.tsb_ad_vus_pr(labels, row_scores(as_tsb, values, tsb_window), w),
                       "history_only": vus.tsb_ad_vus_pr(labels, row_scores(ours, values, w if window_detector
                                                                             else 1), w)}
            row = {"series": series, "detector": name, "tsb_ad": tsb, "fitted_on": fit_on, "window": w,
                   "published": float(data["published"][tsb]), **figures, "seconds": round(time.monotonic() - t0, 1)}
            out.append(row)
            print(f"  {series[:16]} {name}: published {row['published']:.3f}, as TSB-AD fits it "
                  f"{row['as_tsb_ad']:.3f}, history only {row['history_only']:.3f} ({row['seconds']} s)", flush=True)
    return out


def table(rows: list[dict]) -> str:
    """Per detector and series: published, as TSB-AD fits it (and its difference), history only; then per detector
    how many series are within ``CLOSE`` of the published figure."""
    lines = ["| detector (TSB-AD-M's) | series | published | as TSB-AD fits it | difference | history only |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['detector']} ({r['tsb_ad']}, fitted on the {r['fitted_on']}) | {r['series'][:16]} | "
                     f"{r['published']:.3f} | {r['as_tsb_ad']:.3f} | {r['as_tsb_ad'] - r['published']:+.3f} | "
                     f"{r['history_only']:.3f} |")
    lines += ["", "| detector | series within 0.05 of its published row | mean published | mean as TSB-AD fits it | "
              "mean history only |", "|---|---|---|---|---|"]
    for name in dict.fromkeys(r["detector"] for r in rows):
        mine = [r for r in rows if r["detector"] == name]
        close = sum(abs(r["as_tsb_ad"] - r["published"]) <= CLOSE for r in mine)
        lines.append(f"| {name} | {close} of {len(mine)} | {np.mean([r['published'] for r in mine]):.3f} | "
                     f"{np.mean([r['as_tsb_ad'] for r in mine]):.3f} | "
                     f"{np.mean([r['history_only'] for r in mine]):.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="landfall bench published", description=__doc__.split("\n\n")[0])
    p.add_argument("--detectors", help="only these (comma-separated names; default every one with a published row)")
    p.add_argument("--out", help="write results.json and table.md here")
    args = p.parse_args(argv)
    rows = run([n.strip() for n in args.detectors.split(",")] if args.detectors else None)
    text = table(rows)
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(rows, indent=2))
        (out / "table.md").write_text(text + "\n")
    return 0
