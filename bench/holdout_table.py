"""The hold-out's cost and coverage on a table of dataset sizes and window lengths (``landfall.core.rules.holdout``).

``python -m landfall_bench.holdout_table [--draws 2000] [--json FILE]``: for each dataset (a number of arrivals of a
number of windows each) and window length, and for the ``segment`` hold-out (series datasets' default) beside the older
``blocks``, prints the held-out share, the unused share (the gap: records trained on by no one) and the chance that
the dataset gets no hold-out at all, over ``--draws`` draws of arrival ids (seed 42, fraction 0.1: the defaults).
Arithmetic only (the same ``Split.counts`` the trainer's plan and the submit stage's gate use): no data is read.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from landfall.core.rules import holdout

DATASETS = ((1, 300), (1, 1_137), (1, 10_000), (10, 1_000), (100, 100), (2_000, 50), (10_000, 500))
WINDOWS = (32, 64, 128)
BIG = 200_000  # records per draw above which fewer draws are taken (blocks counts record by record)


def measure(arrivals: int, windows: int, timesteps: int, mode: str, draws: int, fraction: float = 0.1) -> dict:
    split = holdout.Split(holdout.SEED, fraction, mode, timesteps)
    total = arrivals * windows
    draws = draws if total * draws <= 50 * BIG or mode == holdout.SEGMENT else max(5, (50 * BIG) // total)
    held = np.zeros(draws)
    trained = np.zeros(draws)
    for d in range(draws):
        for a in range(arrivals):
            t, v = split.counts(f"draw-{d}/arrival-{a}", windows)
            trained[d] += t
            held[d] += v
    return {"arrivals": arrivals, "windows": windows, "timesteps": timesteps, "holdout": mode, "draws": draws,
            "held_out_share": float(np.median(held) / total), "unused_share": float(np.median(total - held - trained)
                                                                                     / total),
            "no_holdout_chance": float((held == 0).mean())}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m landfall_bench.holdout_table", description=__doc__.split("\n", 1)[0])
    p.add_argument("--draws", type=int, default=2000)
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    rows = [measure(a, n, t, mode, args.draws) for a, n in DATASETS for t in WINDOWS
            for mode in (holdout.SEGMENT, holdout.BLOCKS)]
    print("fraction 0.1, seed 42; shares are medians over the draws of arrival ids")
    print("| arrivals x windows | window | hold-out | held-out share | unused share | chance of no hold-out | draws |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['arrivals']:,} x {r['windows']:,} | {r['timesteps']} | {r['holdout']} | "
              f"{r['held_out_share']:.3f} | {r['unused_share']:.3f} | {r['no_holdout_chance']:.3f} | {r['draws']} |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
