"""The detectors to beat (``trainer.judging.baselines``) on real data: Daphnet S06R02E0 (the Daphnet Freezing of Gait
recording as aeon 1.6.0 ships it, ``bench/data/README.md``), cut into stride-1 windows.

PCA and the nearest neighbour are checked against scikit-learn and a brute-force search; the verdict on a real
series records every baseline's held-out loss and the model's skill over each, names the baselines that beat a
promoted model, and refuses a model that a gated baseline beats, saying which and why."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np
import pytest

from landfall.core.artifacts import champion
from landfall.core.rules import holdout
from landfall.core.services.storage import Storage
from landfall_bench.realdata import daphnet, sliding_windows
from tests.trainer.helpers import write_dataset
from trainer.config import SKILL_OVER, TrainerConfig
from trainer.jobdir import MODEL, JobDir
from trainer.judging import baselines
from trainer.judging.baselines import nearest_neighbour
from trainer.task import Metrics
from trainer.training import inputs as inputs_mod

LENGTH = 16
SHAPE = (LENGTH, 9)
UNITS = (16, 4)


def _windows(rows: slice = slice(0, 2400)) -> np.ndarray:
    _, values, _ = daphnet()
    return sliding_windows(values[rows], LENGTH).astype("<f4")


def test_pca_is_scikit_learns_and_the_nearest_neighbour_is_the_brute_force_one():
    from sklearn.decomposition import PCA

    x = _windows().astype(np.float64)
    train, held = x[:1800], x[1900:]
    mean, std = train.reshape(-1, 9).mean(0), train.reshape(-1, 9).std(0)
    panel = baselines.Panel.fit([train[:700], train[700:]], len(train), mean, std, SHAPE, code_size=6)
    got = panel.errors(held)
    z = lambda a: ((a - mean) / std).reshape(len(a), -1)  # noqa: E731
    ref = PCA(n_components=6).fit(z(train))
    back = (ref.inverse_transform(ref.transform(z(held))).reshape(held.shape) * std + mean)
    # The error in each channel's training standard deviations (every Daphnet channel varies: the scale is std).
    np.testing.assert_allclose(panel.scale, std)
    mse = lambda a, b: (((a - b) / std) ** 2).mean(axis=(1, 2))  # noqa: E731
    np.testing.assert_allclose(got[baselines.PCA], mse(held, back), rtol=1e-6)
    d = ((z(held)[:, None, :] - z(train)[None, :, :]) ** 2).sum(-1)
    nearest = train[d.argmin(axis=1)]
    np.testing.assert_allclose(got[baselines.NEAREST], mse(held, nearest), rtol=1e-9)
    np.testing.assert_allclose(got[baselines.MEAN_WINDOW], mse(held, train.mean(0)), rtol=1e-9)
    # Every component kept: a lossless linear map; a training window is its own nearest neighbour.
    full = baselines.Panel.fit([train], len(train), mean, std, SHAPE, code_size=LENGTH * 9)
    assert full.errors(held)[baselines.PCA].max() < 1e-6
    assert full.errors(train[:50])[baselines.NEAREST].max() < 1e-20  # itself, back through the scaling


def test_the_samples_are_bounded_whatever_the_training_share(monkeypatch):
    monkeypatch.setattr(baselines, "FIT_SAMPLE", 500)
    monkeypatch.setattr(nearest_neighbour, "SAMPLE", 100)
    x = _windows(slice(0, 7040))
    panel = baselines.Panel.fit([x[k:k + 999] for k in range(0, len(x), 999)], len(x), None, None, SHAPE, 4)
    assert panel.mean_window.count == len(x)  # the mean window sees every window
    assert panel.fitted_on <= 500 and len(panel.kinds[baselines.NEAREST].sample) <= 100
    assert panel.describe()[baselines.PCA]["components"] == 4


@pytest.fixture(scope="module")
def daphnet_job(tmp_path_factory):
    """Daphnet windows as one arrival, the segment hold-out, and a GRU trained for a few epochs only: PCA with the
    same code size (4) reconstructs the held-out windows better."""
    import tf_keras as keras

    from trainer.training.model import build_model

    root = tmp_path_factory.mktemp("baselines")
    storage = Storage()
    x = _windows()
    manifest = write_dataset(storage, str(root / "tfrecords" / "gait" / "a1"), x, shards=2, arrival_id="a1")
    cfg = TrainerConfig(manifests=(manifest,), job_dir=str(root / "runs" / "job-x"), timesteps=LENGTH, features=9,
                        units=UNITS, batch_size_per_worker=64, validation_fraction=0.1, holdout=holdout.SEGMENT,
                        dropout=0.0, results_topic="", min_skill=-10.0, select="loss")  # the loss gates
    inputs = inputs_mod.load_manifests(storage, cfg.manifests, cfg.shape)
    plan = inputs_mod.plan_inputs(inputs, 1, 0, 64, cfg.validation_fraction, cfg.seed, cfg.holdout)
    paths = [str(p) for p in inputs_mod.stage(storage, plan, root / "shards")]
    mean, std = inputs.feature_stats()
    keras.utils.set_random_seed(3)
    model = build_model(*SHAPE, UNITS, 0.0, 1e-2)
    z = ((x - np.array(mean)) / np.array(std)).astype(np.float32)
    model.fit(z, z, epochs=1, batch_size=64, verbose=0)
    saved = root / "saved"
    import tensorflow as tf

    spec = tf.TensorSpec([None, *SHAPE], tf.float32, name="x")
    serve = tf.function(lambda v: {"reconstruction": model(v, training=False)}, input_signature=[spec])
    model.save(str(saved), include_optimizer=False, save_traces=False, signatures={"serving_default": serve})
    (saved / "normalization.json").write_text(json.dumps(
        {"shape": list(SHAPE), "dtype": "float32", "normalized": True, "mean": mean, "std": std}))
    return {"root": root, "storage": storage, "cfg": cfg, "inputs": inputs, "plan": plan, "paths": paths,
            "mean": mean, "std": std, "saved": saved}


def _conclude(s, name: str, **overrides):
    from trainer.judging import verdict

    cfg = dataclasses.replace(s["cfg"], job_dir=str(s["root"] / "runs" / name), models=str(s["root"] / name / "m"),
                              **overrides)
    job = JobDir(s["storage"], cfg.job_dir)
    shutil.copytree(s["saved"], job.path(MODEL))
    metrics = Metrics(job, {"job": name, "dataset": "gait"}, enabled=True)
    return verdict.conclude(cfg, job, metrics, job.path(MODEL), s["plan"], s["paths"], s["inputs"], s["mean"],
                            s["std"], s["storage"])


def test_a_model_that_pca_beats_is_refused_under_the_gate_and_named_as_beaten_without_it(daphnet_job):
    s = daphnet_job
    refused = _conclude(s, "gated", min_skill_over="pca=0")
    compared = refused["baselines"]
    assert set(compared) == set(baselines.NAMES)
    # Each reconstruction's held-out loss; a scoring detector's mean score instead, with no skill over it (its scores
    # are no reconstruction loss to compare the model's with).
    reconstructs = [n for n in baselines.NAMES if n == baselines.MEAN_WINDOW or not baselines.scores(
        baselines.KINDS[n]())]
    assert set(baselines.NAMES) - set(reconstructs) == {"pca_rows", "kmeans_znorm"}
    assert all(compared[n]["loss"] > 0 for n in reconstructs)
    for n in set(baselines.NAMES) - set(reconstructs):
        assert compared[n]["loss"] is None and compared[n]["skill"] is None and compared[n]["mean_score"] >= 0
    assert compared[baselines.PCA]["components"] == UNITS[-1]
    # The same held-out windows and metric: the model's loss is each baseline's x (1 - skill).
    for name in reconstructs:
        assert refused["challenger_loss"] == pytest.approx(compared[name]["loss"] * (1 - compared[name]["skill"]))
    assert compared[baselines.PCA]["skill"] < 0 and "pca" in refused["beaten_by"]
    assert refused["verdict"] == "no_skill" and refused["min_skill_over"] == {"pca": 0.0}
    why = refused["evaluation"]["reason"]
    assert why.startswith("skill -") and "over the pca baseline" in why and "min_skill_over pca=0" in why
    assert champion.read(s["storage"], str(s["root"] / "gated" / "m"), "gait")[0] is None  # nothing promoted
    # Without the gate the same model is promoted, and named as one that PCA beats.
    promoted = _conclude(s, "open", min_skill_over="none")
    assert promoted["verdict"] == "promoted" and "pca" in promoted["beaten_by"]
    assert {n: promoted["baselines"][n]["loss"] for n in baselines.NAMES} == pytest.approx(
        {n: compared[n]["loss"] for n in baselines.NAMES})  # deterministic: the same samples, the same windows


def test_the_gate_names_are_checked():
    with pytest.raises(ValueError, match="not NAME=MARGIN"):
        TrainerConfig(min_skill_over="knn=0")
    with pytest.raises(ValueError, match="must be <= 1"):
        TrainerConfig(min_skill_over="pca=2")
    assert TrainerConfig(min_skill_over="pca=0,nearest_neighbour=-0.1").skill_margins() == {
        "pca": 0.0, "nearest_neighbour": -0.1}
    assert SKILL_OVER == (baselines.PCA, baselines.NEAREST)  # the config parses the flag without the detectors


def test_every_channel_counts_in_its_own_spread_so_a_quiet_channels_anomaly_shows():
    """Issue #55's cause of the PCA gap, on real gait windows: in original units the error is the loud channels'
    (Daphnet's stds span 90 to 718), so a level shift of 8 stds in the quietest channel ranks among clean windows;
    with the error in each channel's own spread (``error_scale``, what the verdict and the scorer measure in now) every
    detector ranks the shifted windows higher, and the nearest neighbour above nearly every clean one."""
    x = _windows(slice(0, 4000)).astype(np.float64)
    train, held = x[:2400], x[2600:3000]
    flat = train.reshape(-1, 9)
    mean, std = flat.mean(0), flat.std(0)
    quiet = int(std.argmin())
    assert std.max() / std[quiet] > 4  # channels of different spreads
    shifted = held.copy()
    shifted[:, LENGTH // 2:, quiet] += 8 * std[quiet]
    both = np.concatenate([held, shifted])
    labels = np.r_[np.zeros(len(held)), np.ones(len(shifted))]
    from sklearn.metrics import average_precision_score

    standardised = baselines.Panel.fit([train], len(train), mean, std, SHAPE, code_size=6)
    original = baselines.Panel.fit([train], len(train), mean, std, SHAPE, code_size=6, scale=np.ones(9))
    np.testing.assert_allclose(standardised.scale, std)
    good = {n: average_precision_score(labels, e) for n, e in standardised.errors(both).items()}
    bad = {n: average_precision_score(labels, e) for n, e in original.errors(both).items()}
    for name in (baselines.MEAN_WINDOW, baselines.PCA, baselines.NEAREST):  # measured: +0.18, +0.30, +0.30
        assert good[name] > bad[name] + 0.15, (name, good, bad)
    assert good[baselines.NEAREST] > 0.95  # measured 0.991 (0.69 in original units)
