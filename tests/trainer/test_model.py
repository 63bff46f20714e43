"""The seed's autoencoder: architecture, state wiring, cuDNN-compatible GRUs."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import tf_keras as keras

from trainer.training.model import build_model, gru_layers


@pytest.fixture(scope="module")
def seed_model():
    return build_model(36, 10)  # the seed's defaults: units 128, 32


def test_gru_layers_keep_the_cudnn_kernel_settings(seed_model):
    grus = gru_layers(seed_model)
    assert [g.units for g in grus] == [128, 32, 32, 128]
    for g in grus:
        assert g.activation is keras.activations.tanh
        assert g.recurrent_activation is keras.activations.sigmoid
        assert g.reset_after is True
        assert g.recurrent_dropout == 0
        assert g.unroll is False
        assert g.use_bias is True
        # tf_keras decides once, at construction, whether the layer may run the cuDNN kernel.
        assert g._could_use_gpu_kernel is True, g.name


def test_every_layer_but_the_last_is_followed_by_batchnorm_and_dropout(seed_model):
    names = [layer.name for layer in seed_model.layers]
    for prefix, count in (("encoder", 2), ("decoder", 2)):
        for i in range(count):
            gru = names.index(f"{prefix}_gru_{i}")
            assert names.index(f"{prefix}_bn_{i}") > gru
            assert names.index(f"{prefix}_dropout_{i}") > names.index(f"{prefix}_bn_{i}")
    last = seed_model.layers[-1]
    assert isinstance(last, keras.layers.TimeDistributed) and last.layer.units == 10
    assert seed_model.output_shape == (None, 36, 10)
    assert seed_model.loss == "mse"


def _inbound_layers(model, name):
    node = model.get_layer(name).inbound_nodes[0]
    return {layer.name for layer in node.inbound_layers} if isinstance(node.inbound_layers, list) else {
        node.inbound_layers.name}


def test_encoder_states_start_the_decoder_layer_wise(seed_model):
    # decoder_gru_0 (32 units) takes the repeated code and encoder_gru_1's (32-unit) final state;
    # decoder_gru_1 (128 units) takes encoder_gru_0's (128-unit) final state.
    assert "encoder_gru_1" in _inbound_layers(seed_model, "decoder_gru_0")
    assert "encoder_gru_0" in _inbound_layers(seed_model, "decoder_gru_1")
    assert "encoder_gru_0" not in _inbound_layers(seed_model, "decoder_gru_0")


def test_units_dropout_and_learning_rate_are_configurable():
    model = build_model(12, 3, units=(16, 8, 4), dropout=0.5, learning_rate=0.01)
    assert [g.units for g in gru_layers(model)] == [16, 8, 4, 4, 8, 16]
    assert {layer.rate for layer in model.layers if isinstance(layer, keras.layers.Dropout)} == {0.5}
    assert float(model.optimizer.learning_rate.numpy()) == pytest.approx(0.01)
    assert model.output_shape == (None, 12, 3)
