"""Counts users reach: 10,000 arrivals of one dataset and a burst of 2,000 through one follow-up.

Against fake-gcs-server and the fake Kubernetes API server, which refuses what the real one refuses
(256 KiB of annotations, 1.5 MiB objects). Nothing Landfall sends may grow with history: the TFJob
stays the same size whatever it covers, and each request costs the same number of calls.
"""

from __future__ import annotations

import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

from landfall.core.contracts import layout
from landfall.core.contracts.layout import Layout
from landfall.core.contracts.messages import Manifest, TrainingRequest
from landfall.core.services.storage import Storage
from landfall.submit import coalesce, jobmeta
from landfall.submit.backends.kubernetes import KubeBackend
from tests.fakes.kube_api import FakeKubeAPI
from tests.support import convert_arrival, inputs_of, pending_of, runtime, set_state

ARRIVALS = 10_000
BURST = 2_000
MAX_TFJOB_BYTES = 16 * 1024
PROCESSES = 4


def _write_copies(args: tuple[str, str, bytes, int, int]) -> None:
    """In a worker process (the client's Python overhead, not the emulator, bounds a single process)."""
    bucket, dataset, body, start, stop = args
    storage = Storage("landfall-test")
    for k in range(start, stop):
        name = f"incoming/{dataset}/part-{k}.npy"
        uri = layout.gs(bucket, layout.manifest_name(Layout(), dataset, layout.arrival_id(name, k + 1)))
        storage.write_bytes(uri, body, metadata={"count": "64"})


def arrivals(storage, base: TrainingRequest, start: int, n: int) -> list[TrainingRequest]:
    """``n`` more arrivals of ``base``'s dataset: its manifest under new arrival ids."""
    bucket, _ = layout.split_gs(base.manifest)
    body = Manifest.from_json(storage.read_bytes(base.manifest)).to_json().encode()
    step = -(-n // PROCESSES)
    chunks = [(bucket, base.dataset, body, s, min(s + step, start + n)) for s in range(start, start + n, step)]
    with ProcessPoolExecutor(PROCESSES, mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(_write_copies, chunks))
    out = []
    for k in range(start, start + n):
        name = f"incoming/{base.dataset}/part-{k}.npy"
        uri = layout.gs(bucket, layout.manifest_name(Layout(), base.dataset, layout.arrival_id(name, k + 1)))
        out.append(TrainingRequest(base.dataset, uri, layout.request_id(bucket, name, k + 1)))
    return out


def test_ten_thousand_arrivals_and_a_burst_of_two_thousand(emulator_stack, bucket, tmp_path):
    storage = emulator_stack.storage
    first = convert_arrival(storage, bucket, "scale", tmp_path)
    with FakeKubeAPI() as api:
        backend = KubeBackend.for_host(api.host)
        rt = runtime(emulator_stack, bucket, backend)
        submit = lambda r: coalesce.submit(r, rt.config, backend, storage, rt.layout).outcome  # noqa: E731
        assert submit(first) == "submitted"
        (job1,) = backend.list("scale")
        set_state(backend, jobmeta.name_of(job1), "Running")

        # A bulk upload while the first job runs: every arrival joins the one follow-up.
        history = arrivals(storage, first, 1, ARRIVALS - BURST - 1)
        burst = arrivals(storage, first, ARRIVALS, BURST)
        with ThreadPoolExecutor(8) as pool:
            outcomes = list(pool.map(submit, burst))
        assert outcomes == ["coalesced"] * BURST
        assert len(pending_of(storage, bucket, "scale")) == BURST and len(backend.list("scale")) == 1

        set_state(backend, jobmeta.name_of(job1), "Succeeded")
        assert coalesce.reconcile(backend, storage, rt.config, rt.layout) != []
        (job2,) = [j for j in backend.list("scale") if jobmeta.name_of(j) != jobmeta.name_of(job1)]
        inputs = inputs_of(storage, job2)
        assert len(inputs.manifests) == ARRIVALS and len(inputs.requests) == BURST
        assert {r.manifest for r in [first, *history, *burst]} == set(inputs.manifest_uris)
        assert pending_of(storage, bucket, "scale") == []
        # The object the API server stores does not grow with what the job covers.
        sizes = [len(json.dumps(j)) for j in (backend.get(jobmeta.name_of(job1)), backend.get(jobmeta.name_of(job2)))]
        assert max(sizes) <= MAX_TFJOB_BYTES and abs(sizes[0] - sizes[1]) < 256, sizes
        assert sum(len(k) + len(v) for k, v in jobmeta.annotations(job2).items()) < 1024
