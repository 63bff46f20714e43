"""Where TFJob (or JobSet, ``LANDFALL_ENGINE``) objects live: the interface every backend implements, and the factory.

- ``kubernetes`` (``landfall.submit.backends.kubernetes``): the TFJob collection of a real API server.
- ``local`` (``landfall.submit.backends.local``): the same objects in a state folder; ``landfall operator`` runs them.

**To add a backend**, write ``landfall/submit/backends/<name>.py`` with a class that has what ``Backend`` says and a
function ``connect(cfg) -> Backend``, and add ``<name>`` to ``landfall.core.config.BACKENDS`` (``LANDFALL_BACKEND``
picks it; ``open_backend`` loads the module by name, so nothing else branches on it).

Both speak plain TFJob dicts and raise the same errors: ``AlreadyExists`` (create on a taken name),
``NotFound``, ``Invalid`` (the object breaks the TFJob schema), ``Conflict`` (an update carried a stale
``metadata.resourceVersion``) and ``TemporaryError`` (unreachable, throttled, 5xx).
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

from landfall.core.errors import Conflict
from landfall.submit.config import BACKENDS, JobConfig

__all__ = ["Backend", "Conflict", "open_backend"]


class Backend(Protocol):
    namespace: str

    def create(self, job: dict[str, Any]) -> dict[str, Any]: ...

    def get(self, name: str) -> dict[str, Any]: ...

    def list(self, dataset: str | None = None) -> list[dict[str, Any]]: ...

    def patch(self, name: str, patch: dict[str, Any]) -> dict[str, Any]: ...

    def delete(self, name: str) -> None: ...


def open_backend(cfg: JobConfig) -> Backend:
    """The configured backend (``cfg.backend``, one of ``BACKENDS``), connected: its module's ``connect``."""
    if cfg.backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {cfg.backend!r}")
    connect = importlib.import_module(f"landfall.submit.backends.{cfg.backend}").connect
    return connect(cfg)
