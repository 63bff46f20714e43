"""The verdict's label-free choice against its two controls (issue #55, part 5), on TSB-AD's protocol.

TSB-AutoAD (Liu, Lee and Paparrizos, PVLDB 2025) found that choosing a detector per series by synthetic anomalies (the
method ``trainer.selection`` uses) scored below simply always using the one detector that is best on average, and that
an ensemble beat both. So a label-free choice counts only where it beats:

- **(a) the one best fixed detector**: the candidate with the highest mean VUS-PR over every series of the run (both
  dev sets when both run: ``landfall bench detect --set dev,multivariate --baselines-only``), used on every series;
- **(b) the ensemble**: the mean of every candidate's row scores, each z-scored with the mean and standard deviation
  of its errors on the seed's held-out windows (clean: the anomaly-free training prefix's hold-out), TSB-AutoAD's
  unsupervised ensemble on the verdict's own candidates.

Per seed (``seed_figures``), as the verdict chooses (``trainer.verdict``'s ``_by_detection``): the surrogate set built
from the seed's held-out windows (``trainer.surrogate.build`` with the panel's statistics, seeded by the seed and the
series' name), every candidate's surrogate average precision over kinds, ``trainer.selection.choose`` with no gate.
The candidates are the fixed detectors the verdict fits (``trainer.baselines.NAMES``), not the trained model (a
``--baselines-only`` run trains none). ``table`` prints, per series, each rule's VUS-PR (medians over the seeds) and
its regret against the labelled best candidate, then the means.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

CHOICE, FIXED, ENSEMBLE, BEST = "choice", "(a) best fixed", "(b) ensemble", "labelled best"
SCALE_FLOOR = 1e-12  # a candidate whose held-out errors do not vary is centred, not divided by zero


def seed_figures(panel, located: dict[str, np.ndarray], held_windows: np.ndarray, seed: int, name: str,
                 rank: Callable[[np.ndarray], dict[str, float]]) -> dict:
    """The verdict's choice on this seed and the ensemble's figures (``rank``: row scores -> AP and VUS-PR)."""
    from trainer import selection, surrogate

    out: dict = {"chosen": None, "surrogate": {}, "ensemble": None}
    if not len(held_windows):
        return out
    sset = surrogate.build([held_windows], panel.std, surrogate.seed_of(seed, [name]))
    if sset is not None:
        found = {n: sset.figures(e)[surrogate.KIND_AP] for n, e in panel.errors(sset.instances).items()}
        out["surrogate"] = found
        out["chosen"] = selection.choose(found, selection.SURROGATE, lambda _: None).chosen
    held = panel.errors(held_windows)
    parts = [(located[n] - held[n].mean()) / max(float(held[n].std()), SCALE_FLOOR) for n in located if n in held]
    out["ensemble"] = rank(np.mean(parts, axis=0))
    return out


def rules(results: list[dict]) -> dict[str, dict[str, float | str | None]]:
    """Per series: each rule's VUS-PR (median over the seeds) and the candidate behind it."""
    medians = {r["series"]: {b: float(np.median([x["vus_pr"] for x in f])) for b, f in r["baselines"].items()
                             if not b.startswith("pca+")} for r in results}
    names = [n for n in next(iter(medians.values()), {})]
    fixed = max(names, key=lambda n: np.mean([m.get(n, 0.0) for m in medians.values()])) if names else None
    out: dict[str, dict] = {}
    for r in results:
        seeds = r.get("controls") or []
        med = medians[r["series"]]
        picked = [s["chosen"] for s in seeds if s.get("chosen")]
        choice = [r["baselines"][s["chosen"]][i]["vus_pr"] for i, s in enumerate(seeds) if s.get("chosen")]
        ensemble = [s["ensemble"]["vus_pr"] for s in seeds if s.get("ensemble")]
        best = max(med, key=med.get) if med else None
        out[r["series"]] = {
            CHOICE: float(np.median(choice)) if choice else None, "picked": ",".join(sorted(set(picked))) or None,
            FIXED: med.get(fixed) if fixed else None, "fixed": fixed,
            ENSEMBLE: float(np.median(ensemble)) if ensemble else None,
            BEST: med[best] if best else None, "best": best}
    return out


def table(results: list[dict]) -> str:
    """Per series: the choice, control (a), control (b) and the labelled best, each with its regret; the means."""
    found = rules(results)
    head = ["series", "choice (picked)", "regret", "(a) best fixed", "regret", "(b) ensemble", "regret",
            "labelled best"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    sums: dict[str, list[float]] = {}
    for series, row in found.items():
        cells = [series]
        for key, who in ((CHOICE, "picked"), (FIXED, "fixed"), (ENSEMBLE, None)):
            value, best = row[key], row[BEST]
            label = f" ({row[who]})" if who and row.get(who) else ""
            cells += ["-" if value is None else f"{value:.3f}{label}",
                      "-" if value is None or best is None else f"{best - value:.3f}"]
            if value is not None and best is not None:
                sums.setdefault(key, []).append(value)
                sums.setdefault(f"{key} regret", []).append(best - value)
        cells.append("-" if row[BEST] is None else f"{row[BEST]:.3f} ({row['best']})")
        if row[BEST] is not None:
            sums.setdefault(BEST, []).append(row[BEST])
        lines.append("| " + " | ".join(cells) + " |")

    def mean(key: str) -> str:
        got = sums.get(key) or []
        return f"{np.mean(got):.3f}" if got and len(got) == len(found) else "-"

    lines.append("| " + " | ".join([f"**mean of {len(found)}**", mean(CHOICE), mean(f"{CHOICE} regret"), mean(FIXED),
                                    mean(f"{FIXED} regret"), mean(ENSEMBLE), mean(f"{ENSEMBLE} regret"),
                                    mean(BEST)]) + " |")
    return "\n".join(lines)
