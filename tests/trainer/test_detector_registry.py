"""A detector is one module plus its registration (``trainer.judging.baselines``' docstring): the plug-in
``tests.trainer.plugin_detector``, registered by this test and named nowhere else, is fitted by the verdict on a real
multivariate sensor recording (Daphnet S06R02E0: 9 accelerometer channels at 64 Hz, ``landfall_bench.realdata``),
scored on the surrogate set, chosen, saved as a servable detector, promoted, and served by ``Scorer.load`` (what the
scorer service, ``landfall score`` and ``landfall rescore`` use) to score the rest of the recording as an arrival."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from landfall.core.artifacts import champion
from landfall.core.scoring import Scorer
from landfall.core.services.storage import Storage
from tests.trainer import plugin_detector, plugin_row_detector
from tests.trainer.helpers import REPO, write_dataset
from trainer.config import TrainerConfig
from trainer.jobdir import MODEL, JobDir
from trainer.judging import baselines, detectors, selection
from trainer.task import Metrics
from trainer.training import inputs as inputs_mod

T = 16
UNITS = (8, 4)
TRAIN_ROWS = 1500


def windows(values: np.ndarray) -> np.ndarray:
    return np.lib.stride_tricks.sliding_window_view(values, T, axis=0).transpose(0, 2, 1).copy()


@pytest.fixture(params=[plugin_detector, plugin_row_detector], ids=["reconstructs", "scores_rows"])
def only_the_plugin(monkeypatch, request):
    """The registry with one plug-in as its one detector (beside the mean window every job has), restored after: one
    that reconstructs windows, one that scores single rows (``trainer.judging.baselines.rowwise``)."""
    monkeypatch.setattr(baselines, "KINDS", {})
    monkeypatch.setattr(baselines, "NAMES", [baselines.MEAN_WINDOW])
    monkeypatch.setattr(baselines, "DESCRIPTIONS", {baselines.MEAN_WINDOW: baselines.DESCRIPTIONS[
        baselines.MEAN_WINDOW]})
    baselines.register(request.param.Detector)
    return request.param.Detector.name


def test_a_detector_added_as_one_module_is_fitted_chosen_served_and_rescores(only_the_plugin, tmp_path):
    import tf_keras as keras

    from landfall_bench.realdata import daphnet
    from trainer.judging import verdict
    from trainer.training.model import build_model

    name = only_the_plugin
    _, values, _ = daphnet()
    x = windows(values[:TRAIN_ROWS])
    storage = Storage()
    manifest = write_dataset(storage, str(tmp_path / "tfrecords" / "gait" / "a1"), x, shards=2, dataset="gait")
    cfg = TrainerConfig(manifests=(manifest,), job_dir=str(tmp_path / "runs" / "job-1"), timesteps=T,
                        features=values.shape[1], units=UNITS, batch_size_per_worker=64, validation_fraction=0.25,
                        dropout=0.0, results_topic="", select="detection", models=str(tmp_path / "models"))
    inputs = inputs_mod.load_manifests(storage, cfg.manifests, cfg.shape)
    plan = inputs_mod.plan_inputs(inputs, 1, 0, 64, cfg.validation_fraction, cfg.seed)
    paths = [str(p) for p in inputs_mod.stage(storage, plan, tmp_path / "shards")]
    mean, std = inputs.feature_stats()
    keras.utils.set_random_seed(1)
    untrained = build_model(T, values.shape[1], UNITS, 0.0, 1e-2)  # a model that learned nothing: the plug-in wins
    job = JobDir(storage, cfg.job_dir)
    local = Path(job.path(MODEL))
    import tensorflow as tf

    spec = tf.TensorSpec([None, T, values.shape[1]], tf.float32, name="x")
    serve = tf.function(lambda b: {"reconstruction": untrained(b, training=False)}, input_signature=[spec])
    untrained.save(str(local), include_optimizer=False, save_traces=False, signatures={"serving_default": serve})
    (local / "normalization.json").write_text(json.dumps({"shape": [T, values.shape[1]], "dtype": "float32",
                                                          "normalized": True, "mean": mean, "std": std}))
    fields = verdict.conclude(cfg, job, Metrics(job, {"job": "job-1", "dataset": "gait"}, enabled=True), untrained,
                              plan, paths, inputs, mean, std, storage)
    det = fields["detection"]
    # Fitted and scored like every candidate, described in metrics.json by its own describe().
    assert set(det["candidates"]) == {selection.MODEL, baselines.MEAN_WINDOW, name}
    kind = baselines.KINDS[name]
    assert fields["baselines"][name]["description"] == kind.description
    held = fields["baselines"][name]["mean_score" if baselines.scores(kind()) else "loss"]
    assert fields["baselines"][name]["training_instances"] > 0 and held > 0
    # Chosen, saved as a servable detector, promoted as the dataset's first champion.
    assert det["chosen"] == det["order"][0] == name, det["why"]
    assert fields["verdict"] == "promoted" and fields["champion"] == job.path(detectors.folder(name))
    current, _ = champion.read(storage, cfg.models, "gait")
    assert current.model == fields["champion"] and current.evaluation["detector"] == name
    # Served as on arrival: the rest of the recording's windows scored by the champion's SavedModel, with the
    # threshold the verdict set from its held-out errors; windows like the training ones score low, and some of the
    # new ones (the recording moves on to other activity) above the threshold.
    served = Scorer.load(storage, current.model)
    arrival = windows(values[TRAIN_ROWS:TRAIN_ROWS + 800])
    errors = served.errors(arrival)
    assert served.threshold["value"] == det["threshold"] > 0 and np.isfinite(errors).all()
    assert np.median(served.errors(x[:200])) < served.threshold["value"]
    # The SavedModel computes what the plug-in's numpy reconstruction does (the same sample, through the same save).
    panel = baselines.Panel.fit([x], len(x), mean, std, (T, values.shape[1]), UNITS[-1])
    again = Scorer.load(storage, str(detectors.save(panel, name, tmp_path / "saved" / name)))
    np.testing.assert_allclose(again.errors(arrival), panel.errors(arrival)[name], rtol=5e-3, atol=1e-5)
    if not baselines.scores(kind()):
        return
    # A row scorer is served as one: its rows located by their own scores (its unit), each row scored once (alone),
    # against the row threshold its verdict set; the same scores as every stride-1 window gives them.
    from landfall.core.rules.series_windows import MEAN, ROW, served_stride
    from landfall.detect.located import Locator

    # each row scored once: a window's stride, for this champion only (one that reconstructs keeps the dataset's)
    assert served_stride(served.combine(MEAN), served.alone, T, 1) == T
    assert served_stride(MEAN, served.alone, T, 1) == 1 == served_stride(ROW, False, T, 1)

    assert served.unit == ROW and served.alone and served.combine("mean") == ROW and served.threshold[ROW]["value"] > 0
    rows = values[TRAIN_ROWS:TRAIN_ROWS + 800]
    located = {}
    for stride in (1, T):
        loc = Locator(T, stride, served.threshold[ROW]["value"], served.row_errors, combine=ROW)
        located[stride] = np.concatenate([b.scores for b in [*loc.feed(np.arange(len(rows), dtype=float), rows),
                                                              *loc.finish()]])
    np.testing.assert_allclose(located[T], located[1], rtol=1e-6)
    np.testing.assert_allclose(located[T], panel.kinds[name].score_rows(rows.astype(np.float64)), rtol=5e-3,
                               atol=1e-4)


def test_pca_variance_keeps_95_percent_at_most_its_cap_and_serves_as_fitted(monkeypatch, tmp_path):
    """``trainer.judging.baselines.pca_variance`` (registered by default): as many components as explain 95 % of the
    variance, at most ``CAP``, served as its numpy reconstruction."""
    from landfall_bench.realdata import daphnet
    from trainer.judging.baselines import pca_variance

    assert pca_variance.NAME in baselines.NAMES and pca_variance.NAME in selection.candidates()
    _, values, _ = daphnet()
    x = windows(values[:TRAIN_ROWS])
    flat = x.reshape(-1, values.shape[1]).astype(np.float64)
    panel = baselines.Panel.fit([x], len(x), flat.mean(0), flat.std(0), (T, values.shape[1]), UNITS[-1])
    fitted = panel.kinds[pca_variance.NAME]
    z = panel.standardise(x)
    centred = z - z.mean(0)
    spectrum = np.sort(np.linalg.eigvalsh(centred.T @ centred / (len(z) - 1)))[::-1]
    share = np.cumsum(spectrum) / spectrum.sum()
    k = len(fitted.components)
    assert share[k - 1] >= 0.95 > share[k - 2] and k != UNITS[-1]
    served = Scorer.load(Storage(), str(detectors.save(panel, pca_variance.NAME, tmp_path / "pv")))
    arrival = windows(values[TRAIN_ROWS:TRAIN_ROWS + 400])
    np.testing.assert_allclose(served.errors(arrival), panel.errors(arrival)[pca_variance.NAME], rtol=5e-3, atol=1e-5)
    monkeypatch.setattr(pca_variance, "CAP", k - 3)  # the cap binds: fewer components than the variance asks for
    capped = baselines.Panel.fit([x], len(x), flat.mean(0), flat.std(0), (T, values.shape[1]), UNITS[-1])
    assert len(capped.kinds[pca_variance.NAME].components) == k - 3


def test_a_plugin_is_loaded_by_name_from_the_environment():
    """``LANDFALL_DETECTORS`` (what a deployment sets to ship its own detector): the module is imported and registered
    when the trainer's registry loads, so `python -m trainer.task` fits it like the built-in ones."""
    code = ("from trainer.judging import baselines, selection; print(baselines.NAMES, selection.candidates()[-2:])")
    env = {**os.environ, "LANDFALL_DETECTORS": "tests.trainer.plugin_detector", "TF_CPP_MIN_LOG_LEVEL": "2"}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert "'knn_mean'" in out.stdout and "('knn_mean', 'model')" in out.stdout, out.stdout + out.stderr


