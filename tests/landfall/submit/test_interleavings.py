"""Correct without ordering: any interleaving of duplicated, reordered requests, handled by several
consumer processes at once, while jobs end at random moments.

Invariants, per dataset: (1) a job is released only after the job before it ended, so at most one is
unfinished at any time; (2) every arrival is trained on by a job released after it arrived (its
manifest is in that job's inputs) and recorded by at most one; (3) once the last job ends and a reconcile
runs, nothing waits.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from landfall.core.config import Layout
from landfall.core.messages import utc_now
from landfall.submit import coalesce, tfjob
from landfall.submit.backends.local import LocalBackend
from landfall.submit.config import JobConfig
from tests.conftest import unique
from tests.support import convert_arrival, copy_arrival, inputs_of, pending_of, set_state

REPO = Path(__file__).resolve().parents[3]
CONSUMERS = 3


@pytest.fixture(scope="module")
def consumers(emulator_stack, tmp_path_factory):
    root = tmp_path_factory.mktemp("consumers")
    bucket, topic = unique("bkt"), unique("unordered")
    emulator_stack.storage.ensure_bucket(bucket)
    emulator_stack.pubsub.ensure_topic(topic)
    emulator_stack.pubsub.ensure_subscription(topic, topic, ack_deadline_s=10, ordering=False)
    state, log, stop = root / "state", root / "handled.jsonl", root / "stop"
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    procs = [subprocess.Popen([sys.executable, "-m", "tests.consumer_process", topic, bucket, str(state), str(log),
                               str(stop)], cwd=REPO, env=env) for _ in range(CONSUMERS)]
    try:
        yield bucket, topic, state, log, root
    finally:
        stop.touch()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
    assert [p.returncode for p in procs] == [0] * CONSUMERS


def handled(log: Path, dataset: str) -> list[dict]:
    if not log.exists():
        return []
    return [r for r in map(json.loads, log.read_text().splitlines()) if r["dataset"] == dataset]


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(2, 10), duplicates=st.integers(0, 8), ends=st.lists(st.integers(0, 18), max_size=3),
       seed=st.integers(0, 2**16))
def test_unordered_duplicated_concurrent_deliveries(emulator_stack, consumers, n, duplicates, ends, seed):
    bucket, topic, state, log, root = consumers
    storage, pubsub = emulator_stack.storage, emulator_stack.pubsub
    dataset = unique("il")
    first = convert_arrival(storage, bucket, dataset, root, n=16)
    requests = [first] + [copy_arrival(storage, first, k) for k in range(1, n)]
    rng = random.Random(seed)
    deliveries = requests + rng.choices(requests, k=duplicates)
    rng.shuffle(deliveries)
    backend = LocalBackend(state)
    ended_at: dict[str, str] = {}

    def end_running_jobs() -> None:
        for job in backend.list(dataset):
            if not tfjob.is_finished(job):
                ended_at[tfjob.name_of(job)] = utc_now()
                set_state(backend, tfjob.name_of(job), "Succeeded")

    for i, request in enumerate(deliveries):
        if i in ends:
            end_running_jobs()
        pubsub.publish(topic, request.to_json(), request.attributes())  # no ordering key: any order
    deadline = time.monotonic() + 60
    while len(handled(log, dataset)) < len(deliveries) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(handled(log, dataset)) >= len(deliveries)
    assert {r["outcome"] for r in handled(log, dataset)} <= {"submitted", "coalesced", "duplicate"}

    end_running_jobs()
    cfg = JobConfig.load({}, bucket=bucket, project=emulator_stack.project, gpus_per_worker=0, local_state=str(state))
    coalesce.reconcile(backend, storage, cfg, Layout(), dataset=dataset)
    assert pending_of(storage, bucket, dataset) == []
    jobs = {tfjob.name_of(j): inputs_of(storage, j) for j in backend.list(dataset)}
    by_seq = sorted(jobs.values(), key=lambda i: i.seq)
    assert [i.seq for i in by_seq] == list(range(1, len(by_seq) + 1))  # numbered without gaps
    for before, after in itertools.pairwise(by_seq):
        assert after.after == before.job and after.released_at >= ended_at[before.job]  # (1)
    # (2) every arrival is trained on (a request found covered by the manifest listing of a job released after
    # its manifest existed is not recorded again), and no request is recorded by two jobs
    trained = {m for i in by_seq for m in i.manifest_uris}
    assert {r.manifest for r in requests} <= trained
    recorded = [r["request_id"] for i in by_seq for r in i.requests]
    assert len(recorded) == len(set(recorded))
    for i in by_seq:
        assert {r["manifest"] for r in i.requests} <= set(i.manifest_uris)
