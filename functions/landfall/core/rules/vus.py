"""VUS-PR: the volume under the range-based precision-recall surface, the metric TSB-AD recommends.

Definition implemented (numpy only): Paparrizos, Boniol, Palpanas, Tsay, Elmore, Franklin, "Volume Under the
Surface: A New Accuracy Evaluation Measure for Time-Series Anomaly Detection", PVLDB 15(11), 2022
(doi:10.14778/3551793.3551830), as the reference implementation (github.com/TheDatumOrg/VUS) and aeon 1.6.0's
``aeon.benchmarking.metrics.anomaly_detection.range_pr_vus_score`` compute it; TSB-AD (Liu and Paparrizos, NeurIPS 2024
Datasets and Benchmarks) ranks detectors by it. With ``y`` the 0/1 labels in time order and ``s`` the scores:

1. **Labels with a buffer** of size ``b``: each labelled range ``[start, end]`` gets ramps of ``b // 2`` points on both
   sides, weight ``sqrt(1 - d / b)`` at distance ``d`` from the range (``b <= 1``: no ramp), capped at 1: ``y_b``.
   The ranges of ``y_b > 0`` are the *extended ranges*.
2. **Thresholds**: 250 of the scores, sorted from the highest down, taken at evenly spaced positions
   (``np.linspace(0, n - 1, 250)``); at threshold ``t`` the points with ``s >= t`` are flagged.
3. At each threshold: ``TP = sum(y_b[flagged])``, ``P = (sum(y) + sum(y_b)) / 2``, recall ``= min(TP / P, 1) x``
   the share of extended ranges holding a flagged point with ``y_b > 0`` (the existence reward), precision ``= TP /
   flagged``.
4. **Range PR-AUC** at buffer ``b``: the trapezoid area under (recall, precision), starting at recall 0 with
   precision 1 and ending at recall 1.
5. **VUS-PR** = the mean of the range PR-AUC over the buffer sizes ``0 .. max_buffer``. aeon's default is 500 points;
   TSB-AD uses its sliding window (the series' period). Landfall uses the window length of the model (``timesteps``):
   the scale on which its scores are located.

A constant score scores 0, as aeon returns. ``tests/landfall/core/test_vus.py`` checks this module against aeon 1.6.0
itself on random and real label layouts (``make test`` installs aeon in ``.venv-ref``, a venv of its own: aeon pins
numpy below the version TensorFlow here runs on).
"""

from __future__ import annotations

import numpy as np

THRESHOLDS = 250  # the reference implementation's number of sampled thresholds


