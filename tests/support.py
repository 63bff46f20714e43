"""Helpers shared by the submit, local and CLI tests (fixtures live in ``tests/conftest.py``)."""

from __future__ import annotations

import dataclasses
import io
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from landfall.arrival import converter
from landfall.arrival.config import ConverterConfig
from landfall.core.contracts import layout, records
from landfall.core.contracts.layout import Layout
from landfall.core.contracts.messages import JobInputs, Manifest, TrainingRequest
from landfall.core.errors import TemporaryError
from landfall.core.runtime import Runtime
from landfall.local.synthetic import time_series
from landfall.submit import jobmeta
from landfall.submit.backends.kubernetes import KubeBackend
from landfall.submit.backends.local import LocalBackend
from landfall.submit.config import JobConfig
from landfall.submit.handler import handle_message


def convert_arrival(storage, bucket: str, dataset: str, tmp: Path, n: int = 64, seed: int = 0,
                    generation: int = 1) -> TrainingRequest:
    """Converts a small .npy into gs://BUCKET/tfrecords/<dataset>/<arrival-id>/ and returns its request."""
    name = f"incoming/{dataset}/part-{seed}.npy"
    src = tmp / f"{dataset}-{seed}.npy"
    np.save(src, time_series(n, seed=seed))
    aid = layout.arrival_id(name, generation)
    out = layout.gs(bucket, layout.shards_prefix(Layout(), dataset, aid))
    converter.convert(str(src), out, dataset, ConverterConfig.load({}), storage, arrival_id=aid)
    return TrainingRequest(dataset=dataset, manifest=out + "manifest.json",
                           request_id=layout.request_id(bucket, name, generation))


def copy_arrival(storage, base: TrainingRequest, k: int) -> TrainingRequest:
    """Another arrival of the same dataset: a copy of ``base``'s manifest under a new arrival id (same shards)."""
    bucket, _ = layout.split_gs(base.manifest)
    manifest = Manifest.from_json(storage.read_bytes(base.manifest))
    name = f"incoming/{base.dataset}/copy-{k}.npy"
    aid = layout.arrival_id(name, k + 1)
    copy = dataclasses.replace(manifest, arrival_id=aid, source=dataclasses.replace(manifest.source, name=name))
    uri = layout.gs(bucket, layout.manifest_name(Layout(), base.dataset, aid))
    storage.write_bytes(uri, copy.to_json().encode())
    return TrainingRequest(dataset=base.dataset, manifest=uri, request_id=layout.request_id(bucket, name, k + 1))


def runtime(emulator_stack, bucket: str, backend, **cfg) -> Runtime:
    config = JobConfig.load({}, **{"bucket": bucket, "project": emulator_stack.project, "gpus_per_worker": 0, **cfg})
    return Runtime(config, Layout(), emulator_stack.storage, backend=backend)


def publish(emulator_stack, topic: str, request: TrainingRequest, times: int = 1) -> None:
    for _ in range(times):
        emulator_stack.pubsub.publish(topic, request.to_json(), request.attributes(), ordering_key=request.dataset)


def engine_of(backend) -> str:
    """The engine whose jobs ``backend`` holds."""
    return backend.engine if isinstance(backend, LocalBackend) else (
        "jobset" if backend.objects.plural == "jobsets" else "tfjob")


def twin(backend):
    """A second client of the same store: what another consumer instance would open."""
    if isinstance(backend, LocalBackend):
        return LocalBackend(backend.root, backend.namespace, backend.engine)
    return KubeBackend.for_host(backend.objects.api.api_client.configuration.host, backend.namespace,
                                engine_name="jobset" if backend.objects.plural == "jobsets" else "tfjob")


