"""``dense``: a non-recurrent autoencoder over the flattened ``timesteps x features`` window (issue #38, part 4):
Dense layers of ``units`` (ReLU), the last of them the linear code, mirrored back to the window. With every
activation linear it is PCA at the code size; the ReLU layers let it do better than that linear map."""

from __future__ import annotations

from typing import Any

NAME = "dense"
MODEL_NAME = "dense_autoencoder"
DESCRIPTION = "fully connected layers of the same widths over the flattened window"


def build(timesteps: int, features: int, units: list[int], dropout: float) -> Any:
    import tf_keras as keras

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
    return keras.Model(inputs, outputs, name=MODEL_NAME)


def units_of(model: Any) -> list[int]:
    return [layer.units for layer in model.layers if layer.name.startswith("encoder_dense_")]
