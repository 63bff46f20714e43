"""Detection quality without labels: every candidate scored on synthetic anomalies injected into held-out windows.

Held-out reconstruction loss says how well a detector reconstructs normal windows, not how well it tells an anomalous
window from a normal one (issue #38's finding, and TSB-AD's). Goswami et al., "Unsupervised Model Selection for
Time-series Anomaly Detection" (ICLR 2023), rank candidate detectors without labels by their performance on synthetic
anomalies injected into the data. Here:

- **The set.** The verdict's held-out windows (in original units, the chief's share, never trained on) are taken in
  their order, at most ``MAX_WINDOWS`` of them and at most ``MAX_BYTES`` in all (a systematic sample). The set is those
  windows as they are (label 0) followed by a copy of each with one anomaly injected (label 1): every anomalous window
  has its own clean twin, so a detector is judged only on what the anomaly changes. The injected copies are never seen
  by training: the hold-out is apart from training by its gap (``landfall.core.rules.holdout``), and the set is built
  after
  ``fit``.
- **The anomalies**, the kinds TimeEval's GutenTAG and Goswami et al. inject, in one channel (one that varies in the
  job's data, when any does) or, where several vary, in 1 to a quarter of them at once (``MAX_CHANNEL_SHARE``: the
  same run, sign and kind in each; issue #55: the choice on the multivariate dev set, docs/benchmarks.md), over a run of
  ``T/8``..``T/2`` steps at a random place in the window, their size in units of that channel's standard deviation
  (the job's statistics): ``spike`` (one step, 3-6 sd), ``level_shift`` (+-1.5-3 sd to the window's end),
  ``variance`` (noise of 1-2 sd added), ``trend`` (a ramp reaching +-2-4 sd), ``frequency`` (the run played at twice
  its speed), ``flat`` (the run stuck at its first value), ``pattern`` (the run reversed in time). Window ``i`` gets
  kind ``KINDS[i mod 7]``, so every kind is equally represented.
- **Deterministic** per (``--seed``, the job's arrivals): the generator is seeded with ``crc32`` of the seed and the
  sorted arrival ids, so a rerun, a restarted chief and the champion's evaluation see the very same set.
- **Figures.** A detector's score for a window is its reconstruction error (``landfall.core.scoring``), as on arrival.
  Per kind, ``by_kind`` gives each kind's average precision (``landfall.core.rules.vus.average_precision``,
  scikit-learn's definition) against all the clean windows: which anomalies a detector misses. **The selection
  metric is their mean, ``kind_average_precision``** (issue #47): each kind's twins are one in eight of the windows
  it is judged among, so it rewards what real detection needs, anomalies ranked above *all* the normal windows, where
  the whole set's ``average_precision`` (half the windows anomalous) also rewards a detector that ranks them merely
  above the median normal window; and every kind counts alike. On the dev series it picked the labelled best or
  within 0.05 of it in every run (the whole set's AP: 0.36 short on a road-traffic series; docs/benchmarks.md).
  ``average_precision`` over the whole set and ``vus_pr`` (``landfall.core.rules.vus``, buffers 0 to ``VUS_BUFFER``
  windows over the set's order) are reported beside it. A detector that cannot tell the twins apart scores 0.5 on
  the whole set and about 1/8 per kind; one that ranks every anomalous copy above every clean window scores 1.

The surrogate is only trusted as far as it agrees with real labels: ``landfall bench detect`` gives, per run, the rank
agreement (Kendall tau) between the surrogate's ordering of the candidates and their labelled VUS-PR on public series
(docs/benchmarks.md, "Detection on TSB-AD's protocol").
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Iterable, Sequence

import numpy as np

from landfall.core.rules import vus

KINDS = ("spike", "level_shift", "variance", "trend", "frequency", "flat", "pattern")
KIND_AP = "kind_average_precision"  # the selection metric: the mean over KINDS of each kind's average precision
MAX_WINDOWS = 2048  # held-out windows the set is built from, at most (the set holds twice as many) ...
MAX_BYTES = 64 << 20  # ... and at most this much float32 in the set, so a wide window (256 x 100) takes fewer
VUS_BUFFER = 4  # windows: VUS-PR's largest buffer over the set's order
MAX_CHANNEL_SHARE = 0.25  # an anomaly moves at most this share of the channels that may carry it (at least one)


def seed_of(seed: int, arrivals: Iterable[str]) -> int:
    """The generator's seed: a function of the job's ``--seed`` and its arrivals only."""
    return zlib.crc32(f"{int(seed)}/{','.join(sorted(set(arrivals)))}".encode())


def inject(window: np.ndarray, kind: str, scale: np.ndarray, rng: np.random.Generator,
           channels: np.ndarray | None = None) -> np.ndarray:
    """A copy of ``window`` (``[T, F]``, original units) with one anomaly of ``kind`` over one run of steps, in one of
    ``channels`` (default: any) or, where several may carry it, in ``1..MAX_CHANNEL_SHARE`` of them at once (the same
    run, sign and kind; each channel's size in its own ``scale``): a server's or a sensor rig's anomalies move several
    correlated channels together, which a one-channel anomaly (off every channel's correlations) does not resemble."""
    x = np.array(window, np.float64)
    t_len, features = x.shape
    pool = np.asarray(channels if channels is not None and len(channels) else np.arange(features), np.int64)
    first = int(pool[rng.integers(len(pool))])
    chosen = [first]
    if len(pool) > 1:  # no draw for one channel: a univariate set is the very set it was before
        most = max(1, int(np.ceil(MAX_CHANNEL_SHARE * len(pool))))
        extra = int(rng.integers(0, most))
        others = pool[pool != first]
        chosen += [int(c) for c in rng.choice(others, size=min(extra, len(others)), replace=False)]
    run = int(rng.integers(max(2, t_len // 8), max(3, t_len // 2 + 1)))
    run = min(run, t_len)
    lo = int(rng.integers(0, t_len - run + 1))
    hi = lo + run
    sign = 1.0 if rng.random() < 0.5 else -1.0
    at = None
    for f in chosen:
        sd = float(scale[f]) if float(scale[f]) > 1e-12 else max(1e-6, float(np.abs(x[:, f]).mean()) or 1.0)
        col = x[:, f]
        if kind == "spike":
            at = int(rng.integers(t_len)) if at is None else at
            col[at] += sign * rng.uniform(3.0, 6.0) * sd
        elif kind == "level_shift":
            col[lo:] += sign * rng.uniform(1.5, 3.0) * sd
        elif kind == "variance":
            col[lo:hi] += rng.normal(0.0, rng.uniform(1.0, 2.0) * sd, run)
        elif kind == "trend":
            col[lo:hi] += sign * rng.uniform(2.0, 4.0) * sd * np.linspace(0.0, 1.0, run)
        elif kind == "frequency":
            src = lo + 2.0 * np.arange(run)
            col[lo:hi] = np.interp(np.minimum(src, t_len - 1), np.arange(t_len), window[:, f].astype(np.float64))
        elif kind == "flat":
            col[lo:hi] = col[lo]
        elif kind == "pattern":
            col[lo:hi] = col[lo:hi][::-1].copy()
        else:
            raise ValueError(f"unknown anomaly kind {kind!r}")
        x[:, f] = col
    return x.astype(np.float32)


@dataclasses.dataclass(frozen=True)
class SurrogateSet:
    """``instances`` float32 ``[2n, T, F]`` (the clean windows, then their injected twins), ``labels`` ``[2n]``,
    ``kinds`` (the kind injected into twin ``i``), ``seed`` (the generator's)."""

    instances: np.ndarray
    labels: np.ndarray
    kinds: tuple[str, ...]
    seed: int

    @property
    def windows(self) -> int:
        return len(self.kinds)

    def describe(self) -> dict:
        return {"windows": self.windows, "anomalous": int(self.labels.sum()), "kinds": list(KINDS),
                "seed": self.seed, "metric": "average_precision", "vus_buffer": VUS_BUFFER,
                "definition": "held-out windows (label 0) and a twin of each with one injected anomaly (label 1): "
                              "docs/verdicts.md#detection-without-labels"}

    def figures(self, errors: np.ndarray) -> dict:
        """A detector's figures from its errors on ``instances``: AP, VUS-PR and AP per kind."""
        errors = np.asarray(errors, np.float64)
        if len(errors) != len(self.labels) or not np.isfinite(errors).all():
            return {KIND_AP: None, "average_precision": None, "vus_pr": None, "by_kind": {}}
        n = self.windows
        kinds = np.array(self.kinds)
        by_kind = {}
        for kind in KINDS:
            twins = np.flatnonzero(kinds == kind)
            if len(twins):
                pick = np.concatenate([np.arange(n), n + twins])
                by_kind[kind] = vus.average_precision(self.labels[pick], errors[pick])
        return {KIND_AP: float(np.mean(list(by_kind.values()))) if by_kind else None,
                "average_precision": vus.average_precision(self.labels, errors),
                "vus_pr": vus.vus_pr(self.labels, errors, VUS_BUFFER),
                "by_kind": {k: round(v, 4) for k, v in by_kind.items()}}


def build(blocks: Sequence[np.ndarray], scale: Sequence[float] | np.ndarray, seed: int) -> SurrogateSet | None:
    """The set from the held-out ``blocks`` (float32 ``[k, T, F]`` each, original units); None without a window."""
    parts = [np.asarray(b, np.float32) for b in blocks if len(b)]
    if not parts:
        return None
    clean = np.concatenate(parts)
    most = max(64, min(MAX_WINDOWS, MAX_BYTES // (8 * int(np.prod(clean.shape[1:])))))
    if len(clean) > most:
        clean = clean[np.linspace(0, len(clean) - 1, most).astype(np.int64)]
    rng = np.random.default_rng(seed)
    scale = np.asarray(scale, np.float64).reshape(-1)
    if scale.size != clean.shape[2]:
        scale = clean.reshape(-1, clean.shape[2]).std(axis=0)
    kinds = tuple(KINDS[i % len(KINDS)] for i in range(len(clean)))
    # Into channels that vary in these windows: one constant there (43 of MSL's 55 channels in its training prefix)
    # leaves flat, frequency and pattern anomalies unchanged and makes a spike obvious to every detector alike, so the
    # set would not tell the candidates apart (issue #55). Every channel when none varies.
    flat = clean.reshape(-1, clean.shape[2])
    varying = np.flatnonzero(flat.max(axis=0) > flat.min(axis=0))
    twins = np.stack([inject(w, k, scale, rng, varying) for w, k in zip(clean, kinds, strict=True)])
    labels = np.concatenate([np.zeros(len(clean), np.int64), np.ones(len(clean), np.int64)])
    return SurrogateSet(np.concatenate([clean, twins]), labels, kinds, int(seed))
