"""The reconcile loop next to a cluster: ``landfall.submit.coalesce.reconcile`` every ``poll_s`` seconds.

Runs as the one-replica ``landfall-reconciler`` Deployment (``k8s/base/reconciler.yaml``), so a follow-up
starts within seconds of its predecessor ending even when no new request arrives. No pass ends the loop,
whatever it raises (a TFJob without Landfall's labels, a bug): a ``TemporaryError`` is logged at WARNING, a cluster
without the engine's CRD (``MissingCRD``) at ERROR in its one line, anything else at ERROR with its traceback, and the
next pass comes ``poll_s`` later; only ``stop`` (SIGTERM) ends it,
after the current pass. The loop touches its heartbeat file when it starts and after every pass, failed or not;
``heartbeat_age`` is what the Deployment's liveness probe (``landfall reconcile --check-heartbeat``) reads, so a
pass that hangs gets the pod restarted. After the pass, at most once an hour, it applies the snapshots' collection
rule (``landfall.reconcile.collect``), touching the heartbeat after each dataset; whatever that raises is logged and
changes neither the pass's outcome nor the heartbeat line's counts. After the first pass and then at most once a
minute it also logs one ``reconciler heartbeat`` line (passes since the last one, how many failed): its absence is
an alert (``infra/modules/monitoring``), for a reconciler that is gone altogether, which no liveness probe sees.

Cheap to import (the probe imports it every period): the submit stage is imported when the loop runs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from landfall.core.errors import MissingCRD, TemporaryError

if TYPE_CHECKING:
    from landfall.core.services.storage import Storage
    from landfall.submit.backends import Backend
    from landfall.submit.config import JobConfig

log = logging.getLogger("landfall.reconcile")

MIN_POLL_S = 5.0  # the API server is shared: do not list TFJobs more often than this
HEARTBEAT = "/tmp/landfall-reconciler-alive"  # on the pod's /tmp emptyDir (the root filesystem is read-only)
HEARTBEAT_LOG_S = 60.0  # a "reconciler heartbeat" log line after the first pass, then at most once a minute
SCHEDULE_S = 60.0  # Cloud Scheduler starts the reconcile job (the vertex engine) every minute: infra/modules/schedule
MAX_HEARTBEAT_AGE_S = 120.0  # well above a pass (storage retries are bounded at 30 s) plus MIN_POLL_S


def run(cfg: JobConfig, storage: Storage, backend: Backend, stop: threading.Event, poll_s: float = MIN_POLL_S,
        heartbeat: str | Path | None = None, pubsub: Any = None, clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic, collect_window_s: float | None = None) -> int:
    """Reconciles until ``stop`` is set, touching ``heartbeat`` (if given) at start and after every pass; returns 0.

    With ``pubsub``, each pass also announces finished jobs that have no result yet
    (``landfall.reconcile.announce``: a job that failed without a chief to do so). With a bucket, passes are
    followed by the collection rule when one is due by ``clock`` (wall time; a test passes a fake one). The
    heartbeat log line is spaced by ``monotonic`` (a test passes a fake one too). With ``collect_window_s`` (a run that
    ends by itself, one of many scheduled ones) the collection rule is due only in a run that starts within that many
    seconds of a collection interval's start: the run that starts in an hour's first minute collects, the others
    do not."""
    from landfall.reconcile import announce, collect
    from landfall.submit import coalesce

    collector = collect.Collector(storage, cfg, clock=clock) if cfg is not None and cfg.bucket else None
    if collector is not None and collect_window_s is not None:
        started = clock()
        if started % collector.every_s >= collect_window_s:
            collector.last = started  # not this run's turn: the one starting in the interval's first window collects
    beat(heartbeat)
    logged_at, passes, failed = float("-inf"), 0, 0
    while not stop.is_set():
        ok = False
        try:
            released = coalesce.reconcile(backend, storage, cfg)
            if released:
                log.info("released %s", ", ".join(released), extra={"fields": {"released": released}})
            if pubsub is not None:
                announced = announce.announce_finished(backend, storage, pubsub, cfg)
                if announced:
                    log.info("announced %s", ", ".join(announced), extra={"fields": {"announced": announced}})
            ok = True
        except TemporaryError as exc:
            log.warning("reconcile pass failed (will retry): %s", exc)
        except MissingCRD as exc:  # a cluster admin's to fix; the line says how, no traceback adds to it
            log.error("reconcile pass failed (will retry): %s: %s", type(exc).__name__, exc)
        except Exception as exc:  # any object, any bug: log it and go on, the next pass may succeed
            log.error("reconcile pass failed (will retry): %s: %s", type(exc).__name__, exc, exc_info=True)
        beat(heartbeat)
        if collector is not None:
            collect_due(collector, heartbeat)
        passes, failed = passes + 1, failed + (not ok)
        if monotonic() - logged_at >= HEARTBEAT_LOG_S:
            # What the log-absence alert of infra/modules/monitoring counts: a reconciler that stopped or hangs
            # writes none of these.
            log.info("reconciler heartbeat", extra={"component": "reconciler",
                                                    "fields": {"heartbeat": True, "passes": passes, "failed": failed,
                                                               "last_pass_ok": ok}})
            logged_at, passes, failed = monotonic(), 0, 0
        stop.wait(max(poll_s, MIN_POLL_S))
    return 0


def collect_due(collector: Any, heartbeat: str | Path | None) -> None:
    """Runs ``collector`` (``landfall.reconcile.collect.Collector``) if due; what it raises is logged, never raised.
    A dataset's own failure is logged by the collector; this catches what fails before (listing the datasets)."""
    try:
        collector(lambda: beat(heartbeat))
    except TemporaryError as exc:
        log.warning("collection failed (tried again in an interval): %s", exc)
    except Exception as exc:  # a bug or a permanent error: the reconcile passes go on regardless
        log.error("collection failed (tried again in an interval): %s: %s", type(exc).__name__, exc, exc_info=True)


def beat(path: str | Path | None) -> None:
    """Sets the heartbeat file's modification time to now (creates it); a failure is logged, never raised."""
    if not path:
        return
    try:
        Path(path).touch()  # an existing file: its mtime becomes now
    except OSError as exc:
        log.error("heartbeat %s not written: %s", path, exc)


def heartbeat_age(path: str | Path) -> float | None:
    """Seconds since the loop last touched ``path``; ``None`` when it never did."""
    if not path:
        return None
    try:
        return time.time() - Path(path).stat().st_mtime
    except OSError:
        return None
