"""The labelled check (trainer.judging.labelled_check): precision and recall at the threshold, average precision
(cross-checked with scikit-learn), and BasicMotions through the trainer: standing is the normal activity, the others
anomalous."""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, precision_score, recall_score

from trainer.judging import labelled_check as labelled


@pytest.mark.parametrize("seed", range(6))
def test_average_precision_is_sklearns(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 400))
    y = (rng.random(n) < rng.uniform(0.05, 0.7)).astype(np.uint8)
    y[int(rng.integers(n))] = 1
    # Scores with many ties (rounded) in half the cases: tied scores enter the curve together.
    scores = rng.gamma(2.0, 1.0, n) + 1.5 * y * rng.random()
    if seed % 2:
        scores = np.round(scores, 1)
    assert labelled.average_precision(y, scores) == pytest.approx(average_precision_score(y, scores), abs=1e-12)
    threshold = float(np.quantile(scores, 0.7))
    got = labelled.at_threshold(y, scores, threshold)
    flags = scores > threshold
    assert got.recall == pytest.approx(recall_score(y, flags))
    assert got.precision == pytest.approx(precision_score(y, flags, zero_division=0.0))
    assert got.flagged == int(flags.sum())


def test_the_figures_at_the_threshold_by_hand():
    y = np.array([0, 0, 1, 1, 0, 1])
    s = np.array([0.1, 0.9, 0.8, 0.3, 0.2, 0.8])
    got = labelled.at_threshold(y, s, 0.5)  # flagged: 0.9 (normal), 0.8, 0.8 (anomalous)
    assert (got.precision, got.recall, got.flagged) == (pytest.approx(2 / 3), pytest.approx(2 / 3), 3)
    # Ranked: 0.9 (0) | 0.8, 0.8 (1, 1) | 0.3 (1): AP = 2/3 * 2/3 + 1/3 * 3/4
    assert got.average_precision == pytest.approx(2 / 3 * 2 / 3 + 1 / 3 * 3 / 4)
    nothing = labelled.at_threshold(y, s, 1.0)
    assert nothing.precision is None and nothing.recall == 0.0  # undefined, not zero
    with pytest.raises(ValueError, match="positive"):
        labelled.average_precision(np.zeros(3), s[:3])


# -- BasicMotions through the trainer ------------------------------------------------------------------------------
# Normal: the 10 "Standing" instances of the training split (100 timesteps x 6 channels). The labelled set: the
# 40 instances of the test split, the 30 of the other activities (Running, Walking, Badminton) anomalous.
TRAIN_ARGS = ["--timesteps", "100", "--features", "6", "--units", "16,4", "--dropout", "0",
              "--batch-size-per-worker", "4", "--validation-fraction", "0.3", "--learning-rate", "1e-2",
              "--warm-start", "none"]


def test_basic_motions_standing_is_normal_the_other_activities_are_found(emulator_stack, bucket, tmp_path):
    from landfall.core.artifacts import labelled as store
    from landfall_bench import realdata
    from tests.trainer.helpers import run_trainer, write_dataset

    storage = emulator_stack.storage
    x_train, activity_train = realdata.basic_motions("train")
    x_test, activity_test = realdata.basic_motions("test")
    manifest = write_dataset(storage, str(tmp_path / "tfrecords" / "motions" / "a1"),
                             x_train[activity_train == "Standing"], shards=1, dataset="motions")
    anomalous = (activity_test != "Standing").astype(np.uint8)
    uri = store.write(storage, bucket, "motions", x_test, anomalous, source="basic_motions_test", label="label")
    # 1. The dataset's first model: scored on the labelled set, above the gate, promoted.
    first = run_trainer(["--manifest", manifest, "--job-dir", str(tmp_path / "runs" / "job-1"), *TRAIN_ARGS,
                         "--epochs", "30", "--labelled", uri, "--min-average-precision", "0.9"],
                        LANDFALL_MIN_SKILL="-100")  # this test is about the labelled gate, not the skill floor
    assert first.returncode == 0, first.stderr[-3000:]
    m1 = json.loads((tmp_path / "runs" / "job-1" / "metrics.json").read_text())
    got = m1["labelled"]
    assert (got["instances"], got["positives"], got["uri"]) == (40, 30, uri)
    assert got["challenger"]["average_precision"] >= 0.9 and got["challenger"]["recall"] >= 0.9
    assert got["challenger"]["threshold"] == m1["threshold"]["value"]
    assert got["champion"] is None  # no champion before it: unknown, not zero
    assert m1["verdict"] == "promoted"
    # The detectors to beat on the same set (issue #38): AP and VUS-PR each, and those that rank it better named.
    from trainer.judging import baselines

    assert set(got["baselines"]) == set(baselines.NAMES)  # every registered detector, kmeans included
    assert all(0 < f["average_precision"] <= 1 and 0 <= f["vus_pr"] <= 1 for f in got["baselines"].values())
    assert 0 < got["challenger"]["vus_pr"] <= 1
    assert got["beaten_by"] == sorted(n for n, f in got["baselines"].items()
                                      if f["average_precision"] > got["challenger"]["average_precision"])
    print(f"BasicMotions, Standing normal: {json.dumps(got['challenger'])}")  # the figure docs/benchmarks.md quotes
    # 2. The same data with the labels inverted (standing the anomaly): below the gate, the champion is kept, and
    # the champion (job-1's model, at its own threshold) is scored on the same set.
    inverted = store.write(storage, bucket, "motions", x_test, 1 - anomalous, source="inverted", label="label")
    second = run_trainer(["--manifest", manifest, "--job-dir", str(tmp_path / "runs" / "job-2"), *TRAIN_ARGS,
                          "--epochs", "2", "--labelled", inverted, "--min-average-precision", "0.9"],
                         LANDFALL_MIN_SKILL="-100")
    assert second.returncode == 0, second.stderr[-3000:]
    m2 = json.loads((tmp_path / "runs" / "job-2" / "metrics.json").read_text())
    assert m2["verdict"] == "low_average_precision" and m2["champion_run"] == "job-1"
    assert m2["labelled"]["challenger"]["average_precision"] < 0.9
    champion = m2["labelled"]["champion"]
    # The champion's own threshold: job-1's champion is the candidate that detected the labelled anomalies best
    # (the labelled average precision is the basis when the dataset has a labelled set: trainer.judging.selection).
    assert m1["detection"]["basis"] == "labelled average precision"
    assert champion["threshold"] == m1["detection"]["threshold"] == json.loads(
        Path(m1["champion"], "threshold.json").read_text())["value"]
    assert champion["average_precision"] < 0.5  # job-1 ranks the inverted anomalies last