def average_precision(labels: np.ndarray, scores: np.ndarray) -> float:
    """Step-wise average precision, as ``sklearn.metrics.average_precision_score`` defines it: ``sum_n (R_n - R_{n-1})
    P_n`` over the distinct scores taken as thresholds from the highest down, tied scores entering together; labels 0/1
    with at least one positive (``trainer.judging.labelled_check`` documents it;
    ``tests/trainer/test_labelled_check.py`` checks it against scikit-learn)."""
    y = np.asarray(labels, np.float64)
    s = np.asarray(scores, np.float64)
    positives = y.sum()
    if positives == 0:
        raise ValueError("average precision needs at least one positive label")
    order = np.argsort(-s, kind="stable")
    s, y = s[order], y[order]
    last_of_tie = np.r_[np.flatnonzero(np.diff(s)), len(s) - 1]  # each distinct score's last position
    tp = np.cumsum(y)[last_of_tie]
    precision = tp / (last_of_tie + 1)
    recall = tp / positives
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def _bounds(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First and last index (inclusive) of each run of ``y > 0``."""
    d = np.diff(np.r_[0, (y > 0).astype(np.int8), 0])
    return np.flatnonzero(d == 1), np.flatnonzero(d == -1) - 1


def buffered(y: np.ndarray, buffer: int) -> np.ndarray:
    """``y`` (0/1) with ramps of ``buffer // 2`` points on each side of every labelled range (step 1 above)."""
    out = np.asarray(y, np.float64).copy()
    if buffer <= 1:
        return out
    n, half = len(out), buffer // 2
    for s, e in zip(*_bounds(np.asarray(y)), strict=True):
        after = np.arange(e, min(e + half, n))
        out[after] += np.sqrt(1 - (after - e) / buffer)
        before = np.arange(max(s - half, 0), s)
        out[before] += np.sqrt(1 - (s - before) / buffer)
    return np.clip(out, 0.0, 1.0)


def range_pr_auc(y: np.ndarray, s: np.ndarray, buffer: int) -> float:
    """The range-based PR-AUC at one buffer size (steps 1 to 4), vectorised over the thresholds."""
    y = np.asarray(y, np.float64)
    s = np.asarray(s, np.float64)
    yb = buffered(y, buffer)
    thresholds = np.sort(s)[::-1][np.linspace(0, len(s) - 1, THRESHOLDS, dtype=np.int_)]
    order = np.argsort(-s, kind="stable")
    ranked = s[order]
    # Points flagged at threshold t: every s >= t, i.e. the first k of the descending order.
    flagged = np.searchsorted(-ranked, -thresholds, side="right")
    tp = np.r_[0.0, np.cumsum(yb[order])][flagged]
    p = (y.sum() + yb.sum()) / 2.0
    # The extended ranges (y_b > 0 throughout): one is found at t when its highest score reaches t.
    best = np.array([s[a:b + 1].max() for a, b in zip(*_bounds(yb), strict=True)])
    found = (best[None, :] >= thresholds[:, None]).sum(axis=1) / max(1, len(best))
    recall = np.minimum(tp / p, 1.0) * found if p > 0 else np.zeros_like(tp)
    precision = np.divide(tp, flagged, out=np.zeros_like(tp), where=flagged > 0)
    recalls = np.r_[0.0, recall, 1.0]
    precisions = np.r_[1.0, precision]
    return float(np.sum((recalls[1:-1] - recalls[:-2]) * (precisions[1:] + precisions[:-1]) / 2.0))


def vus_pr(labels: np.ndarray, scores: np.ndarray, max_buffer: int) -> float:
    """VUS-PR (step 5): the mean range PR-AUC over buffers ``0 .. max_buffer``; labels 0/1 in time order with at least
    one positive; NaN scores (points no window covers) rank lowest."""
    y = np.asarray(labels, np.float64)
    s = np.asarray(scores, np.float64)
    if len(y) != len(s):
        raise ValueError(f"{len(y)} labels for {len(s)} scores")
    if not (y > 0).any():
        raise ValueError("VUS-PR needs at least one positive label")
    s = np.where(np.isfinite(s), s, np.nanmin(s[np.isfinite(s)]) if np.isfinite(s).any() else 0.0)
    if np.unique(s).shape[0] == 1:
        return 0.0
    return float(np.mean([range_pr_auc(y, s, b) for b in range(int(max_buffer) + 1)]))


def tsb_ad_vus_pr(labels: np.ndarray, scores: np.ndarray, window: int, thresholds: int = THRESHOLDS) -> float:
    """VUS-PR as TSB-AD's ``get_metrics`` reports it (``TSB_AD.evaluation``, version ``opt``, ``thre`` 250, its
    ``slidingWindow`` the series' period): the benchmark's published tables are in this metric, so a figure compared
    with them must be too. It differs from ``vus_pr`` (aeon's, the reference implementation's) in three places, as
    TSB-AD 1.5 computes it (written here from that rule, numpy only; ``tests/landfall/core/test_vus.py`` checks it
    against the wheel in ``.venv-ref``):

    - at a threshold, only the *flagged* buffer points count as labelled: ``TP = flagged labelled points + the ramp
      weights of flagged buffer points`` and ``P = labelled points + half those weights``;
    - the existence reward counts the ranges extended by half the buffer (merged where they meet) holding a flagged
      point;
    - the area is the step-wise AP, ``sum_j (R_j - R_{j-1}) P_j`` from recall 0, with no point added at recall 1.

    The thresholds are ``thresholds`` of the scores, from the highest down at evenly spaced positions; the buffers
    ``0 .. window``; the result is the mean of the per-buffer areas."""
    y = np.asarray(labels, np.float64) > 0
    s = np.asarray(scores, np.float64)
    if len(y) != len(s):
        raise ValueError(f"{len(y)} labels for {len(s)} scores")
    if not y.any():
        raise ValueError("VUS-PR needs at least one positive label")
    s = np.where(np.isfinite(s), s, np.nanmin(s[np.isfinite(s)]) if np.isfinite(s).any() else 0.0)
    n = len(s)
    order = np.argsort(-s, kind="stable")
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    ranked = s[order]
    cut = ranked[np.linspace(0, n - 1, thresholds).astype(np.int64)]
    flagged = np.searchsorted(-ranked, -cut, side="right")  # points with s >= each threshold: a prefix of ``order``
    positives = float(y.sum())
    hits = np.r_[0.0, np.cumsum(y[order])][flagged]
    starts, ends = _bounds(y.astype(np.float64))
    areas = []
    for b in range(int(window) + 1):
        half = b // 2
        weights = y.astype(np.float64)
        for st, en in zip(starts, ends, strict=True):
            after = np.arange(en + 1, min(en + half + 1, n))
            weights[after] += np.sqrt(1 - (after - en) / b)
            before = np.arange(max(st - half, 0), st)
            weights[before] += np.sqrt(1 - (st - before) / b)
        weights = np.minimum(weights, 1.0)
        weights[y] = 0.0  # the buffer's points only
        extra = np.r_[0.0, np.cumsum(weights[order])][flagged]
        tp = hits + extra
        recall = np.minimum(tp / (positives + extra / 2.0), 1.0)
        # The ranges extended by ``half`` on each side, merged where they meet (the first clipped at 0, the last at n).
        ext: list[list[int]] = []
        for k, (st, en) in enumerate(zip(starts, ends, strict=True)):
            lo, hi = (max(st - half, 0) if k == 0 else st - half), en + half
            if ext and ext[-1][1] >= lo:
                ext[-1][1] = hi
            else:
                ext.append([lo, hi])
        ext[-1][1] = min(ext[-1][1], n - 1)
        first = np.array([rank[lo:hi + 1].min() for lo, hi in ext])
        found = (first[None, :] < flagged[:, None]).sum(axis=1) / len(ext)
        tpr = recall * found
        precision = tp / flagged
        areas.append(float(np.sum(np.diff(np.r_[0.0, tpr]) * precision)))
    return float(np.mean(areas))
