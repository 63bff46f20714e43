"""The seed's recurrent autoencoder (tf_keras: Keras 3 has no MultiWorkerMirroredStrategy).

Encoder: GRU(128) -> GRU(32); decoder: GRU(32) -> GRU(128) -> TimeDistributed(Dense(F)). Every layer
but the final dense one is followed by BatchNormalization and Dropout. The encoder layers' final
states start the decoder layers of the same width (32 -> 32, 128 -> 128): "merged layer-wise".
The GRUs keep cuDNN-compatible settings (tanh, sigmoid recurrent activation, ``reset_after=True``,
no recurrent dropout, no unroll, with bias), so on a GPU TensorFlow runs them with the cuDNN kernel.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from collections.abc import Sequence

import tf_keras as keras

CUDNN_GRU = dict(activation="tanh", recurrent_activation="sigmoid", reset_after=True,
                 recurrent_dropout=0.0, unroll=False, use_bias=True)


GRU, DENSE = "gru", "dense"
KINDS = (GRU, DENSE)


def build_model(timesteps: int, features: int, units: Sequence[int] = (128, 32), dropout: float = 0.2,
                learning_rate: float = 1e-3, kind: str = GRU, steps_per_execution: int = 1) -> keras.Model:
    """Builds and compiles the autoencoder (call inside ``strategy.scope()``): ``gru``, the seed's; ``dense``, the
    same widths as fully connected layers over the flattened window (``build_dense``)."""
    if kind == DENSE:
        return build_dense(timesteps, features, units, dropout, learning_rate, steps_per_execution)
    if kind != GRU:
        raise ValueError(f"model kind must be one of {', '.join(KINDS)}, not {kind!r}")
    units = [int(u) for u in units]
    inputs = keras.Input(shape=(timesteps, features), name="x")
    h = inputs
    states = []
    for i, u in enumerate(units):
        last = i == len(units) - 1
        h, state = keras.layers.GRU(u, return_sequences=not last, return_state=True,
                                    name=f"encoder_gru_{i}", **CUDNN_GRU)(h)
        states.append(state)
        h = keras.layers.BatchNormalization(name=f"encoder_bn_{i}")(h)
        h = keras.layers.Dropout(dropout, name=f"encoder_dropout_{i}")(h)
    h = keras.layers.RepeatVector(timesteps, name="repeat")(h)
    for j, (u, state) in enumerate(zip(reversed(units), reversed(states), strict=True)):
        h = keras.layers.GRU(u, return_sequences=True, name=f"decoder_gru_{j}", **CUDNN_GRU)(
            h, initial_state=state
        )
        h = keras.layers.BatchNormalization(name=f"decoder_bn_{j}")(h)
        h = keras.layers.Dropout(dropout, name=f"decoder_dropout_{j}")(h)
    outputs = keras.layers.TimeDistributed(keras.layers.Dense(features), name="reconstruction")(h)
    model = keras.Model(inputs, outputs, name="recurrent_autoencoder")
    return compiled(model, learning_rate, steps_per_execution)


def build_dense(timesteps: int, features: int, units: Sequence[int] = (128, 32), dropout: float = 0.0,
                learning_rate: float = 1e-3, steps_per_execution: int = 1) -> keras.Model:
    """A non-recurrent autoencoder over the flattened ``timesteps x features`` window (issue #38, part 4): Dense
    layers of ``units`` (ReLU), the last of them the linear code, mirrored back to the window. With every activation
    linear it is PCA at the code size; the ReLU layers let it do better than that linear map. Same input and output,
    the same serving signature, the same training loop, distribution, warm start and scoring as the GRU model."""
    units = [int(u) for u in units]
    inputs = keras.Input(shape=(timesteps, features), name="x")
    h = keras.layers.Flatten(name="flatten")(inputs)
    for i, u in enumerate(units):
        last = i == len(units) - 1
        h = keras.layers.Dense(u, activation=None if last else "relu", name=f"encoder_dense_{i}")(h)
        if dropout and not last:
            h = keras.layers.Dropout(dropout, name=f"encoder_dropout_{i}")(h)
    for j, u in enumerate(list(reversed(units))[1:]):
        h = keras.layers.Dense(u, activation="relu", name=f"decoder_dense_{j}")(h)
    h = keras.layers.Dense(timesteps * features, name="decoder_out")(h)
    outputs = keras.layers.Reshape((timesteps, features), name="reconstruction")(h)
    model = keras.Model(inputs, outputs, name="dense_autoencoder")
    return compiled(model, learning_rate, steps_per_execution)


def compiled(model: keras.Model, learning_rate: float, steps_per_execution: int = 1) -> keras.Model:
    """Either kind compiled alike: Adam, MSE, ``steps_per_execution`` steps per call into TensorFlow."""
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=learning_rate), loss="mse",
                  steps_per_execution=steps_per_execution)
    return model


def encoder_units(model: keras.Model) -> list[int]:
    """The encoder's widths (the model's ``units``), whatever its kind."""
    grus = gru_layers(model)
    if grus:
        return [g.units for g in grus[: len(grus) // 2]]
    return [layer.units for layer in model.layers if layer.name.startswith("encoder_dense_")]


def kind_of(model: keras.Model) -> str:
    return GRU if gru_layers(model) else DENSE


def gru_layers(model: keras.Model) -> list:
    return [layer for layer in model.layers if isinstance(layer, keras.layers.GRU)]
