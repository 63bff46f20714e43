"""``forecast``: the window's last ``horizon(T)`` steps predicted from the steps before them, the prediction error the
score, as TSB-AD-M's two best neural detectors (CNN and LSTMAD) score (issue #55). Conv1D layers (kernel
``KERNEL``, ReLU) of the widths before the last over the context, flattened, a Dense layer of the last width (ReLU),
and a linear Dense layer to the forecast.

It keeps the serving contract: the model's output is the input's context unchanged followed by the forecast, so the
reconstruction error is the forecast's MSE times ``horizon / T``, and training with MSE against the window trains the
forecast alone. The horizon is a quarter of the window: at the default stride (a quarter of the window) every row of
an arrival is forecast by one window, where a one-step forecast would leave three of four rows to be scored only as
context.
"""

from __future__ import annotations

from typing import Any

NAME = "forecast"
MODEL_NAME = "forecaster"
DESCRIPTION = "a convolutional forecaster of the window's last quarter (its error the score)"
KERNEL = 7


def horizon(timesteps: int) -> int:
    """Steps forecast: a quarter of the window, at least 1."""
    return max(1, timesteps // 4)


def build(timesteps: int, features: int, units: list[int], dropout: float) -> Any:
    import tf_keras as keras

    if timesteps < 2:
        raise ValueError(f"a forecaster needs windows of 2 steps or more, not {timesteps}")
    h_steps = horizon(timesteps)
    inputs = keras.Input(shape=(timesteps, features), name="x")
    context = keras.layers.Cropping1D((0, h_steps), name="context")(inputs)
    h = context
    for i, u in enumerate(units[:-1]):
        h = keras.layers.Conv1D(u, KERNEL, padding="same", activation="relu", name=f"encoder_conv_{i}")(h)
        if dropout:
            h = keras.layers.Dropout(dropout, name=f"encoder_dropout_{i}")(h)
    h = keras.layers.Flatten(name="flatten")(h)
    h = keras.layers.Dense(units[-1], activation="relu", name="code")(h)
    h = keras.layers.Dense(h_steps * features, name="forecast_out")(h)
    h = keras.layers.Reshape((h_steps, features), name="forecast")(h)
    outputs = keras.layers.Concatenate(axis=1, name="reconstruction")([context, h])
    return keras.Model(inputs, outputs, name=MODEL_NAME)


def units_of(model: Any) -> list[int]:
    widths = [layer.filters for layer in model.layers if layer.name.startswith("encoder_conv_")]
    return [*widths, model.get_layer("code").units]
