"""The model kinds a job can train, one module each: ``gru`` (the seed's recurrent autoencoder), ``dense`` (the same
widths over the flattened window), ``conv`` (a convolutional autoencoder) and ``forecast`` (the window's last quarter
predicted from the rest).

Every kind keeps one contract, so nothing downstream knows which it is: the model takes ``x`` (float32 ``[n, T, F]``,
normalised) and returns a tensor of the same shape, trained with MSE against ``x``, saved with the same serving
signature (``reconstruction``), scored by ``landfall.core.scoring`` as the MSE between the two. A forecaster fits it by
returning the window's context unchanged and its prediction in place of the forecast part: its error is the forecast
error (scaled by the horizon's share of the window).

**To add a kind**, write one module beside these with ``NAME`` (the module's own name), ``MODEL_NAME`` (the Keras
model's name, which tells a saved model's kind), ``DESCRIPTION``, ``build(timesteps, features, units, dropout) ->
keras.Model`` (uncompiled, every layer a built-in one so that a saved model reloads from its config) and
``units_of(model) -> list[int]`` (the widths it was built with, what a warm start compares); register it: its name in
``trainer.config.MODEL_KINDS`` (the one list, which ``KINDS`` below imports a module of each name from) and in the spec
schema's ``model.kind`` enum (``landfall/core/artifacts/dataset-v1.schema.json``: a contract, checked against ``KINDS``
by ``tests/trainer/test_model_kinds.py``). The trainer's flag, the config's check and the warm start read them.
Importing this package is light: each kind imports ``tf_keras`` when it builds (the config's check needs only the
names).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from trainer.config import MODEL_KINDS

KINDS: dict[str, ModuleType] = {name: importlib.import_module(f"{__name__}.{name}") for name in MODEL_KINDS}
GRU, DENSE = KINDS["gru"].NAME, KINDS["dense"].NAME


def build(kind: str, timesteps: int, features: int, units: Sequence[int], dropout: float) -> Any:
    """The uncompiled model of ``kind``; ``ValueError`` naming the kinds for an unknown one."""
    if kind not in KINDS:
        raise ValueError(f"model kind must be one of {', '.join(KINDS)}, not {kind!r}")
    return KINDS[kind].build(int(timesteps), int(features), [int(u) for u in units], float(dropout))


def kind_of(model: Any) -> str:
    """A built or reloaded model's kind, from its name (a model named by none of them is the seed's GRU)."""
    for name, module in KINDS.items():
        if model.name == module.MODEL_NAME:
            return name
    return GRU


def encoder_units(model: Any) -> list[int]:
    """The widths the model was built with, whatever its kind."""
    return [int(u) for u in KINDS[kind_of(model)].units_of(model)]
