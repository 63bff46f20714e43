"""The base of the detectors that score single rows (TSB-AD-M's IForest, OCSVM, PCA, HBOS, KNN, CBLOF, MCD on
multivariate recordings: ``slidingWindow = 1``), each row in original units, whatever window holds it.

A ``RowDetector`` subclass gives three things, on rows ``[m, F]`` in original units (float64):

- ``fit_rows(rows)``: fit on the training rows (the distinct rows of the fitted windows, a systematic sample of at
  most ``FIT_ROWS``; the detector may bound its own work further);
- ``score_rows(rows) -> [m]``: each row's score, at least 0, higher more anomalous;
- ``rows_serving(module) -> fn``: the same as a TensorFlow function of float32 rows ``[m, F]``, its constants put on
  ``module`` as variables (``trainer.judging.detectors`` saves it as a SavedModel: nothing is pickled).

The base makes it a scoring detector of ``trainer.judging.baselines``: ``row_scores(z)`` gives every row of the
standardised windows ``z`` its own score (each distinct row scored once: overlapping windows repeat every row ``T``
times), its ``unit`` is ``row`` (a row is located by its own score: TSB-AD's convention for these detectors) and it is
``alone`` (a row's score does not depend on the window around it, so the scorer may score each row once:
``landfall.detect.score``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from landfall.core.rules.series_windows import ROW
from trainer.judging.baselines.space import Space

FIT_ROWS = 8_192  # distinct training rows a row detector is fitted on, at most (a systematic sample)
MIN_CHANNELS = 3  # a detector that z-scores each row across its channels needs at least this many (``applies``)


def distinct(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``rows`` (``[m, F]``) in a fixed order and, for each row, its index among them."""
    rows = np.ascontiguousarray(rows, np.float64)
    keys = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return rows[first], inverse.ravel()


def zscore_across(rows: np.ndarray) -> np.ndarray:
    """Each row z-scored across its channels (``ddof = 1``; a constant row, or a row of one channel: zeros), as
    TSB-AD's ``zscore(X, axis=1, ddof=1)`` that every one of its multivariate row detectors but PCA applies first."""
    rows = np.asarray(rows, np.float64)
    f = rows.shape[1]
    centred = rows - rows.mean(axis=1, keepdims=True)
    if f < 2:
        return np.zeros_like(centred)
    sd = np.sqrt((centred ** 2).sum(axis=1, keepdims=True) / (f - 1))
    return np.divide(centred, sd, out=np.zeros_like(centred), where=sd > 0)


def zscore_across_tf(rows: Any) -> Any:
    """``zscore_across`` as a TensorFlow function of float32 rows ``[m, F]``."""
    import tensorflow as tf

    f = int(rows.shape[1])
    if f < 2:
        return tf.zeros_like(rows)
    centred = rows - tf.reduce_mean(rows, axis=1, keepdims=True)
    sd = tf.sqrt(tf.reduce_sum(centred ** 2, axis=1, keepdims=True) / float(f - 1))
    return tf.math.divide_no_nan(centred, sd)


def squared_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Every squared Euclidean distance between the rows of ``a`` ``[n, F]`` and of ``b`` ``[m, F]``, ``[n, m]``, at
    least 0 (``|a|^2 + |b|^2 - 2 a b^T``: one matrix product)."""
    return np.maximum((a ** 2).sum(axis=1)[:, None] + (b ** 2).sum(axis=1)[None, :] - 2.0 * a @ b.T, 0.0)


def squared_distances_tf(a: Any, b: Any, b_norms: Any) -> Any:
    """``squared_distances`` as a TensorFlow function: ``a`` float32 ``[n, F]``, ``b`` ``[m, F]`` and its squared norms
    ``b_norms`` ``[1, m]`` (a variable of the served module, computed once)."""
    import tensorflow as tf

    return tf.maximum(tf.reduce_sum(a ** 2, axis=1, keepdims=True) + b_norms
                      - 2.0 * tf.matmul(a, b, transpose_b=True), 0.0)


def squared_norms(b: np.ndarray) -> np.ndarray:
    """``b``'s squared row norms as ``squared_distances_tf`` takes them: float32 ``[1, m]``."""
    return (np.asarray(b, np.float64) ** 2).sum(axis=1).astype(np.float32)[None]


def sample(rows: np.ndarray, most: int) -> np.ndarray:
    """At most ``most`` of ``rows``, every ``m``-th (deterministic)."""
    return rows[:: max(1, -(-len(rows) // most))]


class RowDetector:
    """A detector of ``trainer.judging.baselines`` that scores each row alone (the module docstring)."""

    name = ""
    description = ""
    unit = ROW
    alone = True  # a row's score is its own, in whatever window: the scorer may score each row once

    across = True  # it z-scores each row across its channels first (TSB-AD's multivariate detectors but PCA)

    def __init__(self) -> None:
        self.space: Space | None = None
        self.fitted_on = 0

    @classmethod
    def applies(cls, space: Space) -> bool:
        """Whether it is fitted at all: a row z-scored across fewer than ``MIN_CHANNELS`` channels is nothing but
        zeros (one channel) or one of two points (two), so a detector that z-scores across them sees no data there."""
        return not cls.across or space.features >= MIN_CHANNELS

    def fit(self, z: np.ndarray, space: Space) -> RowDetector:
        self.space = space
        rows, _ = distinct(space.original_rows(z))
        rows = sample(rows, FIT_ROWS)
        self.fitted_on = len(rows)
        self.fit_rows(rows)
        return self

    def fit_rows(self, rows: np.ndarray) -> None:
        raise NotImplementedError

    def score_rows(self, rows: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def rows_serving(self, module: Any) -> Any:
        raise NotImplementedError

    def row_scores(self, z: np.ndarray) -> np.ndarray:
        """Each row's score of the standardised, flattened windows ``z`` (``[n, T x F]``), float64 ``[n, T]``."""
        assert self.space is not None, "fit first"
        t = self.space.shape[0]
        rows, inverse = distinct(self.space.original_rows(z))
        scores = np.maximum(np.asarray(self.score_rows(rows), np.float64), 0.0)
        return scores[inverse].reshape(len(z), t)

    def serving(self, module: Any) -> Any:
        import tensorflow as tf

        assert self.space is not None, "fit first"
        t, f = self.space.shape
        module.row_mean = tf.Variable(self.space.mean.astype(np.float32)[None], trainable=False, name="row_mean")
        module.row_std = tf.Variable(self.space.std.astype(np.float32)[None], trainable=False, name="row_std")
        score = self.rows_serving(module)

        def row_scores(z: Any) -> Any:
            rows = tf.reshape(z, [-1, f]) * module.row_std + module.row_mean
            return tf.reshape(tf.maximum(score(rows), 0.0), [-1, t])

        return row_scores

    def describe(self) -> dict[str, Any]:
        return {"training_rows": self.fitted_on, "training_instances": self.fitted_on}
