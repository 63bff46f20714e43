"""``mcd_rows``: the robust Mahalanobis distance of a single row, as TSB-AD-M runs MCD on multivariate recordings
(``support_fraction=0.8``, seed 2024; ``slidingWindow = 1``; fitted on the training prefix, as here): each row
z-scored across its channels (``ddof = 1``), scikit-learn's ``MinCovDet`` (FastMCD) fitted on the training rows (a
systematic sample of at most ``ROWS``), a row's score its squared Mahalanobis distance from the robust location in
the robust precision (a pseudo-inverse: rows z-scored across channels have a singular covariance).

A row detector (``trainer.judging.baselines.rowwise``): served as the location and the precision. Beside ``mcd`` (the
windows' principal-component codes), this is the row-wise form TSB-AD-M's MCD row was made with.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from trainer.judging.baselines.rowwise import RowDetector, sample, zscore_across, zscore_across_tf

NAME = "mcd_rows"
DESCRIPTION = "the robust (MCD) Mahalanobis distance of single rows z-scored across channels (TSB-AD-M's MCD)"
TSB_AD = "MCD"  # its row in TSB-AD-M's published table (landfall bench published)
TSB_AD_FIT = "prefix"  # what TSB-AD fitted it on there: the training prefix
SUPPORT, SEED = 0.8, 2024  # TSB-AD-M's multivariate setting
ROWS = 4_096  # training rows FastMCD is fitted on, at most


class Detector(RowDetector):
    name = NAME
    description = DESCRIPTION

    def __init__(self) -> None:
        super().__init__()
        self.location: np.ndarray | None = None  # [F]
        self.precision: np.ndarray | None = None  # [F, F]

    def fit_rows(self, rows: np.ndarray) -> None:
        from sklearn.covariance import MinCovDet

        z = zscore_across(sample(rows, ROWS))
        # TSB-AD's retries: a support that leaves a zero covariance raises, so a larger one, then scikit-learn's
        # default; rows too few or too alike for any: their plain covariance (a pseudo-inverse)
        for support in ((SUPPORT, SUPPORT + 0.1, None) if len(z) >= 2 * z.shape[1] else ()):
            try:
                with warnings.catch_warnings():  # a singular covariance (each row sums to 0) is expected
                    warnings.simplefilter("ignore")
                    mcd = MinCovDet(support_fraction=support, random_state=SEED).fit(z)
            except ValueError:
                continue
            self.location = np.asarray(mcd.location_, np.float64)
            self.precision = np.asarray(mcd.get_precision(), np.float64)
            return
        self.location = z.mean(axis=0)
        cov = np.atleast_2d(np.cov(z, rowvar=False)) if len(z) > 1 else np.zeros((z.shape[1], z.shape[1]))
        self.precision = np.linalg.pinv(cov, hermitian=True)

    def score_rows(self, rows: np.ndarray) -> np.ndarray:
        assert self.location is not None and self.precision is not None
        d = zscore_across(rows) - self.location
        return np.einsum("ij,jk,ik->i", d, self.precision, d)

    def rows_serving(self, module: Any) -> Any:
        import tensorflow as tf

        assert self.location is not None and self.precision is not None
        module.location = tf.Variable(self.location.astype(np.float32)[None], trainable=False, name="location")
        module.precision = tf.Variable(self.precision.astype(np.float32), trainable=False, name="precision")

        def score(rows: Any) -> Any:
            d = zscore_across_tf(rows) - module.location
            return tf.reduce_sum(tf.matmul(d, module.precision) * d, axis=1)

        return score
