"""This worker's timeline: when each phase started and how long it took (issue #42,
``landfall.core.contracts.timeline``).

``trainer.errors.phase`` times every phase it runs through ``span``; the epochs (``trainer.train.EpochReporter``)
and the verdict's passes (``trainer.judging.verdict``) add theirs. One ``Recorder`` per process, reset by ``begin`` at
the start of ``trainer.task.main``. The chief puts the merged timeline into ``metrics.json`` at every save
(``into``); every other worker writes its own into the job dir when it exits (``publish``:
``timeline/worker-<i>.json``), and the chief reads those at its end (``gather``), as it reads nothing else of
theirs: no collective is involved, so a worker that is gone never holds the chief up for more than ``wait_s``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from landfall.core import logs
from landfall.core.contracts import timeline as core_timeline
from landfall.core.rules import timestamps

log = logs.get("trainer.stopwatch")

FOLDER = "timeline"


def worker_file(worker: int) -> str:
    return f"{FOLDER}/worker-{worker}.json"


class Recorder:
    """Spans in the order they started; an open one has ``seconds: None``; nested ones name their ``within``."""

    def __init__(self, worker: int = 0):
        self.worker = worker
        self.wall0 = time.time()
        self.mono0 = time.monotonic()
        self.spans: list[dict[str, Any]] = []
        self.open: list[str] = []

    @contextlib.contextmanager
    def span(self, name: str, **extra: Any) -> Iterator[dict[str, Any]]:
        t0 = time.monotonic()
        entry = {"phase": name, "within": self.open[-1] if self.open else None,
                 "start_s": round(t0 - self.mono0, 3), "seconds": None, **extra}
        self.spans.append(entry)
        self.open.append(name)
        try:
            yield entry
        except BaseException:
            entry["failed"] = True
            raise
        finally:
            self.open.pop()
            entry["seconds"] = round(time.monotonic() - t0, 3)

    def add(self, name: str, t0: float, t1: float, **extra: Any) -> None:
        """A span measured elsewhere (``time.monotonic`` readings), such as an epoch."""
        self.spans.append({"phase": name, "within": self.open[-1] if self.open else None,
                           "start_s": round(t0 - self.mono0, 3), "seconds": round(max(0.0, t1 - t0), 3), **extra})

    def doc(self) -> dict[str, Any]:
        """This worker's timeline so far: its phases and its seconds in, outside and between them."""
        total = time.monotonic() - self.mono0
        phases = [dict(s) for s in self.spans]
        for p in phases:  # still running: its seconds so far
            if p["seconds"] is None:
                p["seconds"] = round(total - p["start_s"], 3)
                p["running"] = True
        epochs = sum(p["seconds"] for p in phases if p["phase"] == core_timeline.EPOCH)
        top = sum(p["seconds"] for p in phases if p["within"] is None)
        return {"worker": self.worker,
                "started_at": datetime.fromtimestamp(self.wall0, UTC).isoformat(timespec="milliseconds"),
                "total_s": round(total, 3), "epochs_s": round(epochs, 3),
                "outside_epochs_s": round(total - epochs, 3), "unaccounted_s": round(max(0.0, total - top), 3),
                "phases": phases}


_current = Recorder()


def begin(worker: int) -> Recorder:
    """A fresh timeline for this process (``trainer.task.main``)."""
    global _current
    _current = Recorder(worker)
    return _current


def current() -> Recorder:
    return _current


def span(name: str, **extra: Any) -> contextlib.AbstractContextManager[dict[str, Any]]:
    return _current.span(name, **extra)


# What the chief has read of the other workers' timelines (``gather``), merged at every save.
_others: dict[int, dict[str, Any]] = {}


def into(doc: dict[str, Any], num_workers: int) -> None:
    """The chief's metrics.json gets the job's timeline: its own, and the others' it has gathered."""
    mine = _current.doc()
    others = [w for i, w in sorted(_others.items()) if i != mine["worker"]]
    doc[core_timeline.FIELD] = core_timeline.merge([mine, *others], num_workers, doc,
                                                   missing="not reported yet (a worker writes its timeline at its end)")


def publish(job: Any, worker: int) -> None:
    """A worker other than the chief writes its timeline into the job dir (never failing the run)."""
    try:
        job.write_json(worker_file(worker), _current.doc())
    except Exception as exc:
        log.warning(f"could not write this worker's timeline: {exc}", extra={"fields": {"worker": worker}})


def gather(job: Any, num_workers: int, wait_s: float = 10.0, poll_s: float = 0.25) -> int:
    """The chief reads the other workers' timelines, waiting up to ``wait_s`` for those not written yet (a worker
    writes its own as it exits, moments after the last collective); returns how many it found."""
    deadline = time.monotonic() + wait_s
    wanted = set(range(1, num_workers)) - set(_others)
    while wanted:
        for i in sorted(wanted):
            try:
                found = job.read_json(worker_file(i))
            except Exception as exc:
                log.warning(f"could not read worker {i}'s timeline: {exc}")
                found = None
            if found is not None and found.get("worker") == i and _this_attempt(found):
                _others[i] = found
                wanted.discard(i)
        if not wanted or time.monotonic() >= deadline:
            break
        time.sleep(poll_s)
    return len(_others)


def _this_attempt(found: dict[str, Any]) -> bool:
    """A worker's file from an earlier attempt ended before this chief started (the operator restarts every
    worker after the failed ones are gone)."""
    began = timestamps.epoch(found.get("started_at"))
    total = found.get("total_s")
    return began is None or not isinstance(total, int | float) or began + total >= _current.wall0 - 1.0


def reset_others() -> None:
    _others.clear()
