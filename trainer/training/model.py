"""The model a job trains: one of ``trainer.training.model_kinds`` (the seed's recurrent autoencoder by default),
compiled (tf_keras: Keras 3 has no MultiWorkerMirroredStrategy).
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from collections.abc import Sequence

import tf_keras as keras

from trainer.training import model_kinds
from trainer.training.model_kinds import gru

CUDNN_GRU = gru.CUDNN_GRU
GRU, DENSE = model_kinds.GRU, model_kinds.DENSE
KINDS = tuple(model_kinds.KINDS)


def build_model(timesteps: int, features: int, units: Sequence[int] = (128, 32), dropout: float = 0.2,
                learning_rate: float = 1e-3, kind: str = GRU, steps_per_execution: int = 1) -> keras.Model:
    """Builds and compiles a model of ``kind`` (call inside ``strategy.scope()``; ``trainer.training.model_kinds``:
    ``gru``, the seed's, ``dense``, ``conv``, ``forecast``)."""
    return compiled(model_kinds.build(kind, timesteps, features, units, dropout), learning_rate, steps_per_execution)


def compiled(model: keras.Model, learning_rate: float, steps_per_execution: int = 1) -> keras.Model:
    """Every kind compiled alike: Adam, MSE, ``steps_per_execution`` steps per call into TensorFlow."""
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=learning_rate), loss="mse",
                  steps_per_execution=steps_per_execution)
    return model


def encoder_units(model: keras.Model) -> list[int]:
    """The encoder's widths (the model's ``units``), whatever its kind."""
    return model_kinds.encoder_units(model)


def kind_of(model: keras.Model) -> str:
    return model_kinds.kind_of(model)


def gru_layers(model: keras.Model) -> list:
    return gru.layers(model)
