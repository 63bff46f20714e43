"""The vertex engine under duplicated, reordered and concurrent delivery (issue #57): the same invariants as the
cluster engines' (tests/landfall/submit/test_interleavings.py), with every job a CustomJob created through Google's
client on the stand-in JobService, and three consumers handling deliveries at once (threads of one process, each
with its own client) while jobs end at random moments.

Per dataset: exactly one CustomJob per released job (the ledger's ``inputs.json``); a job released only after the
one before it ended; every arrival trained on, and recorded by at most one job; once the last job ends and a
reconcile runs, nothing waits."""

from __future__ import annotations

import itertools
import random
import threading

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from landfall.core.contracts.layout import Layout
from landfall.core.contracts.messages import utc_now
from landfall.core.errors import TemporaryError
from landfall.core.runtime import Runtime
from landfall.core.services.storage import Storage
from landfall.local.vertex_server import VertexServer
from landfall.submit import coalesce, jobmeta, vertex
from landfall.submit.backends.aiplatform import VertexJobs
from landfall.submit.backends.customjobs import VertexBackend
from landfall.submit.config import JobConfig
from landfall.submit.handler import handle_message
from tests.conftest import unique
from tests.support import convert_arrival, copy_arrival, inputs_of, pending_of

CONSUMERS = 3


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(2, 8), duplicates=st.integers(0, 6), ends=st.lists(st.integers(0, 14), max_size=3),
       seed=st.integers(0, 2**16))
def test_duplicated_reordered_concurrent_deliveries_make_one_custom_job_per_release(
        emulator_stack, bucket, tmp_path_factory, n, duplicates, ends, seed):
    storage = emulator_stack.storage
    dataset = unique("vx")
    root = tmp_path_factory.mktemp("vertex")
    first = convert_arrival(storage, bucket, dataset, root, n=16)
    requests = [first] + [copy_arrival(storage, first, k) for k in range(1, n)]
    rng = random.Random(seed)
    deliveries = requests + rng.choices(requests, k=duplicates)
    rng.shuffle(deliveries)
    server = VertexServer().start()
    try:
        def runtime() -> Runtime:  # what each consumer instance opens: its own client and storage
            cfg = JobConfig.load({}, bucket=bucket, project=emulator_stack.project, gpus_per_worker=0,
                                 engine="vertex", backend="customjobs", vertex_endpoint=server.url)
            backend = VertexBackend(VertexJobs(cfg.project, cfg.region, server.url), Storage(cfg.project))
            return Runtime(cfg, Layout(), Storage(cfg.project), backend=backend)

        watcher = runtime()
        ended_at: dict[str, str] = {}
        outcomes: list[str] = []

        def end_running_jobs() -> None:
            for job in watcher.backend.list(dataset):
                if not vertex.is_finished(job):
                    ended_at[jobmeta.name_of(job)] = utc_now()
                    for state in ("JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"):
                        if server.get(job["status"]["resource"])["state"] != state:
                            server.advance(job["status"]["resource"], state)

        queue = list(enumerate(deliveries))
        lock = threading.Lock()

        def consume() -> None:
            rt = runtime()
            while True:
                with lock:
                    if not queue:
                        return
                    i, request = queue.pop(0)
                    if i in ends:
                        end_running_jobs()
                for _ in range(20):  # a temporary error is redelivered, as Pub/Sub does; nothing else is
                    try:
                        outcomes.append(handle_message(request.to_json(), {}, rt))
                        break
                    except TemporaryError:
                        continue

        threads = [threading.Thread(target=consume) for _ in range(CONSUMERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(outcomes) == len(deliveries) and set(outcomes) <= {"submitted", "coalesced", "duplicate"}
        end_running_jobs()
        coalesce.reconcile(watcher.backend, storage, watcher.config, Layout(), dataset=dataset)
        end_running_jobs()
        coalesce.reconcile(watcher.backend, storage, watcher.config, Layout(), dataset=dataset)
        assert pending_of(storage, bucket, dataset) == []
        jobs = watcher.backend.list(dataset)
        names = [jobmeta.name_of(j) for j in jobs]
        parent = f"projects/{emulator_stack.project}/locations/{watcher.config.region}"
        created = server.list(parent, f'labels.landfall-dataset="{vertex.label_value(dataset)}"')
        assert len(names) == len(set(names)) == len(created)  # every CustomJob the service holds is one release
        by_seq = sorted((inputs_of(storage, j) for j in jobs), key=lambda i: i.seq)
        assert [i.seq for i in by_seq] == list(range(1, len(by_seq) + 1))  # one CustomJob per release, no gap
        for before, after in itertools.pairwise(by_seq):
            assert after.after == before.job and after.released_at >= ended_at[before.job]
        trained = {m for i in by_seq for m in i.manifest_uris}
        assert {r.manifest for r in requests} <= trained
        recorded = [r["request_id"] for i in by_seq for r in i.requests]
        assert len(recorded) == len(set(recorded))
    finally:
        server.stop()
