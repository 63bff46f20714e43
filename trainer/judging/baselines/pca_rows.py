"""``pca_rows``: PCA on single rows, scored as TSB-AD-M's PCA scored them in its published table (TSB-AD's PCA, an
adapted copy of pyod's, at the code of November 2024: multivariate rows never windowed). Every channel standardised
(here with the job's statistics: its training rows, where TSB-AD standardised the whole series, test region
included); channels constant in training dropped (pyod's ``zero_pruning``); scikit-learn's ``PCA`` keeping the
fewest components that explain more than ``VARIANCE`` of the variance (TSB-AD-M's ``n_components=0.25``); a row's
score ``sum_j |row - v_j| / r_j`` over those components ``v_j`` with their explained variance ratios ``r_j``: pyod's
formula, the distance from the row to each unit component taken as a point. TSB-AD-M's best on the server machine
075 (published VUS-PR 0.778). The formula depends on each component's sign, which scikit-learn fixes
(``svd_flip``); the table's version is not pinned by TSB-AD, so reproductions may differ where a sign flipped.

A row detector (``trainer.judging.baselines.rowwise``); served as the kept channels, the components and their ratios.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainer.judging.baselines.rowwise import RowDetector, squared_distances, squared_distances_tf, squared_norms

NAME = "pca_rows"
DESCRIPTION = ("principal components of single standardised rows (25% of the variance), a row's summed distances "
               "to them over their variance ratios (TSB-AD-M's PCA, pyod's score)")
TSB_AD = "PCA"  # its row in TSB-AD-M's published table (landfall bench published)
TSB_AD_FIT = "series"  # what TSB-AD fitted it on there: the whole series
VARIANCE = 0.25  # TSB-AD-M's multivariate setting (HP_list.Optimal_Multi_algo_HP_dict: n_components=0.25)


class Detector(RowDetector):
    name = NAME
    description = DESCRIPTION
    across = False  # each channel standardised over time, not each row across channels

    def __init__(self) -> None:
        super().__init__()
        self.kept: np.ndarray | None = None  # [c] channels that vary in training
        self.components: np.ndarray | None = None  # [k, c]
        self.ratios: np.ndarray | None = None  # [k]

    def standardised(self, rows: np.ndarray) -> np.ndarray:
        assert self.space is not None and self.kept is not None
        return ((rows - self.space.mean) / self.space.std)[:, self.kept]

    def fit_rows(self, rows: np.ndarray) -> None:
        from sklearn.decomposition import PCA

        assert self.space is not None
        kept = np.flatnonzero(rows.max(axis=0) > rows.min(axis=0))
        self.kept = kept if len(kept) else np.arange(rows.shape[1])
        z = self.standardised(rows)
        k = VARIANCE if len(z) > 1 and z.shape[1] > 1 else 1
        pca = PCA(n_components=k, random_state=0).fit(z)
        self.components = np.asarray(pca.components_, np.float64)
        ratios = np.asarray(pca.explained_variance_ratio_, np.float64)
        self.ratios = np.where(ratios > 1e-12, ratios, 1.0)

    def score_rows(self, rows: np.ndarray) -> np.ndarray:
        assert self.components is not None and self.ratios is not None
        z = self.standardised(rows)
        return (np.sqrt(squared_distances(z, self.components)) / self.ratios).sum(axis=1)

    def rows_serving(self, module: Any) -> Any:
        import tensorflow as tf

        assert self.space is not None and self.components is not None and self.ratios is not None
        assert self.kept is not None
        module.kept = tf.Variable(self.kept.astype(np.int32), trainable=False, name="kept")
        module.centre = tf.Variable(self.space.mean[self.kept].astype(np.float32)[None], trainable=False,
                                    name="centre")
        module.spread = tf.Variable(self.space.std[self.kept].astype(np.float32)[None], trainable=False,
                                    name="spread")
        module.components = tf.Variable(self.components.astype(np.float32), trainable=False, name="components")
        module.ratios = tf.Variable(self.ratios.astype(np.float32)[None], trainable=False, name="ratios")
        module.component_norms = tf.Variable(squared_norms(self.components), trainable=False, name="component_norms")

        def score(rows: Any) -> Any:
            z = (tf.gather(rows, module.kept, axis=1) - module.centre) / module.spread
            d = squared_distances_tf(z, module.components, module.component_norms)
            return tf.reduce_sum(tf.sqrt(d) / module.ratios, axis=1)

        return score

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "components": len(self.components) if self.components is not None else None,
                "channels": len(self.kept) if self.kept is not None else None}
