"""The local controller of the ``vertex`` engine: ``landfall operator`` (and ``landfall up``) with
``LANDFALL_ENGINE=vertex`` serves Vertex AI's JobService on this machine (``landfall.local.vertex_server``, the
stand-in that runs each CustomJob's replicas as processes) at ``LANDFALL_VERTEX_ENDPOINT``, and does what the other
engines' local controllers do beside their jobs (``tfjob_controller.Operator.tick``): the reconcile pass that
releases waiting follow-ups (through the ``customjobs`` backend, Google's client against the stand-in), the results
of jobs that ended without a chief to send them, and the Cloud Run convert job's executions.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from landfall.core.services.storage import Storage
from landfall.local.emulators import free_ports
from landfall.local.tfjob_controller import Operator
from landfall.local.vertex_server import VertexServer
from landfall.submit.backends.aiplatform import VertexJobs
from landfall.submit.backends.customjobs import VertexBackend
from landfall.submit.config import JobConfig

log = logging.getLogger("landfall.local.vertex_controller")


class VertexController(Operator):
    engine_name = "vertex"

    def __init__(self, state_dir: str | os.PathLike[str], namespace: str = "landfall-training",
                 config: JobConfig | None = None, storage: Storage | None = None, poll_s: float = 0.5,
                 env: dict[str, str] | None = None):
        super().__init__(state_dir, namespace, config, storage, poll_s, env)
        endpoint = config.vertex_endpoint if config is not None else ""
        port = urlparse(endpoint).port if endpoint.startswith("http://") else None
        self.server = VertexServer(replicas_dir=Path(state_dir) / "vertex", env=self.env, poll_s=min(poll_s, 0.5),
                                   port=port or free_ports(1)[0])
        self.endpoint = f"http://127.0.0.1:{self.server.port}"
        project = config.project if config is not None else "landfall-local"
        region = config.region if config is not None else "us-central1"
        self.backend = VertexBackend(VertexJobs(project, region, self.endpoint), storage)  # type: ignore[assignment]
        self.started = False

    def start(self) -> str:
        """Serves the stand-in (once); its address (what ``LANDFALL_VERTEX_ENDPOINT`` names)."""
        if not self.started:
            self.server.start()
            self.started = True
            log.info("Vertex AI stand-in serving at %s", self.endpoint, extra={"fields": {"endpoint": self.endpoint}})
        return self.endpoint

    def tick(self) -> None:
        self.start()
        super().tick()

    def _tick_job(self, name: str, job: dict[str, Any]) -> None:
        """The stand-in runs the job's replicas itself."""

    def _expire(self, job: dict[str, Any]) -> None:
        """Vertex AI keeps an ended CustomJob until it is deleted: nothing expires it."""

    def stop_all(self) -> None:
        super().stop_all()
        self.server.stop()
