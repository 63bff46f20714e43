"""``iforest``: an isolation forest on single rows, as TSB-AD-M ran IForest on multivariate recordings for its
published table (``n_estimators=25, max_features=0.8``, ``max_samples='auto'``, seed 0; single rows at the code of
November 2024): each row z-scored across its channels (``ddof = 1``), scikit-learn's ``IsolationForest`` fitted on the
training rows; a row's score ``2^(-E[h(row)] / c(max_samples))``, the forest's anomaly score (TSB-AD's
``-decision_function`` up to its constant offset: the same order), in (0, 1].

A row detector (``trainer.judging.baselines.rowwise``): served as the trees' arrays (each node's feature, threshold and
children, each leaf's path length), walked level by level in TensorFlow, so nothing is pickled.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainer.judging.baselines.rowwise import RowDetector, zscore_across, zscore_across_tf

NAME = "iforest"
DESCRIPTION = "an isolation forest of 25 trees on single rows z-scored across channels (TSB-AD-M's IForest)"
TSB_AD = "IForest"  # its row in TSB-AD-M's published table (landfall bench published)
TSB_AD_FIT = "series"  # what TSB-AD fitted it on there: the whole series
TREES, FEATURES, SEED = 25, 0.8, 0  # TSB-AD-M's multivariate setting


def average_path(n: np.ndarray) -> np.ndarray:
    """``c(n)``: the average path length of an unsuccessful search in a binary search tree of ``n`` points (Liu, Ting,
    Zhou, "Isolation Forest", ICDM 2008; scikit-learn's ``_average_path_length``)."""
    n = np.asarray(n, np.float64)
    out = np.zeros_like(n)
    out[n == 2] = 1.0
    big = n > 2
    out[big] = 2.0 * (np.log(n[big] - 1.0) + np.euler_gamma) - 2.0 * (n[big] - 1.0) / n[big]
    return out


class Detector(RowDetector):
    name = NAME
    description = DESCRIPTION

    def __init__(self) -> None:
        super().__init__()
        self.forest: Any = None
        # [trees, nodes]: each node's feature (of the row), threshold, children (a leaf: itself) and leaf path length
        self.feature: np.ndarray | None = None
        self.threshold: np.ndarray | None = None
        self.left: np.ndarray | None = None
        self.right: np.ndarray | None = None
        self.path: np.ndarray | None = None
        self.depth = 0
        self.norm = 1.0  # c(max_samples) x trees

    def fit_rows(self, rows: np.ndarray) -> None:
        from sklearn.ensemble import IsolationForest

        z = zscore_across(rows)
        self.forest = IsolationForest(n_estimators=TREES, max_features=FEATURES, random_state=SEED).fit(z)
        trees = [(est.tree_, feats) for est, feats in zip(self.forest.estimators_, self.forest.estimators_features_,
                                                           strict=True)]
        width = max(t.node_count for t, _ in trees)
        shape = (len(trees), width)
        self.feature, self.left, self.right = (np.zeros(shape, np.int32) for _ in range(3))
        self.threshold, self.path = np.zeros(shape, np.float64), np.zeros(shape, np.float64)
        depth_most = 0
        for i, (tree, feats) in enumerate(trees):
            n = tree.node_count
            leaf = tree.children_left[:n] < 0
            own = np.arange(n)
            self.left[i, :n] = np.where(leaf, own, tree.children_left[:n])
            self.right[i, :n] = np.where(leaf, own, tree.children_right[:n])
            self.feature[i, :n] = np.where(leaf, 0, np.asarray(feats)[np.maximum(tree.feature[:n], 0)])
            self.threshold[i, :n] = tree.threshold[:n]
            depth = np.zeros(n, np.int64)
            for node in range(n):  # children come after their parent in scikit-learn's arrays
                if not leaf[node]:
                    depth[tree.children_left[node]] = depth[tree.children_right[node]] = depth[node] + 1
            self.path[i, :n] = depth + average_path(tree.n_node_samples[:n])
            depth_most = max(depth_most, int(depth.max()))
        self.depth = depth_most
        self.norm = len(trees) * float(average_path(np.array([self.forest.max_samples_]))[0])

    def score_rows(self, rows: np.ndarray) -> np.ndarray:
        assert self.forest is not None
        return -self.forest.score_samples(zscore_across(rows))

    def rows_serving(self, module: Any) -> Any:
        import tensorflow as tf

        assert self.feature is not None and self.path is not None
        for name in ("feature", "left", "right"):
            setattr(module, f"tree_{name}", tf.Variable(getattr(self, name), trainable=False, name=f"tree_{name}"))
        module.tree_threshold = tf.Variable(self.threshold.astype(np.float32), trainable=False, name="tree_threshold")
        module.tree_path = tf.Variable(self.path.astype(np.float32), trainable=False, name="tree_path")
        depth, norm, trees = self.depth, max(self.norm, 1e-12), len(self.feature)

        def score(rows: Any) -> Any:
            z = zscore_across_tf(rows)  # [m, F]
            node = tf.zeros([trees, tf.shape(z)[0]], tf.int32)  # every row at every tree's root
            for _ in range(depth):  # one level a step; a leaf's children are itself
                feature = tf.gather(module.tree_feature, node, batch_dims=1)  # [trees, m]
                value = tf.transpose(tf.gather(z, tf.transpose(feature), batch_dims=1))  # each row's, [trees, m]
                go_left = value <= tf.gather(module.tree_threshold, node, batch_dims=1)
                node = tf.where(go_left, tf.gather(module.tree_left, node, batch_dims=1),
                                tf.gather(module.tree_right, node, batch_dims=1))
            lengths = tf.reduce_sum(tf.gather(module.tree_path, node, batch_dims=1), axis=0)
            return tf.pow(2.0, -lengths / norm)

        return score

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "trees": TREES, "depth": self.depth}
