"""The labelled check: a model scored against a dataset's labelled evaluation set (spec ``verdict.labelled``).

The set (``landfall.core.artifacts.labelled``: instances in original units, labels 1 anomalous / 0 normal) is read once
per job through ``landfall.core.services.storage``. A model's score for an instance is its reconstruction error
(``landfall.core.scoring.Scorer.errors_of``, MSE in original units); an instance is flagged when its error is
**strictly above** the threshold (as ``landfall score`` flags it). With ``y`` the labels and ``s`` the scores:

- **precision** at the threshold ``t``: TP / (TP + FP), the share of flagged instances that are anomalous;
  ``None`` (undefined, not zero) when nothing is flagged.
- **recall** at ``t``: TP / (TP + FN), the share of anomalous instances flagged (the set has positives: the
  converter refuses one without).
- **average precision** (threshold-free), the step-wise area under the precision-recall curve, as
  ``sklearn.metrics.average_precision_score`` defines it: ``AP = sum_n (R_n - R_{n-1}) * P_n`` over the
  distinct scores taken as thresholds from the highest down (``score >= s_n`` flagged), ``P_n`` and ``R_n``
  the precision and recall there, ``R_0 = 0``. Tied scores enter together. A random ranking scores about
  the share of positives; a perfect one 1.
- **VUS-PR** (``landfall.core.rules.vus``, the metric TSB-AD recommends): the volume under the range-based PR surface
over
  buffers of 0 to ``timesteps`` instances, taking the set's instances in their order as time (a series dataset's
  labelled recording, cut into the job's windows in time order by ``load``, is that series' windows).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from landfall.core.artifacts import labelled as labelled_mod
from landfall.core.rules import vus
from landfall.core.services.storage import Storage


@dataclasses.dataclass(frozen=True)
class Figures:
    precision: float | None
    recall: float
    average_precision: float
    threshold: float
    flagged: int
    vus_pr: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def average_precision(labels: np.ndarray, scores: np.ndarray) -> float:
    """Step-wise average precision (see the module docstring); labels 0/1 with at least one positive."""
    return vus.average_precision(labels, scores)


def vus_pr(labels: np.ndarray, scores: np.ndarray, buffer: int) -> float:
    """VUS-PR (``landfall.core.rules.vus``) with buffers of 0 to ``buffer`` instances."""
    return vus.vus_pr(labels, scores, buffer)


def at_threshold(labels: np.ndarray, scores: np.ndarray, threshold: float, buffer: int | None = None) -> Figures:
    y = np.asarray(labels).astype(bool)
    flags = np.asarray(scores) > threshold
    tp = int((flags & y).sum())
    flagged = int(flags.sum())
    return Figures(precision=tp / flagged if flagged else None, recall=tp / int(y.sum()),
                   average_precision=average_precision(y, scores), threshold=float(threshold), flagged=flagged,
                   vus_pr=vus_pr(y, scores, buffer) if buffer is not None else None)


def ranking(labels: np.ndarray, scores: np.ndarray, buffer: int) -> dict[str, float]:
    """The threshold-free figures of any detector's scores: average precision and VUS-PR."""
    return {"average_precision": average_precision(labels, scores), "vus_pr": vus_pr(labels, scores, buffer)}


def load(storage: Storage, uri: str, length: int) -> labelled_mod.LabelledSet:
    """The set at ``uri`` (``NotFound``, ``Invalid`` as ``landfall.core.artifacts.labelled.read``); a series
    dataset's labelled recording cut into the job's windows of ``length`` rows (``LabelledRecording.windows``)."""
    found = labelled_mod.read(storage, uri)
    return found.windows(length) if isinstance(found, labelled_mod.LabelledRecording) else found


def evaluate(scorer: Any, labelled: labelled_mod.LabelledSet, threshold: float) -> Figures:
    """``scorer`` (a ``landfall.core.scoring.Scorer``) on the set, at ``threshold`` (that model's own)."""
    errors = scorer.errors_of([labelled.instances])
    return at_threshold(labelled.labels, errors, threshold)
