"""One small, real flow that leaves every kind of record an operator asks about (used by the ``small_flow``
fixture in ``tests/conftest.py``, built once per session).

Everything is written by the real writers against the emulators: the arrival stage converts, rejects and
retracts (``landfall.arrival.handler.handle`` on object events), the submit stage releases and coalesces
(``handle_message`` with the local backend), the trainer trains one job for real (``python -m trainer.task``,
2 tiny epochs: metrics, model, threshold, verdict, champion and its result message), the reconciler announces
a failed job (``announce_finished``) and the reconcile loop logs its heartbeat. The training operator is
played by ``set_state``, as the other submit tests do.

Dataset ``sensors``:
  ``trained``   part-1.npy, converted, its request released job 1, which the trainer ran: Succeeded, promoted
  ``running``   part-2.npy, converted, released job 2, left Running (no trainer)
  ``retracted`` old.npy, converted, then deleted: retracted; its request waits behind job 2
  ``pending``   part-3.npy, converted, its request waits behind job 2 (Running)
  ``rejected``  bad.npy, not an array: rejected (corrupt_npy)
Dataset ``pumps``: one arrival whose job ended Failed without metrics; the reconciler announced it.

``lines`` holds every JSON log line the run wrote (in-process ones through ``landfall.core.logs``'s formatter,
the trainer's from its stderr), for the monitoring filter test.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from landfall.arrival.config import ConverterConfig
from landfall.arrival.handler import handle
from landfall.core import logs
from landfall.core.contracts import layout
from landfall.core.contracts.events import ObjectEvent
from landfall.core.contracts.layout import Layout
from landfall.core.runtime import Runtime
from landfall.local.synthetic import time_series
from landfall.reconcile import announce, loop
from landfall.submit import jobmeta
from landfall.submit.backends.local import LocalBackend
from landfall.submit.handler import handle_message
from tests.support import runtime, set_state
from tests.trainer.helpers import run_trainer

EPOCHS = 2


@dataclasses.dataclass(frozen=True)
class Arrival:
    name: str  # incoming/<dataset>/...
    generation: int
    dataset: str
    arrival_id: str
    request_id: str

    def uri(self, bucket: str) -> str:
        return f"gs://{bucket}/{self.name}"


@dataclasses.dataclass
class Flow:
    bucket: str
    state: Path  # the local backend's folder
    backend: LocalBackend
    arrivals: dict[str, Arrival]
    jobs: dict[str, str]  # trained | running | failed -> job name
    results_topic: str
    dead_letter: str  # a dead-letter subscription holding one request
    lines: list[dict[str, Any]]
    trainer_stderr: str

    def env(self) -> dict[str, str]:
        """What ``landfall trace`` / ``report`` read this flow with (besides the emulators' variables)."""
        return {"LANDFALL_BUCKET": self.bucket, "LANDFALL_LOCAL_STATE": str(self.state), "LANDFALL_BACKEND": "local",
                "LANDFALL_DEAD_LETTER_SUBSCRIPTION": self.dead_letter}


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.buffer = io.StringIO()
        self.setFormatter(logs.JsonFormatter())

    def emit(self, record: logging.LogRecord) -> None:
        self.buffer.write(self.format(record) + "\n")


def _event(emu, bucket: str, name: str, payload: bytes) -> ObjectEvent:
    emu.storage.write_bytes(f"gs://{bucket}/{name}", payload)
    info = emu.storage.stat(f"gs://{bucket}/{name}")
    return ObjectEvent(bucket, name, info.generation, info.size, info.crc32c)


def _npy(tmp: Path, n: int, seed: int) -> bytes:
    path = tmp / f"a-{seed}.npy"
    np.save(path, time_series(n, seed=seed))
    return path.read_bytes()


def build(emu, tmp: Path) -> Flow:
    from tests.conftest import pull_all, unique

    bucket, topic, results = unique("flow"), unique("flow-requests"), unique("flow-results")
    dead_letter = unique("flow-dead")
    emu.storage.ensure_bucket(bucket)
    for t in (topic, results, dead_letter):
        emu.pubsub.ensure_topic(t)
    emu.pubsub.ensure_subscription(topic, topic, ordering=True)
    emu.pubsub.ensure_subscription(dead_letter, dead_letter)
    state = tmp / "state"
    backend = LocalBackend(state)
    submit_rt = runtime(emu, bucket, backend, results_topic=results)
    cfg = ConverterConfig.load({}, project=emu.project, request_topic=topic)
    arrival_rt = Runtime(cfg, Layout(), emu.storage, emu.pubsub)

    capture = _Capture()
    root = logging.getLogger("landfall")
    saved_level = root.level
    root.addHandler(capture)
    root.setLevel(logging.INFO)
    arrivals: dict[str, Arrival] = {}
    jobs: dict[str, str] = {}

    def arrive(key: str, dataset: str, file: str, payload: bytes) -> ObjectEvent:
        obj = _event(emu, bucket, f"incoming/{dataset}/{file}", payload)
        arrivals[key] = Arrival(obj.name, obj.generation, dataset, layout.arrival_id(obj.name, obj.generation),
                                layout.request_id(bucket, obj.name, obj.generation))
        return obj

    def submit_published(expect: int) -> list[str]:
        got = pull_all(emu.pubsub, topic, expect=expect)
        assert len(got) == expect, f"{len(got)} requests published, expected {expect}"
        return [handle_message(m.data, m.attributes, submit_rt) for m in got]

    try:
        assert handle(arrive("trained", "sensors", "part-1.npy", _npy(tmp, 96, 1)), arrival_rt) == "converted"
        assert submit_published(1) == ["submitted"]
        (job1,) = backend.list("sensors")
        jobs["trained"] = jobmeta.name_of(job1)
        inputs_uri = jobmeta.inputs_of(job1)
        proc = run_trainer(["--inputs", inputs_uri, "--job-dir", jobmeta.job_dir(bucket, jobs["trained"]),
                            "--job-name", jobs["trained"], "--epochs", str(EPOCHS), "--batch-size-per-worker", "16",
                            "--units", "4,2", "--warm-start", "none",
                            # 2 epochs of a toy model check the plumbing, not learning: the naive baseline's floor
                            # is off here (tests/trainer/test_verdict.py and the noise dataset check it).
                            "--min-skill", "-1"],
                           LANDFALL_RESULTS_TOPIC=results, GOOGLE_CLOUD_PROJECT=emu.project)
        assert proc.returncode == 0, proc.stderr[-3000:]
        set_state(backend, jobs["trained"], "Succeeded")

        assert handle(arrive("running", "sensors", "part-2.npy", _npy(tmp, 64, 2)), arrival_rt) == "converted"
        assert submit_published(1) == ["submitted"]
        jobs["running"] = next(n for n in (jobmeta.name_of(j) for j in backend.list("sensors")) if n != jobs["trained"])
        set_state(backend, jobs["running"], "Running")

        old = arrive("retracted", "sensors", "old.npy", _npy(tmp, 64, 3))
        assert handle(old, arrival_rt) == "converted"
        emu.storage.delete(f"gs://{bucket}/{old.name}")
        assert handle(dataclasses.replace(old, kind="delete"), arrival_rt) == "retracted"
        assert handle(arrive("pending", "sensors", "part-3.npy", _npy(tmp, 64, 4)), arrival_rt) == "converted"
        assert submit_published(2) == ["coalesced", "coalesced"]
        assert handle(arrive("rejected", "sensors", "bad.npy", b"this is not an array"), arrival_rt) == "rejected"

        assert handle(arrive("failed", "pumps", "p-1.npy", _npy(tmp, 64, 5)), arrival_rt) == "converted"
        assert submit_published(1) == ["submitted"]
        (failed,) = backend.list("pumps")
        jobs["failed"] = jobmeta.name_of(failed)
        set_state(backend, jobs["failed"], "Failed")
        assert announce.announce_finished(backend, emu.storage, emu.pubsub, submit_rt.config) == [jobs["failed"]]

        # A request that failed on every delivery attempt, as Pub/Sub's dead-lettering leaves it.
        dead = {"schema": "landfall.request/v1", "dataset": "pumps", "request_id": "dead0000000000000001",
                "manifest": f"gs://{bucket}/tfrecords/pumps/gone/manifest.json", "reason": "manual"}
        emu.pubsub.publish(dead_letter, json.dumps(dead).encode(), {}, ordering_key=None)

        stop = threading.Event()
        thread = threading.Thread(target=loop.run, args=(submit_rt.config, emu.storage, backend, stop), daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while "reconciler heartbeat" not in capture.buffer.getvalue() and time.monotonic() < deadline:
            time.sleep(0.1)
        stop.set()
        thread.join(30)
    finally:
        root.removeHandler(capture)
        root.setLevel(saved_level)
    return Flow(bucket=bucket, state=state, backend=backend, arrivals=arrivals, jobs=jobs, results_topic=results,
                dead_letter=dead_letter, lines=logs.parse(capture.buffer.getvalue()) + logs.parse(proc.stderr),
                trainer_stderr=proc.stderr)
