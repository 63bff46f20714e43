"""The model kinds (``trainer.training.model_kinds``): one module each, one contract (a window in, a window of the same
shape out), saved and served as the trainer saves and the scorer serves every model, rebuilt from its weights as a warm
start rebuilds it, and named in the spec schema's ``model.kind``."""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np
import pytest

from trainer.training import model_kinds
from trainer.training.model import build_model, encoder_units, kind_of
from trainer.training.model_kinds import forecast

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "functions" / "landfall" / "core" / "artifacts" / "dataset-v1.schema.json"


def test_the_spec_schema_names_every_kind_and_the_trainer_refuses_others():
    from trainer.config import MODEL_KINDS, TrainerConfig

    enum = json.loads(SCHEMA.read_text())["properties"]["model"]["properties"]["kind"]["enum"]
    assert enum == list(model_kinds.KINDS) == list(MODEL_KINDS) == ["gru", "dense", "conv", "forecast"]
    assert all(name == kind.NAME for name, kind in model_kinds.KINDS.items())  # each module named as its kind
    with pytest.raises(ValueError, match="model kind must be one of gru, dense, conv, forecast, got 'lstm'"):
        TrainerConfig(model_kind="lstm")
    with pytest.raises(ValueError, match="one of gru, dense, conv, forecast"):
        model_kinds.build("lstm", 8, 2, (4,), 0.0)


@pytest.mark.parametrize("kind", list(model_kinds.KINDS))
def test_a_kind_keeps_the_contract_saves_serves_and_rebuilds_from_its_weights(kind, tmp_path):
    import tensorflow as tf

    t, f, units = 20, 3, (8, 4)
    model = build_model(t, f, units, 0.0, 1e-3, kind=kind)
    x = np.random.default_rng(0).normal(size=(5, t, f)).astype(np.float32)
    out = np.asarray(model(x, training=False))
    assert out.shape == x.shape
    assert kind_of(model) == kind and encoder_units(model) == list(units)
    # Saved as trainer.train.save_model saves (built-in layers only: no traces), served by its signature.
    spec = tf.TensorSpec([None, t, f], tf.float32, name="x")
    serve = tf.function(lambda v: {"reconstruction": model(v, training=False)}, input_signature=[spec])
    model.save(str(tmp_path / "m"), include_optimizer=False, save_traces=False, signatures={"serving_default": serve})
    served = tf.saved_model.load(str(tmp_path / "m")).signatures["serving_default"]
    np.testing.assert_allclose(served(x=tf.constant(x))["reconstruction"].numpy(), out, rtol=1e-5, atol=1e-5)
    # A warm start: a fresh model of the same kind and widths takes the saved weights and computes the same.
    again = build_model(t, f, units, 0.0, 1e-3, kind=kind)
    again.set_weights(model.get_weights())
    np.testing.assert_allclose(np.asarray(again(x, training=False)), out, rtol=1e-5, atol=1e-5)


def test_a_forecaster_returns_its_context_unchanged_and_learns_the_rest():
    """Its error is the forecast's: the context comes back exactly, and a few epochs on a clean periodic signal bring
    the forecast's error far below what predicting the context's mean gives."""
    import tf_keras as keras

    t, f = 24, 2
    h = forecast.horizon(t)
    assert h == 6 and forecast.horizon(3) == 1
    steps = np.arange(4000)[:, None] * 0.3 + np.array([0.0, 1.0])[None, :]
    series = np.sin(steps).astype(np.float32)
    x = np.lib.stride_tricks.sliding_window_view(series, t, axis=0).transpose(0, 2, 1)[::2].copy()
    keras.utils.set_random_seed(0)
    model = build_model(t, f, (16, 8), 0.0, 1e-2, kind=forecast.NAME)
    before = np.asarray(model(x[:64], training=False))
    np.testing.assert_array_equal(before[:, : t - h], x[:64, : t - h])
    model.fit(x, x, epochs=5, batch_size=64, verbose=0)
    got = np.asarray(model(x[-200:], training=False))[:, t - h:]
    naive = np.repeat(x[-200:, : t - h].mean(axis=1, keepdims=True), h, axis=1)
    truth = x[-200:, t - h:]
    assert ((got - truth) ** 2).mean() < 0.1 * ((naive - truth) ** 2).mean()
    with pytest.raises(ValueError, match="2 steps or more"):
        build_model(1, 1, (4,), 0.0, 1e-3, kind=forecast.NAME)