def test_mcd_is_the_pca_residual_plus_the_robust_distance_and_serves_as_fitted(monkeypatch, tmp_path):
    """``trainer.judging.baselines.mcd`` (opt-in: ``LANDFALL_DETECTORS=trainer.judging.baselines.mcd``), registered
    here: on Daphnet a window's error is its PCA residual plus the squared Mahalanobis distance of its code that
    scikit-learn's own ``MinCovDet`` gives (refitted on the same sample with the same seed), and the served SavedModel
    scores as fitted. Windows with an outlying code score above the clean ones although the subspace reconstructs
    them."""
    from sklearn.covariance import MinCovDet

    from landfall_bench.realdata import daphnet
    from trainer.judging.baselines import mcd

    assert mcd.NAME not in baselines.NAMES  # not a default candidate (docs/benchmarks.md: it lowers the choice)
    monkeypatch.setattr(baselines, "KINDS", dict(baselines.KINDS))
    monkeypatch.setattr(baselines, "NAMES", list(baselines.NAMES))
    monkeypatch.setattr(baselines, "DESCRIPTIONS", dict(baselines.DESCRIPTIONS))
    baselines.register(mcd.Detector)
    _, values, _ = daphnet()
    x = windows(values[:TRAIN_ROWS])
    flat = x.reshape(-1, values.shape[1]).astype(np.float64)
    panel = baselines.Panel.fit([x], len(x), flat.mean(0), flat.std(0), (T, values.shape[1]), UNITS[-1])
    fitted = panel.kinds[mcd.NAME]
    arrival = windows(values[TRAIN_ROWS:TRAIN_ROWS + 400])
    z, z_fit = panel.standardise(arrival), panel.standardise(x)
    code = (z - fitted.centre) @ fitted.components.T
    residual = ((z - fitted.centre - code @ fitted.components) ** 2).sum(axis=1)
    every = max(1, -(-len(z_fit) // mcd.SAMPLE))
    library = MinCovDet(random_state=mcd.SEED).fit(((z_fit - fitted.centre) @ fitted.components.T)[::every])
    np.testing.assert_allclose(((z - fitted.reconstruct(z)) ** 2).sum(axis=1), residual + library.mahalanobis(code),
                               rtol=1e-6)
    served = Scorer.load(Storage(), str(detectors.save(panel, mcd.NAME, tmp_path / "mcd")))
    np.testing.assert_allclose(served.errors(arrival), panel.errors(arrival)[mcd.NAME], rtol=5e-3, atol=1e-5)
    # A code far out along the least-spread robust direction, inside the subspace: PCA reconstructs it exactly,
    # the MCD's distance does not forgive it.
    values_, vectors = np.linalg.eigh(library.covariance_)
    along = ((z_fit[:50] - fitted.centre) @ fitted.components.T - library.location_) @ vectors[:, 0]
    away = np.where(along < 0, -1.0, 1.0)[:, None]  # further from the MCD's location, on the side each one is
    outlier = z_fit[:50] + away * 6.0 * np.sqrt(values_[0]) * (vectors[:, 0] @ fitted.components)
    pca_only = ((outlier - fitted.centre) @ fitted.components.T) @ fitted.components + fitted.centre
    assert np.allclose(((outlier - pca_only) ** 2).sum(1), ((z_fit[:50] - fitted.centre - (
        (z_fit[:50] - fitted.centre) @ fitted.components.T) @ fitted.components) ** 2).sum(1))
    one = mcd.Detector().fit(z_fit[:1], panel.space)  # a dataset of one window: no spread, still a detector
    assert np.isfinite(one.reconstruct(z_fit[:3])).all() and one.describe()["training_instances"] == 1
    assert (((outlier - fitted.reconstruct(outlier)) ** 2).sum(1) > ((z_fit[:50] - fitted.reconstruct(z_fit[:50])) ** 2
                                                                       ).sum(1)).all()
