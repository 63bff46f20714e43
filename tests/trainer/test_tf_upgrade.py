"""A champion saved under the previous TensorFlow still serves under this one.

``tests/trainer/fixtures/champion-tf2.20/`` holds a model exactly as ``trainer.train.save_model`` wrote it under
TensorFlow 2.20.0 and tf_keras 2.20 (SavedModel with its serving signature, ``normalization.json``,
``weights.npz``, ``threshold.json``): ``landfall train`` on ``make_array(256, seed=20, shape=(8, 3))``, units 8,4,
3 epochs. ``expected.json`` holds the reconstruction errors that 2.20 gave for ``probe.npy``. A deployed
dataset's champion outlives a TensorFlow upgrade: the verdict scores it against every challenger, ``landfall
score`` serves it, and a follow-up job warm-starts from its weights."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from landfall.core.services.storage import Storage
from tests.trainer.helpers import make_array, run_trainer, write_dataset

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "champion-tf2.20"


def test_the_fixture_was_saved_by_the_previous_tensorflow():
    import tensorflow as tf

    expected = json.loads((FIXTURE / "expected.json").read_text())
    assert expected["tensorflow"] == "2.20.0"
    assert tuple(int(p) for p in tf.__version__.split(".")[:2]) >= (2, 20)


def test_a_champion_saved_under_2_20_scores_as_it_did():
    from landfall.core.scoring import Scorer, threshold_of

    expected = json.loads((FIXTURE / "expected.json").read_text())
    scorer = Scorer.load(Storage(), str(FIXTURE / "model"))
    errors = scorer.errors(np.load(FIXTURE / "probe.npy"))
    np.testing.assert_allclose(errors, expected["errors"], rtol=1e-4)
    assert threshold_of(scorer) > 0 and scorer.shape == (8, 3)


def test_a_job_warm_starts_from_a_champion_saved_under_2_20(tmp_path):
    storage = Storage()
    data = make_array(256, seed=22, shape=(8, 3))
    manifest = write_dataset(storage, str(tmp_path / "tfrecords" / "demo" / "a2"), data, shards=1)
    job_dir = tmp_path / "runs" / "job-warm"
    proc = run_trainer(["--manifest", manifest, "--job-dir", str(job_dir), "--epochs", "1", "--batch-size-per-worker",
                        "32", "--units", "8,4", "--timesteps", "8", "--features", "3", "--min-skill", "-1",
                        "--warm-start", str(FIXTURE / "model"), "--verbose", "0"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((job_dir / "metrics.json").read_text())
    assert metrics["warm_start_from"] == str(FIXTURE / "model")
    assert metrics["warm_start"]["mode"] != "none"
    # The weights it started from are the fixture's, array by array (the first epoch moved them only a little).
    saved = np.load(FIXTURE / "model" / "weights.npz")
    after = np.load(job_dir / "model" / "weights.npz")
    assert sorted(saved.files) == sorted(after.files)
    assert float(np.abs(saved["arr_0"] - after["arr_0"]).max()) < 0.5
    assert math.isfinite(metrics["epochs"][0]["val_loss"])
