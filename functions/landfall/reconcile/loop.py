"""The reconcile loop next to a cluster: ``landfall.submit.coalesce.reconcile`` every ``poll_s`` seconds.

Runs as the one-replica ``landfall-reconciler`` Deployment (``k8s/base/reconciler.yaml``), so a follow-up
starts within seconds of its predecessor ending even when no new request arrives. A failed pass is
logged and the loop goes on; SIGTERM (or ``stop``) ends it after the current pass.
"""

from __future__ import annotations

import logging
import threading

from landfall.core.errors import LandfallError
from landfall.core.storage import Storage
from landfall.submit import coalesce
from landfall.submit.backends import Backend
from landfall.submit.config import JobConfig

log = logging.getLogger("landfall.reconcile")

MIN_POLL_S = 5.0  # the API server is shared: do not list TFJobs more often than this


def run(cfg: JobConfig, storage: Storage, backend: Backend, stop: threading.Event, poll_s: float = MIN_POLL_S) -> int:
    """Reconciles until ``stop`` is set; returns 0."""
    while not stop.is_set():
        try:
            released = coalesce.reconcile(backend, storage, cfg)
            if released:
                log.info("released %s", ", ".join(released), extra={"fields": {"released": released}})
        except LandfallError as exc:
            log.warning("reconcile failed (will retry): %s", exc)
        stop.wait(max(poll_s, MIN_POLL_S))
    return 0
