"""Reconstruction errors, for the verdict and for ``landfall score``.

A ``Scorer`` wraps one model with its own normalisation: instances (float32 ``[n, T, F]`` in original
units) are normalised with the model's ``normalization.json`` statistics, reconstructed, the reconstruction
de-normalised, and each instance's error is the mean squared difference over its ``T x F`` values, each feature's
residual divided by its ``error_scale`` (``normalization.json``; ``landfall.core.rules.moments.error_scale``: the
feature's training standard deviation, a constant feature's a small one), so every feature counts in its own spread:
``mse_standardised`` (issue #55: in original units one channel of a server machine decides the error, and the
detectors' VUS-PR fall to half of a plain windowed PCA's, docs/benchmarks.md). A model saved without
``error_scale`` (before it) is scored in original units (``mse_original_units``), as it was. The verdict measures
every candidate, a champion saved by another job included, in the job's own scale (``measured_in``), so they are
compared on one scale.

``score_chunks`` streams: it writes a Parquet row group per input chunk (``index``, ``error``, ``anomaly``)
and keeps only a fixed-size log-spaced histogram of the errors for the summary quantiles, so its memory
does not grow with the input.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np

from landfall.core.artifacts import model_files
from landfall.core.artifacts.champion import ALONE, NORMALIZATION, RECONSTRUCTION, ROW_SCORES, THRESHOLD, UNIT
from landfall.core.errors import Invalid, NotFound
from landfall.core.rules import moments, series_windows
from landfall.core.rules.series_windows import COMBINE, MEAN, ROW  # threshold.json's row threshold: the unit it serves
from landfall.core.services.storage import Storage, is_gs

PREDICT_BATCH = 1024
QUANTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99, "p99.9": 0.999}
# Summary histogram: log10(error) from 1e-12 to 1e12, 200 bins a decade (quantiles within ~1.2 %).
HIST_LO, HIST_HI, HIST_PER_DECADE = -12.0, 12.0, 200
ERROR_SCALE = "error_scale"  # normalization.json: each feature's error unit
STANDARDISED, ORIGINAL_UNITS = "mse_standardised", "mse_original_units"  # the error's metric, with and without it
SCORE = "score"  # a scoring detector's (trainer.judging.baselines): its own row scores, no reconstruction error


@dataclasses.dataclass
class Scorer:
    predict: Callable[[np.ndarray], np.ndarray]  # normalised [n, T, F] -> normalised reconstruction
    mean: np.ndarray | None
    std: np.ndarray | None
    shape: tuple[int, int] | None = None
    threshold: dict[str, Any] | None = None  # threshold.json of the model, when it has one
    uri: str = ""
    scale: np.ndarray | None = None  # each feature's error unit (None: original units)
    scores: bool = False  # predict gives each window row's score ([n, T], a scoring detector), not a reconstruction
    unit: str | None = None  # normalization.json's unit: how its rows are located (None: the dataset's combine)
    alone: bool = False  # normalization.json's alone: a row's score is its own in any window (scored once per row)

    @classmethod
    def from_model(cls, model: Any, mean: Any = None, std: Any = None, shape: tuple[int, int] | None = None,
                   uri: str = "", scale: Any = None) -> Scorer:
        """A Keras model in memory (the challenger, just trained)."""
        def predict(x: np.ndarray) -> np.ndarray:
            return np.asarray(model(x, training=False))

        return cls(predict, _vector(mean), _vector(std), shape, None, uri, _vector(scale))

    @classmethod
    def load(cls, storage: Storage, model_uri: str, cache_dir: str | Path | None = None,
             files: dict[str, str] | None = None) -> Scorer:
        """A saved model (``runs/<job>/model``): its SavedModel serving signature, ``normalization.json`` and
        ``threshold.json``. A gs:// model is downloaded into ``cache_dir`` (reused there if already downloaded;
        default: a temporary folder, removed once the model is loaded). ``files`` (a champion record's: each file's
        SHA-256) are checked before anything is read (``landfall.core.artifacts.model_files``). ``NotFound`` when
        the model is missing, ``Invalid`` when it cannot be loaded or its files are not the ones promoted."""
        if is_gs(model_uri) and cache_dir is None:
            with tempfile.TemporaryDirectory(prefix="landfall-model-") as tmp:
                return cls.load(storage, model_uri, tmp, files)
        import tensorflow as tf

        local = Path(model_uri)
        if is_gs(model_uri):
            local = Path(cache_dir) / hashlib.sha256(model_uri.encode()).hexdigest()[:16]  # type: ignore[arg-type]
            if not (local / "saved_model.pb").exists():
                tmp = local.with_name(local.name + f".part-{os.getpid()}")
                shutil.rmtree(tmp, ignore_errors=True)
                if storage.sync_down(model_uri, tmp) == 0:
                    raise NotFound(f"model {model_uri} holds no files")
                shutil.rmtree(local, ignore_errors=True)
                os.replace(tmp, local)
        if not (local / "saved_model.pb").exists():
            raise NotFound(f"model {model_uri}: no saved_model.pb")
        model_files.check(local, files, model_uri)
        try:
            norm = json.loads((local / NORMALIZATION).read_text())
        except (OSError, ValueError) as exc:
            raise Invalid(f"model {model_uri}: unreadable {NORMALIZATION}: {exc}") from None
        if not isinstance(norm, dict):  # valid JSON of another type is no model's statistics
            raise Invalid(f"model {model_uri}: {NORMALIZATION} is a JSON {type(norm).__name__}, not an object")
        threshold = None
        if (local / THRESHOLD).exists():
            try:
                threshold = json.loads((local / THRESHOLD).read_text())
            except ValueError:
                threshold = None
        try:
            serve = tf.saved_model.load(str(local)).signatures["serving_default"]
        except Exception as exc:  # a corrupt or foreign SavedModel: TensorFlow raises many kinds
            raise Invalid(f"model {model_uri}: cannot be loaded: {type(exc).__name__}: {exc}") from None

        outputs = set(serve.structured_outputs)
        output = ROW_SCORES if ROW_SCORES in outputs and RECONSTRUCTION not in outputs else RECONSTRUCTION
        if output not in outputs:
            raise Invalid(f"model {model_uri}: its serving signature gives {sorted(outputs)}, neither "
                          f"{RECONSTRUCTION!r} nor {ROW_SCORES!r}")

        def predict(x: np.ndarray) -> np.ndarray:
            return serve(x=tf.constant(x, tf.float32))[output].numpy()

        normalized = bool(norm.get("normalized"))
        unit = norm.get(UNIT) if norm.get(UNIT) in COMBINE else None
        try:
            shape = tuple(int(n) for n in norm["shape"]) if norm.get("shape") else None
            return cls(predict, _vector(norm.get("mean")) if normalized else None,  # type: ignore[arg-type]
                       _vector(norm.get("std")) if normalized else None, shape, threshold, model_uri,
                       _vector(norm.get(ERROR_SCALE)), output == ROW_SCORES, unit,
                       output == ROW_SCORES and norm.get(ALONE) is True)
        except (TypeError, ValueError) as exc:  # a field of another JSON type: a shape, mean or std that is none
            raise Invalid(f"model {model_uri}: {NORMALIZATION} is not a model's: {exc}") from None

    @property
    def metric(self) -> str:
        """What ``errors`` returns: ``mse_standardised`` or, for a model saved without ``error_scale``,
        ``mse_original_units``; ``score`` for a scoring detector (its own scores)."""
        return SCORE if self.scores else metric_of(self.scale)

    def combine(self, dataset: str) -> str:
        """How this champion's rows are scored from the windows over them: its own ``unit`` when it declares one,
        else ``dataset`` (the dataset's ``shape.window.combine``)."""
        return self.unit or dataset

    def measured_in(self, scale: Any) -> Scorer:
        """The same model, its errors measured in ``scale`` (another job's, to compare on one scale)."""
        return dataclasses.replace(self, scale=_vector(scale))

    def errors(self, x: np.ndarray) -> np.ndarray:
        """Per-instance MSE (``metric``), float64 ``[n]``: the mean of its rows' (``row_errors``)."""
        return self.row_errors(x).mean(axis=1)

    def window_scores(self, x: np.ndarray) -> np.ndarray:
        """Each instance's score as the surrogate set judges it, in this model's unit
        (``landfall.core.rules.series_windows.window_scores``)."""
        return series_windows.window_scores(self.row_errors(x), self.unit)

    def row_errors(self, x: np.ndarray) -> np.ndarray:
        """Each instance row's own MSE over its features (``metric``), float64 ``[n, T]``
        (``landfall.core.rules.moments.scaled_row_mse``)."""
        x = np.asarray(x, np.float32)
        if self.shape is not None and tuple(x.shape[1:]) != tuple(self.shape):
            raise Invalid(f"instances of shape {list(x.shape[1:])}, the model {self.uri or ''} expects "
                          f"{list(self.shape)}")
        out = np.empty(x.shape[:2], np.float64)
        for start in range(0, len(x), PREDICT_BATCH):
            batch = x[start:start + PREDICT_BATCH]
            z = (batch - self.mean) / self.std if self.mean is not None else batch
            if self.scores:  # a scoring detector: its row scores as they are
                out[start:start + len(batch)] = self.predict(np.ascontiguousarray(z, np.float32)).reshape(
                    len(batch), -1).astype(np.float64)
                continue
            recon = self.predict(np.ascontiguousarray(z, np.float32)).astype(np.float64)
            if self.mean is not None:
                recon = recon * self.std + self.mean
            out[start:start + len(batch)] = moments.scaled_row_mse(recon - batch.astype(np.float64), self.scale)
        return out

    def errors_of(self, blocks: Iterable[np.ndarray], rows: Histogram | None = None) -> np.ndarray:
        """Every block's per-instance errors, concatenated; ``rows`` (when given) gathers every instance row's own
        error (``row_errors``), for the row threshold."""
        parts = []
        for block in blocks:
            if not len(block):
                continue
            own = self.row_errors(block)
            if rows is not None:
                rows.add(own.ravel())
            parts.append(own.mean(axis=1))
        return np.concatenate(parts) if parts else np.empty(0, np.float64)


def metric_of(scale: Any) -> str:
    """The error's metric with ``scale`` (an ``error_scale``, or None: original units)."""
    return STANDARDISED if scale is not None else ORIGINAL_UNITS


def _vector(values: Any) -> np.ndarray | None:
    return None if values is None else np.asarray(values, np.float64)


def quantiles(errors: np.ndarray) -> dict[str, float]:
    return {k: float(np.quantile(errors, q)) for k, q in QUANTILES.items()} if len(errors) else {}


def threshold_doc(errors: np.ndarray, quantile: float, metric: str = STANDARDISED,
                  rows: Histogram | None = None) -> dict[str, Any]:
    """``threshold.json`` (``landfall.threshold/v1``): the anomaly threshold and the error quantiles; with ``rows``
    (the same held-out windows' row errors), ``row``: the same quantile of a row's own error, the threshold of
    ``landfall score --combine row`` (a window's error averages its rows', so a row's own error spreads wider)."""
    from landfall.core.artifacts.champion import THRESHOLD_SCHEMA

    doc = {"schema": THRESHOLD_SCHEMA, "metric": metric, "quantile": quantile,
           "value": float(np.quantile(errors, quantile)), "quantiles": quantiles(errors),
           "instances": len(errors)}
    if rows is not None and rows.count:
        doc[ROW] = {"value": rows.quantile(quantile), "quantiles": rows.quantiles(), "rows": rows.count}
    return doc


class Histogram:
    """Fixed log-spaced bins of the errors: flat memory whatever the count; approximate quantiles."""

    def __init__(self) -> None:
        self.bins = int((HIST_HI - HIST_LO) * HIST_PER_DECADE)
        self.counts = np.zeros(self.bins + 2, np.int64)  # [under, bins..., over]
        self.count = 0
        self.min = float("inf")
        self.max = float("-inf")

    def add(self, errors: np.ndarray) -> None:
        if not len(errors):
            return
        logs = np.log10(np.maximum(errors, 1e-300))
        idx = np.floor((logs - HIST_LO) * HIST_PER_DECADE).astype(np.int64) + 1
        self.counts += np.bincount(np.clip(idx, 0, self.bins + 1), minlength=self.bins + 2)
        self.count += len(errors)
        self.min = min(self.min, float(errors.min()))
        self.max = max(self.max, float(errors.max()))

    def quantile(self, q: float) -> float:
        if not self.count:
            return float("nan")
        rank = q * (self.count - 1)
        i = int(np.searchsorted(np.cumsum(self.counts), rank, side="right"))
        if i == 0:
            return self.min
        if i > self.bins:
            return self.max
        centre = 10 ** (HIST_LO + (i - 0.5) / HIST_PER_DECADE)
        return float(min(max(centre, self.min), self.max))

    def quantiles(self) -> dict[str, float]:
        return {k: self.quantile(q) for k, q in QUANTILES.items()} if self.count else {}

    def coarse(self, bins: int = 40) -> dict[str, list[float]]:
        """A plot-sized histogram between the observed min and max (log-spaced edges)."""
        if not self.count:
            return {"edges": [], "counts": []}
        lo, hi = np.log10(max(self.min, 1e-300)), np.log10(max(self.max, 1e-300))
        hi = hi if hi > lo else lo + 1e-6
        centres = HIST_LO + (np.arange(self.bins) + 0.5) / HIST_PER_DECADE
        edges = np.linspace(lo, hi, bins + 1)
        inner = self.counts[1:-1]
        counts, _ = np.histogram(np.clip(centres, lo, hi), bins=edges, weights=inner)
        counts[0] += self.counts[0]
        counts[-1] += self.counts[-1]
        return {"edges": (10 ** edges).tolist(), "counts": counts.astype(int).tolist()}


@dataclasses.dataclass
class Summary:
    count: int
    anomalies: int
    threshold: float
    quantiles: dict[str, float]
    min: float
    max: float
    out: str
    histogram: Histogram

    def as_dict(self) -> dict[str, Any]:
        return {"count": self.count, "anomalies": self.anomalies, "threshold": self.threshold,
                "quantiles": self.quantiles, "min": self.min, "max": self.max, "out": self.out}


def score_chunks(chunks: Iterable[np.ndarray], scorer: Scorer, out: str | Path, threshold: float,
                 on_chunk: Callable[[np.ndarray, np.ndarray], None] | None = None) -> Summary:
    """Scores every instance of ``chunks`` (float32 ``[k, T, F]`` each, original units) and writes ``out``,
    a Parquet file with ``index`` (int64, the instance's position in the input), ``error`` (float64) and
    ``anomaly`` (error > threshold), one row group per chunk. ``on_chunk(index, errors)`` sees each chunk."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("index", pa.int64()), ("error", pa.float64()), ("anomaly", pa.bool_())])
    hist = Histogram()
    n = anomalies = 0
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    try:
        with pq.ParquetWriter(str(tmp), schema) as writer:
            for chunk in chunks:
                if not len(chunk):
                    continue
                errors = scorer.errors(chunk)
                index = np.arange(n, n + len(errors), dtype=np.int64)
                flags = errors > threshold
                writer.write_table(pa.table({"index": index, "error": errors, "anomaly": flags}, schema=schema))
                hist.add(errors)
                anomalies += int(flags.sum())
                n += len(errors)
                if on_chunk:
                    on_chunk(index, errors)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return Summary(n, anomalies, float(threshold), hist.quantiles(), hist.min if n else float("nan"),
                   hist.max if n else float("nan"), str(out), hist)


def threshold_of(scorer: Scorer, combine: str = MEAN) -> float:
    """The model's anomaly threshold (``threshold.json`` ``value``; with ``combine`` ``row``, its ``row`` value);
    ``Invalid`` when it has none."""
    doc = scorer.threshold if isinstance(scorer.threshold, dict) else {}
    if combine == ROW:
        value = _number((doc.get(ROW) if isinstance(doc.get(ROW), dict) else {}).get("value"))
        if value is None:
            raise Invalid(f"model {scorer.uri} has no row threshold in its {THRESHOLD} (saved before row scores, or "
                          "with no held-out data): pass --threshold")
        return float(value)
    value = _number(doc.get("value"))
    if value is None:
        raise Invalid(f"model {scorer.uri} has no {THRESHOLD} (a model trained before verdicts, or with no "
                      "held-out data): pass --threshold")
    return value


def _number(value: Any) -> float | None:
    """A threshold's value when it is a finite number (valid JSON of another type is no threshold), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value):
        return None
    return float(value)
