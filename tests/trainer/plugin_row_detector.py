"""A detector that scores single rows and ships outside Landfall, as a plug-in module
(``LANDFALL_DETECTORS=tests.trainer.plugin_row_detector`` or ``trainer.judging.baselines.register``): the smallest real
example of a row scorer (``trainer.judging.baselines.rowwise``), used by tests/trainer/test_detector_registry.py. A
row's score is its largest channel deviation from the training rows' median, in units of that channel's median absolute
deviation. Nothing else in Landfall names it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainer.judging.baselines.rowwise import RowDetector


class Detector(RowDetector):
    name = "row_mad"
    description = "a single row's largest channel deviation from the training median, in median absolute deviations"
    across = False  # each channel on its own: applies to any number of channels

    def __init__(self) -> None:
        super().__init__()
        self.median: np.ndarray | None = None
        self.mad: np.ndarray | None = None

    def fit_rows(self, rows: np.ndarray) -> None:
        self.median = np.median(rows, axis=0)
        mad = np.median(np.abs(rows - self.median), axis=0)
        self.mad = np.where(mad > 1e-9, mad, 1.0)

    def score_rows(self, rows: np.ndarray) -> np.ndarray:
        assert self.median is not None and self.mad is not None
        return (np.abs(rows - self.median) / self.mad).max(axis=1)

    def rows_serving(self, module: Any) -> Any:
        import tensorflow as tf

        assert self.median is not None and self.mad is not None
        module.median = tf.Variable(self.median.astype(np.float32)[None], trainable=False, name="median")
        module.mad = tf.Variable(self.mad.astype(np.float32)[None], trainable=False, name="mad")

        def score(rows: Any) -> Any:
            return tf.reduce_max(tf.abs(rows - module.median) / module.mad, axis=1)

        return score
