"""Where TFJob (or JobSet, ``LANDFALL_ENGINE``) objects live: the interface both backends implement, and the factory.

- ``kubernetes`` (``landfall.submit.backends.kubernetes``): the TFJob collection of a real API server.
- ``local`` (``landfall.submit.backends.local``): the same objects in a state folder; ``landfall operator`` runs them.

Both speak plain TFJob dicts and raise the same errors: ``AlreadyExists`` (create on a taken name),
``NotFound``, ``Invalid`` (the object breaks the TFJob schema), ``Conflict`` (an update carried a stale
``metadata.resourceVersion``) and ``TemporaryError`` (unreachable, throttled, 5xx).
"""

from __future__ import annotations

from typing import Any, Protocol

from landfall.core.errors import Conflict
from landfall.submit.config import JobConfig

__all__ = ["Backend", "Conflict", "open_backend"]


class Backend(Protocol):
    namespace: str

    def create(self, job: dict[str, Any]) -> dict[str, Any]: ...

    def get(self, name: str) -> dict[str, Any]: ...

    def list(self, dataset: str | None = None) -> list[dict[str, Any]]: ...

    def patch(self, name: str, patch: dict[str, Any]) -> dict[str, Any]: ...

    def delete(self, name: str) -> None: ...


def open_backend(cfg: JobConfig) -> Backend:
    if cfg.backend == "kubernetes":
        from landfall.submit.backends.kubernetes import KubeBackend

        return KubeBackend.from_config(cfg)
    from landfall.submit.backends.local import LocalBackend

    return LocalBackend(cfg.local_state, namespace=cfg.namespace, engine_name=cfg.engine)
