"""``conv``: a convolutional autoencoder. Conv1D layers (kernel ``KERNEL``, ReLU, the window's length kept) of the
widths before the last, the flattened feature maps to a linear code of the last width, then back: a Dense layer to the
first width at every step, a Conv1D of that width and a 1x1 Conv1D to the window's features. The convolutions see
local shapes across every channel at once, where the dense kind sees the window as one vector; TSB-AD-M's CNN
(a convolutional forecaster) leads its neural detectors (issue #55)."""

from __future__ import annotations

from typing import Any

NAME = "conv"
MODEL_NAME = "conv_autoencoder"
DESCRIPTION = "a convolutional autoencoder (Conv1D layers to a dense code and back)"
KERNEL = 7


def build(timesteps: int, features: int, units: list[int], dropout: float) -> Any:
    import tf_keras as keras

    widths, code = units[:-1], units[-1]
    inputs = keras.Input(shape=(timesteps, features), name="x")
    h = inputs
    for i, u in enumerate(widths):
        h = keras.layers.Conv1D(u, KERNEL, padding="same", activation="relu", name=f"encoder_conv_{i}")(h)
        if dropout:
            h = keras.layers.Dropout(dropout, name=f"encoder_dropout_{i}")(h)
    h = keras.layers.Flatten(name="flatten")(h)
    h = keras.layers.Dense(code, name="code")(h)
    first = widths[0] if widths else code
    h = keras.layers.Dense(timesteps * first, activation="relu", name="decoder_dense")(h)
    h = keras.layers.Reshape((timesteps, first), name="decoder_steps")(h)
    h = keras.layers.Conv1D(first, KERNEL, padding="same", activation="relu", name="decoder_conv")(h)
    outputs = keras.layers.Conv1D(features, 1, name="reconstruction")(h)
    return keras.Model(inputs, outputs, name=MODEL_NAME)


def units_of(model: Any) -> list[int]:
    widths = [layer.filters for layer in model.layers if layer.name.startswith("encoder_conv_")]
    return [*widths, model.get_layer("code").units]
