"""Typed configuration, one object per component, read once: defaults, then environment, then flags.

Environment variables are ``LANDFALL_<FIELD>`` in upper case (for example ``LANDFALL_SHARD_TARGET_BYTES``);
flags are passed as keyword overrides by the command line. A tuple field reads a comma-separated list,
or a JSON list when its items contain commas (``LANDFALL_TRAINER_ARGS='["--units", "16,8"]'``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import types
from collections.abc import Mapping
from typing import Any, Self, get_args, get_origin, get_type_hints

ENV_PREFIX = "LANDFALL_"
# The engines a job can run on (landfall.submit.engine); here so that a dataset spec (landfall.core.artifacts.specs) can
# be checked against them without importing the submit stage.
ENGINES = ("tfjob", "jobset", "vertex")
# Where a job's objects live (landfall.submit.backends: one module each, named so): a Kubernetes API server, a state
# folder that the local controllers run (landfall up, the tests), or Vertex AI's customJobs of a region.
BACKENDS = ("kubernetes", "local", "customjobs")
# The backends each engine's jobs can live in: a cluster's engines on a cluster (or the local state folder), Vertex AI's
# CustomJobs in a region's customJobs (Vertex AI itself, or its local stand-in, landfall.local.vertex_server).
ENGINE_BACKENDS = {"tfjob": ("kubernetes", "local"), "jobset": ("kubernetes", "local"), "vertex": ("customjobs",)}
# LANDFALL_DATASETS: open (any dataset, a spec optional) | registered (arrivals of datasets without a spec
# are rejected, reason unknown_dataset); read by the converter and the submit stage.
DATASET_MODES = ("open", "registered")


class Seed:
    """The seed article's model and training defaults: the one place JobConfig, the trainer and docs/trainer.md
    take them from (``tests/landfall/core/test_config.py`` checks docs/trainer.md agrees)."""

    TIMESTEPS = 36
    FEATURES = 10
    UNITS = (128, 32)  # encoder GRU units; the decoder mirrors them
    BATCH_SIZE_PER_WORKER = 1024
    EPOCHS = 10


def default_project() -> str:
    return os.environ.get("GOOGLE_CLOUD_PROJECT", "landfall-local")


def _coerce(value: str, hint: Any) -> Any:
    origin = get_origin(hint)
    if origin in (types.UnionType,) or str(origin) == "typing.Union":
        args = [a for a in get_args(hint) if a is not type(None)]
        if value == "":
            return None
        return _coerce(value, args[0])
    if hint is bool:
        if value.lower() in ("1", "true", "yes", "on"):
            return True
        if value.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"not a boolean: {value!r}")
    if hint is int:
        return int(value)
    if hint is float:
        return float(value)
    if origin is tuple:
        inner = get_args(hint)[0]
        if value.lstrip().startswith("["):  # a JSON list, for items that contain commas
            items = json.loads(value)
            if not isinstance(items, list):
                raise ValueError(f"not a JSON list: {value!r}")
            return tuple(_coerce(str(v), inner) for v in items)
        return tuple(_coerce(v.strip(), inner) for v in value.split(",") if v.strip())
    return value


class Settings:
    """Mixin for frozen dataclasses: ``load(env, **flags)`` applies the three layers in order."""

    @classmethod
    def load(cls, env: Mapping[str, str] | None = None, **flags: Any) -> Self:
        env = os.environ if env is None else env
        hints = get_type_hints(cls)
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):  # type: ignore[arg-type]
            key = ENV_PREFIX + field.name.upper()
            if key in env:
                try:
                    values[field.name] = _coerce(env[key], hints[field.name])
                except ValueError as exc:
                    raise ValueError(f"{key}: {exc}") from None
        values.update({k: v for k, v in flags.items() if v is not None})
        return cls(**values)  # type: ignore[call-arg]
