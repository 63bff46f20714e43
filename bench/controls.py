"""The verdict's label-free choice against its two controls (issue #55, part 5), on TSB-AD's protocol.

TSB-AutoAD (Liu, Lee and Paparrizos, PVLDB 2025) found that choosing a detector per series by synthetic anomalies (the
method ``trainer.judging.selection`` uses) scored below simply always using the one detector that is best on average,
and that an ensemble beat both. So a label-free choice counts only where it beats:

- **(a) the one best fixed detector**: the candidate with the highest mean VUS-PR over every series of the run (both
  dev sets when both run: ``landfall bench detect --set dev,multivariate --baselines-only``), used on every series;
- **(b) the ensemble**: the mean of every candidate's row scores, each z-scored with the mean and standard deviation
  of its errors on the seed's held-out windows (clean: the anomaly-free training prefix's hold-out), TSB-AutoAD's
  unsupervised ensemble on the verdict's own candidates.

Per seed (``seed_figures``), as the verdict chooses (``trainer.judging.verdict``'s ``_by_detection``): the surrogate set
built from the seed's held-out windows (``trainer.judging.surrogate.build`` with the panel's statistics, seeded by the
seed and the series' name), every candidate's surrogate average precision over kinds,
``trainer.judging.selection.choose`` with no gate. The candidates are the fixed detectors the verdict fits
(``trainer.judging.baselines.NAMES``); a run that trains (an option such as ``default``) gets a second table per option
where the model is a candidate too and the choice is the run's own champion (its verdict's pick among the model and the
fixed detectors). ``table`` prints, per series, each rule's VUS-PR (medians over the seeds) and its regret against the
labelled best candidate, then the means.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from landfall.core.rules.series_windows import MEAN

CHOICE, FIXED, ENSEMBLE, BEST = "choice", "(a) best fixed", "(b) ensemble", "labelled best"
SCALE_FLOOR = 1e-12  # a candidate whose held-out errors do not vary is centred, not divided by zero


def ensemble(located: dict[str, np.ndarray], held: dict[str, np.ndarray],
             rank: Callable[[np.ndarray], dict[str, float]]) -> dict[str, float]:
    """Control (b): the mean of every candidate's row scores, each z-scored with its errors on the held-out windows."""
    parts = [(located[n] - held[n].mean()) / max(float(held[n].std()), SCALE_FLOOR) for n in located if n in held]
    return rank(np.mean(parts, axis=0))


def seed_figures(panel, located: dict[str, np.ndarray], held_windows: np.ndarray, seed: int, name: str,
                 rank: Callable[[np.ndarray], dict[str, float]], held: dict[str, np.ndarray] | None = None,
                 combine: str = MEAN) -> dict:
    """The verdict's choice among the fixed detectors on this seed and their ensemble's figures (``rank``: row scores
    -> AP and VUS-PR; ``held``: the panel's errors on ``held_windows``, when already computed; ``combine``: how the
    rows are scored, which the verdict chooses for, ``trainer.judging.selection.basis``)."""
    from trainer.judging import selection, surrogate

    out: dict = {"chosen": None, "surrogate": {}, "ensemble": None}
    if not len(held_windows):
        return out
    sset = surrogate.build([held_windows], panel.std, surrogate.seed_of(seed, [name]))
    if sset is not None:
        found = {n: sset.figures(e)[surrogate.KIND_AP] for n, e in panel.window_scores(sset.instances).items()}
        out["surrogate"] = found
        out["chosen"] = selection.choose(found, selection.basis(False, combine), lambda _: None).chosen
    out["ensemble"] = ensemble(located, held if held is not None else panel.errors(held_windows), rank)
    return out


def seeds_of(result: dict, option: str | None) -> list[dict]:
    """Per seed: every candidate's labelled VUS-PR, the choice (name, VUS-PR) and the ensemble's VUS-PR. With
    ``option`` (a trained run): the run's champion as the choice, the model among the candidates; without: the
    fixed detectors and the choice ``seed_figures`` made among them."""
    out = []
    if option is None:
        for i, s in enumerate(result.get("controls") or []):
            cands = {b: f[i]["vus_pr"] for b, f in result["baselines"].items() if not b.startswith("pca+")}
            chosen = s.get("chosen")
            out.append({"candidates": cands, "chosen": chosen, "choice": cands.get(chosen) if chosen else None,
                        "ensemble": (s.get("ensemble") or {}).get("vus_pr")})
        return out
    for run in result["runs"].get(option) or []:
        cands = {c: v for c, v in (run.get("labelled_vus_pr") or {}).items() if v is not None}
        out.append({"candidates": cands, "chosen": run.get("detector"),
                    "choice": (run.get("champion") or {}).get("vus_pr"),
                    "ensemble": (run.get("ensemble") or {}).get("vus_pr")})
    return out


def rules(results: list[dict], option: str | None = None) -> dict[str, dict[str, float | str | None]]:
    """Per series: each rule's VUS-PR (median over the seeds) and the candidate behind it (``seeds_of``)."""
    seeds = {r["series"]: seeds_of(r, option) for r in results}
    medians = {series: {c: float(np.median([s["candidates"][c] for s in got if c in s["candidates"]]))
                        for c in dict.fromkeys(c for s in got for c in s["candidates"])}
               for series, got in seeds.items()}
    names = list(dict.fromkeys(c for m in medians.values() for c in m))
    scored = [n for n in names if all(n in m for m in medians.values())]
    fixed = max(scored, key=lambda n: np.mean([m[n] for m in medians.values()])) if scored else None
    out: dict[str, dict] = {}
    for series, got in seeds.items():
        med = medians[series]
        choice = [s["choice"] for s in got if s["choice"] is not None]
        ensembles = [s["ensemble"] for s in got if s["ensemble"] is not None]
        best = max(med, key=med.get) if med else None
        out[series] = {
            CHOICE: float(np.median(choice)) if choice else None,
            "picked": ",".join(sorted({str(s["chosen"]) for s in got if s["chosen"]})) or None,
            FIXED: med.get(fixed) if fixed else None, "fixed": fixed,
            ENSEMBLE: float(np.median(ensembles)) if ensembles else None,
            BEST: med[best] if best else None, "best": best}
    return out


def table(results: list[dict], option: str | None = None) -> str:
    """Per series: the choice, control (a), control (b) and the labelled best, each with its regret; the means. With
    ``option``: the trained runs of that option (the model a candidate), else the fixed detectors alone."""
    found = rules(results, option)
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
