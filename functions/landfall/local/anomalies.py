"""The demo's scoring panel: a small file with injected anomalies, scored as ``landfall score`` scores it.

``score_injected`` spikes a few instances of normal data (``magnitude`` standard deviations of each feature
at a few timesteps), writes the file (``.npy``), reads it back with the converter's streaming reader, scores
every instance with the model (``landfall.core.scoring``: reconstruction MSE, each feature in its ``error_scale``,
anomaly = error > the model's ``threshold.json``) into a Parquet file, and returns which instances were flagged,
which were
injected, and a plot-sized histogram of the errors with the threshold.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import numpy as np

from landfall.core.services.storage import Storage

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's start-up chatter is not the demo's output


@dataclasses.dataclass(frozen=True)
class InjectedScore:
    flagged: list[int]  # instances whose error is above the threshold
    injected: list[int]  # instances that were spiked
    threshold: float
    quantile: float | None  # the threshold's quantile of the held-out errors (threshold.json)
    histogram: dict[str, list[float]]  # {"edges": [...], "counts": [...]} (log-spaced edges)
    errors: list[float]  # every instance's error, in order (small: a demo file)
    src: str  # the file scored
    out: str  # the Parquet scores

    @property
    def caught(self) -> int:
        return len(set(self.flagged) & set(self.injected))

    @property
    def false_alarms(self) -> int:
        return len(set(self.flagged) - set(self.injected))

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "caught": self.caught, "false_alarms": self.false_alarms}


def inject(normal: np.ndarray, count: int, magnitude: float = 8.0, timesteps: int = 3,
           seed: int = 7) -> tuple[np.ndarray, list[int]]:
    """A copy of ``normal`` with ``count`` instances spiked at ``timesteps`` random steps by ``magnitude``
    standard deviations of every feature (random sign); returns it and the spiked indices."""
    rng = np.random.default_rng(seed)
    x = np.array(normal, dtype=np.float32, copy=True)
    std = x.reshape(-1, x.shape[-1]).std(0)
    idx = sorted(int(i) for i in rng.choice(len(x), size=count, replace=False))
    for i in idx:
        steps = rng.choice(x.shape[1], size=min(timesteps, x.shape[1]), replace=False)
        sign = rng.choice([-1.0, 1.0], size=x.shape[-1])
        x[i, steps, :] += (magnitude * std * sign).astype(np.float32)
    return x, idx


def score_injected(model_uri: str, work_dir: str | Path, *, normal: np.ndarray | None = None, count: int = 512,
                   injected: int = 8, magnitude: float = 8.0, seed: int = 1,
                   storage: Storage | None = None) -> InjectedScore:
    """Scores ``normal`` (default: ``count`` fresh instances of ``time_series(seed=seed)`` without its own
    anomalies; pass data drawn as the model's training data was) with ``injected`` of them spiked."""
    from landfall.arrival import formats
    from landfall.arrival.config import ConverterConfig
    from landfall.core import scoring

    storage = storage or Storage()
    scorer = scoring.Scorer.load(storage, model_uri)
    threshold = scoring.threshold_of(scorer)
    shape = scorer.shape or (36, 10)
    if normal is None:
        from landfall.local.synthetic import time_series

        normal = time_series(count, shape[0], shape[1], seed=seed, anomaly_fraction=0.0)
    x, idx = inject(normal, injected, magnitude)
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    src = work / "injected.npy"
    np.save(src, x.astype("<f4"))
    errors: list[np.ndarray] = []
    cfg = ConverterConfig.load({}, timesteps=shape[0], features=shape[1])
    with open(src, "rb") as fh:
        chunks = formats.read("npy", fh, src.stat().st_size, cfg).chunks
        summary = scoring.score_chunks(chunks, scorer, work / "injected.scores.parquet", threshold,
                                       on_chunk=lambda _, e: errors.append(e))
    all_errors = np.concatenate(errors) if errors else np.empty(0)
    return InjectedScore(
        flagged=[int(i) for i in np.flatnonzero(all_errors > threshold)], injected=idx, threshold=threshold,
        quantile=(scorer.threshold or {}).get("quantile"), histogram=summary.histogram.coarse(),
        errors=all_errors.tolist(), src=str(src), out=summary.out)
