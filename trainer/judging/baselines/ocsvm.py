"""``ocsvm``: a one-class SVM on single rows, as TSB-AD-M runs its OCSVM on multivariate recordings (``run_OCSVM``
with its multivariate setting ``kernel='rbf', nu=0.1``; ``slidingWindow = 1``): scikit-learn's ``OneClassSVM`` (RBF,
``gamma = 1 / F``) fitted on the training rows, each z-scored across its own channels (``ddof = 1``) and then min-max
scaled across them; a row is scored z-scored only (TSB-AD's ``decision_function`` since its commit f2bf6b3, which the
published table was made with). So a row is judged by the shape of its channels against each other, not by any
channel's level. TSB-AD-M's best on the server machine 066 (published VUS-PR 0.649).

A row detector (``trainer.judging.baselines.rowwise``): a row's score is ``sum(alpha) - sum_i alpha_i K(sv_i, row)``,
the SVM's decision function turned into a score at least 0 (the same order: higher more anomalous); served as the
support vectors and their weights, variables of a SavedModel.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainer.judging.baselines.rowwise import (
    RowDetector,
    sample,
    squared_distances,
    squared_distances_tf,
    squared_norms,
    zscore_across,
    zscore_across_tf,
)

NAME = "ocsvm"
DESCRIPTION = "a one-class SVM (RBF) on single rows, each z-scored across its channels (TSB-AD-M's OCSVM)"
TSB_AD = "OCSVM"  # its row in TSB-AD-M's published table (landfall bench published)
TSB_AD_FIT = "prefix"  # what TSB-AD fitted it on there: the training prefix
NU = 0.1  # TSB-AD-M's multivariate setting (HP_list.Optimal_Multi_algo_HP_dict)
ROWS = 4_096  # training rows the SVM is fitted on, at most: its cost grows with their square
BLOCK = 4_096  # rows scored at once (memory: BLOCK x support vectors)


def min_max_across(rows: np.ndarray) -> np.ndarray:
    """Each row min-max scaled across its channels (a row of one value: zeros), as TSB-AD's
    ``MinMaxScaler().fit_transform(X.T).T``."""
    lo, hi = rows.min(axis=1, keepdims=True), rows.max(axis=1, keepdims=True)
    return np.divide(rows - lo, hi - lo, out=np.zeros_like(rows), where=hi > lo)


class Detector(RowDetector):
    name = NAME
    description = DESCRIPTION

    def __init__(self) -> None:
        super().__init__()
        self.vectors: np.ndarray | None = None  # [s, F] support vectors
        self.alpha: np.ndarray | None = None  # [s] their weights
        self.gamma = 1.0

    def fit_rows(self, rows: np.ndarray) -> None:
        from sklearn.svm import OneClassSVM

        prepared = min_max_across(zscore_across(sample(rows, ROWS)))
        self.gamma = 1.0 / prepared.shape[1]
        svm = OneClassSVM(kernel="rbf", gamma=self.gamma, nu=NU).fit(prepared)
        self.vectors = np.asarray(svm.support_vectors_, np.float64)
        self.alpha = np.asarray(svm.dual_coef_, np.float64).ravel()

    def score_rows(self, rows: np.ndarray) -> np.ndarray:
        assert self.vectors is not None and self.alpha is not None
        p = zscore_across(rows)
        out = np.empty(len(p), np.float64)
        for lo in range(0, len(p), BLOCK):
            kernel = np.exp(-self.gamma * squared_distances(p[lo:lo + BLOCK], self.vectors))
            out[lo:lo + len(kernel)] = self.alpha.sum() - kernel @ self.alpha
        return out

    def rows_serving(self, module: Any) -> Any:
        import tensorflow as tf

        assert self.vectors is not None and self.alpha is not None
        module.vectors = tf.Variable(self.vectors.astype(np.float32), trainable=False, name="vectors")
        module.alpha = tf.Variable(self.alpha.astype(np.float32)[:, None], trainable=False, name="alpha")
        module.norms = tf.Variable(squared_norms(self.vectors), trainable=False, name="norms")
        gamma = float(self.gamma)

        def score(rows: Any) -> Any:
            d = squared_distances_tf(zscore_across_tf(rows), module.vectors, module.norms)
            return tf.reduce_sum(module.alpha) - tf.squeeze(tf.matmul(tf.exp(-gamma * d), module.alpha), 1)

        return score

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "support_vectors": len(self.vectors) if self.vectors is not None else None,
                "nu": NU}