def consume(emulator_stack, subscription: str, rt: Runtime | Callable[[], Runtime], expect: int,
            timeout_s: float = 30.0, workers: int = 1) -> list[str]:
    """Pulls ``expect`` messages and handles each like the function does: ack on return, nack on raise.

    ``rt`` may be a factory: each worker thread then builds its own runtime, as separate instances would.
    """
    ps = emulator_stack.pubsub
    own = threading.local()

    def runtime_here() -> Runtime:
        if not callable(rt):
            return rt
        if not hasattr(own, "rt"):
            own.rt = rt()
        return own.rt  # type: ignore[no-any-return]

    outcomes: list[str] = []
    deadline = time.monotonic() + timeout_s
    with ThreadPoolExecutor(workers) as pool:
        while len(outcomes) < expect and time.monotonic() < deadline:
            batch = ps.pull(subscription, max_messages=expect, timeout_s=2.0)

            def one(m):
                try:
                    result = handle_message(m.data, m.attributes, runtime_here())
                except TemporaryError:
                    ps.nack(subscription, [m.ack_id])
                    return None
                ps.ack(subscription, [m.ack_id])
                return result

            outcomes += [o for o in pool.map(one, batch) if o is not None]
    return outcomes


def jobset_status(state: str) -> dict:
    """What the JobSet controller records for ``Running`` (a worker Job active), ``Succeeded`` (``Completed``)
    or ``Failed``."""
    if state == "Running":
        return {"replicatedJobsStatus": [{"name": "worker", "active": 1, "ready": 1, "succeeded": 0, "failed": 0,
                                          "suspended": 0}]}
    kind = {"Succeeded": "Completed"}.get(state, state)
    reason = {"Completed": "AllJobsCompleted", "Failed": "FailJobSetFailurePolicyAction"}.get(kind, kind)
    return {"terminalState": kind, "conditions": [{"type": kind, "status": "True", "reason": reason, "message": "",
                                                   "lastTransitionTime": "2026-01-01T00:00:00Z"}]}


def set_state(backend, name: str, kind: str) -> None:
    """Plays the training operator (or the JobSet controller): records the state on the job."""
    local = isinstance(backend, LocalBackend)
    group, version, plural = ((backend.api.group, backend.api.version, backend.api.plural) if local else
                              (backend.objects.group, backend.objects.version, backend.objects.plural))
    if plural == "jobsets":
        status = jobset_status(kind)
    else:
        status = {"conditions": [{"type": kind, "status": "True", "reason": f"TFJob{kind}", "message": ""}]}
    if local:
        backend.patch_status(name, status)
    else:
        # the fake API server's status subresource, through the same client (a merge patch: the body is an object)
        backend.objects.api.patch_namespaced_custom_object_status(
            group, version, backend.namespace, plural, name, {"status": status})


def inputs_of(storage, job: dict) -> JobInputs:
    """What a released TFJob trains on: the ``inputs.json`` its annotation names."""
    uri = jobmeta.inputs_of(job)
    return JobInputs.from_json(storage.read_bytes(uri), uri)


def pending_of(storage, bucket: str, dataset: str) -> list[str]:
    """The request ids waiting for the dataset's next job."""
    prefix = layout.gs(bucket, f"{Layout().requests_prefix}{dataset}/pending/")
    return sorted(u[len(prefix):].removesuffix(".json") for u in storage.list(prefix, suffix=".json"))


def read_back(storage, manifest: Manifest) -> np.ndarray:
    """Every instance a manifest's shards hold, in order, read with the project's record reader."""
    out = []
    for shard in manifest.shards:
        body = storage.read_bytes(shard.uri)
        assert len(body) == shard.bytes
        out += [records.decode_example(r, tuple(manifest.shape)) for r in records.iter_records(io.BytesIO(body))]
    return np.stack(out)


class FakeClock:
    """The retrain policy's time, moved by the test (``Runtime.clock``, ``coalesce.submit(..., clock=)``).

    With ``path`` it is also written to that file, which consumer processes read (``tests.consumer_process``)."""

    def __init__(self, start: float | None = None, path: Path | None = None):
        self.path = path
        self.now = time.time() if start is None else start
        self._write()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        self._write()
        return self.now

    def _write(self) -> None:
        if self.path is not None:
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(repr(self.now))
            tmp.replace(self.path)


def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """``predicate()``'s first true value, asked every half second; an ``AssertionError`` naming ``what`` once
    ``timeout`` seconds passed without one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def stack_ready(state: Path) -> dict | None:
    """The ``stack.json`` of the ``landfall up`` whose state folder is ``state`` once it names its processes (the
    stack is up), else None."""
    try:
        info = json.loads((state / "stack.json").read_text())
    except (FileNotFoundError, ValueError):
        return None
    return info if "processes" in info else None
