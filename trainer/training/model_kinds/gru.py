"""``gru``: the seed's recurrent autoencoder.

Encoder: GRU(128) -> GRU(32); decoder: GRU(32) -> GRU(128) -> TimeDistributed(Dense(F)). Every layer
but the final dense one is followed by BatchNormalization and Dropout. The encoder layers' final
states start the decoder layers of the same width (32 -> 32, 128 -> 128): "merged layer-wise".
The GRUs keep cuDNN-compatible settings (tanh, sigmoid recurrent activation, ``reset_after=True``,
no recurrent dropout, no unroll, with bias), so on a GPU TensorFlow runs them with the cuDNN kernel.
"""

from __future__ import annotations

from typing import Any

NAME = "gru"
MODEL_NAME = "recurrent_autoencoder"
DESCRIPTION = "the seed's recurrent autoencoder (GRU encoder and decoder, merged layer-wise)"
CUDNN_GRU = dict(activation="tanh", recurrent_activation="sigmoid", reset_after=True,
                 recurrent_dropout=0.0, unroll=False, use_bias=True)


def build(timesteps: int, features: int, units: list[int], dropout: float) -> Any:
    import tf_keras as keras

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
    return keras.Model(inputs, outputs, name=MODEL_NAME)


def layers(model: Any) -> list:
    """The model's GRU layers, encoder then decoder."""
    import tf_keras as keras

    return [layer for layer in model.layers if isinstance(layer, keras.layers.GRU)]


def units_of(model: Any) -> list[int]:
    grus = layers(model)
    return [g.units for g in grus[: len(grus) // 2]]
