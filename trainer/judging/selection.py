"""Which candidate becomes champion: the one that detects best (``--select detection``, the default since #47).

The candidates of every job that can be judged are the model the job trained and the baselines the verdict fits in
its existing pass (``trainer.judging.baselines``: the mean window and every registered detector: PCA, the nearest
neighbour, KMeansAD, ...), each a detector served the
same way (``trainer.judging.detectors``). Each is scored on the same windows:

- **basis** (``basis``): with a labelled set (spec ``verdict.labelled``) that the candidates could score, its **labelled
  average precision** (``trainer.judging.labelled_check``); else, for a dataset scored by each row's own error
  (``--combine row``, spec ``shape.window.combine``), **the fixed choice for rows**, the nearest neighbour alone
  (compared with the champion on the surrogate set): by rows the surrogate's choice scores below always the nearest
  neighbour on both dev sets (VUS-PR 0.261 against 0.299, 3 seeds; docs/benchmarks.md, "Scored by rows"), and issue
  #55's rule makes the control that beats the choice the default; else its **surrogate average precision over kinds**,
  on synthetic anomalies injected into held-out windows (``trainer.judging.surrogate``: the mean of each anomaly kind's
  average precision against all the clean windows). Reconstruction loss is recorded, never the basis: a detector that
  reconstructs normal windows well may reconstruct anomalies as well (issues #38, #47).
- **order**: by the basis, highest first, the model's score less ``--model-margin`` (default 0.01): the model ranks
  above a baseline only when it detects better by that much (TSB-AD's finding that simple detectors often win is
  the prior, and a baseline costs no GPU to refit). Decided on the dev series (``landfall bench detect``,
  docs/benchmarks.md): by the surrogate over kinds, margins of 0 and 0.01 pick alike (mean regret 0.005 of labelled
  VUS-PR), 0.02 and more pass over a model that was within 0.01 of the best for a nearest neighbour 0.07 behind.
  A tie goes to the simpler candidate
  (the mean window, the registered detectors in their order, then the model).
- **gates**: a candidate that fails one of its gates (the model's ``min_skill``, ``min_skill_over``,
  ``min_average_precision*``; a baseline's ``min_average_precision``) is passed over for the next: the champion is
  the best candidate that may be promoted. ``chosen`` None when none may.
- **against the champion**: promoted when its basis score reaches the champion's (scored on the same set) plus
  ``--promote-margin`` (default 0.01: a rerun on the same data that detects as well keeps the champion); the write
  is conditional on ``champion.json``'s generation (``landfall.core.artifacts.champion.promote_evaluated``).

Everything it decides is in ``metrics.json``'s ``detection`` (and the result message's): ``basis``, each candidate's
figures, the order, ``chosen`` and ``why``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from landfall.core.rules.series_windows import MEAN, fixed_for_rows
from trainer.judging import baselines

MODEL = "model"


def candidates() -> tuple[str, ...]:
    """Every candidate, also the tie order: simplest first (the mean window, the registered detectors, the model)."""
    return (*baselines.NAMES, MODEL)


LABELLED, SURROGATE = "labelled average precision", "surrogate average precision over kinds"
# Scored by rows without labels: the one fixed detector that beats the surrogate's choice there (``basis``)
FIXED_FOR_ROWS = "the fixed choice for rows"
ROWS_DETECTOR = baselines.NEAREST
# The figure each basis reads from a candidate's figures (recorded as the summary's ``key``); the fixed choice is
# still compared with the champion on the surrogate set
KEYS = {LABELLED: "labelled_average_precision", SURROGATE: "kind_average_precision",
        FIXED_FOR_ROWS: "kind_average_precision"}


def basis(labelled: bool, combine: str = MEAN) -> str:
    """What the choice rests on: the labelled set when there is one; else, for a dataset scored by each row's own
    error (``combine`` ``row``), ``ROWS_DETECTOR`` (``FIXED_FOR_ROWS``); else the surrogate set."""
    if labelled:
        return LABELLED
    return FIXED_FOR_ROWS if fixed_for_rows(combine, labelled) else SURROGATE


@dataclasses.dataclass(frozen=True)
class Choice:
    basis: str
    order: tuple[str, ...]  # candidates with a score, best first
    scores: dict[str, float]
    chosen: str | None
    passed_over: dict[str, str]  # candidate -> the gate it failed

    @property
    def score(self) -> float | None:
        return self.scores.get(self.chosen) if self.chosen else None

    def why(self) -> str:
        if self.chosen is None:
            return f"no candidate may be promoted ({'; '.join(f'{n}: {w}' for n, w in self.passed_over.items())})"
        if self.basis == FIXED_FOR_ROWS:
            return (f"{self.chosen}: the fixed choice for a dataset scored by rows (shape.window.combine: row), where "
                    "it detects better than the surrogate's choice (docs/benchmarks.md, \"Scored by rows\"); its "
                    f"surrogate average precision over kinds {self.scores[self.chosen]:.3f}")
        ahead = [n for n in self.order[:self.order.index(self.chosen)]]
        parts = [f"{self.chosen} detects best among the candidates that may be promoted ({self.basis} "
                 f"{self.scores[self.chosen]:.3f}"]
        others = [f"{n} {self.scores[n]:.3f}" for n in self.order if n != self.chosen]
        if others:
            parts.append(f"; {', '.join(others)}")
        parts.append(")")
        if ahead:
            parts.append("; passed over: " + "; ".join(f"{n} ({self.passed_over.get(n, '?')})" for n in ahead))
        return "".join(parts)


def choose(scores: Mapping[str, float | None], basis: str,
           refusal: Callable[[str], str | None], model_margin: float = 0.0) -> Choice:
    """The order of the candidates with a score (the model's less ``model_margin``) and the first one ``refusal`` lets
    through (its reason, else None)."""
    known = {n: float(v) for n, v in scores.items() if v is not None}
    if basis == FIXED_FOR_ROWS:  # the one candidate; without its figure, the surrogate's choice among the rest
        if ROWS_DETECTOR in known:
            known = {ROWS_DETECTOR: known[ROWS_DETECTOR]}
        else:
            basis = SURROGATE
    order = candidates()

    def rank(name: str) -> tuple[float, int]:
        return (-(known[name] - (model_margin if name == MODEL else 0.0)),
                order.index(name) if name in order else 99)

    ranked = tuple(sorted(known, key=rank))
    passed: dict[str, str] = {}
    for name in ranked:
        why = refusal(name)
        if why is None:
            return Choice(basis, ranked, known, name, passed)
        passed[name] = why
    return Choice(basis, ranked, known, None, passed)


def comparable(choice: Choice, detector: str | None) -> bool:
    """Whether the champion (which serves ``detector``, its ``evaluation``'s) is compared with the choice by score:
    always, but under the fixed choice for rows, where a champion of another detector (chosen before the dataset was
    scored by rows) is one the rule would not serve, so the choice replaces it."""
    return choice.basis != FIXED_FOR_ROWS or detector == choice.chosen


def summary(choice: Choice, figures: Mapping[str, Mapping[str, Any]], surrogate: Mapping[str, Any] | None,
            margin: float, model_margin: float = 0.0) -> dict[str, Any]:
    """``metrics.json``'s ``detection`` (the champion's part is added by the verdict once it is known)."""
    return {"select": "detection", "basis": choice.basis, "key": KEYS.get(choice.basis), "order": list(choice.order),
            "chosen": choice.chosen,
            "score": choice.score, "why": choice.why(), "passed_over": dict(choice.passed_over),
            "candidates": {n: dict(f) for n, f in figures.items()}, "surrogate": dict(surrogate or {}),
            "promote_margin": margin, "model_margin": model_margin}
