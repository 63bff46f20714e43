"""Correct without ordering: any interleaving of duplicated, reordered requests, handled by several
consumer processes at once, while jobs end at random moments.

Invariants, per dataset: (1) a job is released only after the job before it ended, so at most one is
unfinished at any time; (2) every arrival is trained on by a job released after it arrived (its
manifest is in that job's inputs) and recorded by at most one; (3) once the last job ends and a reconcile
runs, nothing waits.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from landfall.core.contracts.layout import Layout
from landfall.core.contracts.messages import utc_now
from landfall.submit import coalesce, jobmeta, tfjob
from landfall.submit.backends.local import LocalBackend
from landfall.submit.config import JobConfig
from tests.conftest import unique
from tests.support import FakeClock, convert_arrival, copy_arrival, inputs_of, pending_of, set_state

REPO = Path(__file__).resolve().parents[3]
CONSUMERS = 3


@contextlib.contextmanager
def _consumers(emulator_stack, root: Path, count: int, env: dict[str, str] | None = None,
               clock: Path | None = None) -> Iterator[tuple]:
    """``count`` consumer processes on one unordered subscription, with ``env`` added to their environment."""
    bucket, topic = unique("bkt"), unique("unordered")
    emulator_stack.storage.ensure_bucket(bucket)
    emulator_stack.pubsub.ensure_topic(topic)
    emulator_stack.pubsub.ensure_subscription(topic, topic, ack_deadline_s=10, ordering=False)
    state, log, stop = root / "state", root / "handled.jsonl", root / "stop"
    env = {**os.environ, **(env or {}), "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    args = [str(state), str(log), str(stop), *([str(clock)] if clock else [])]
    procs = [subprocess.Popen([sys.executable, "-m", "tests.consumer_process", topic, bucket, *args], cwd=REPO,
                              env=env) for _ in range(count)]
    try:
        yield bucket, topic, state, log, root
    finally:
        stop.touch()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
    assert [p.returncode for p in procs] == [0] * count


@pytest.fixture(scope="module")
def consumers(emulator_stack, tmp_path_factory):
    with _consumers(emulator_stack, tmp_path_factory.mktemp("consumers"), CONSUMERS) as running:
        yield running


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
                ended_at[jobmeta.name_of(job)] = utc_now()
                set_state(backend, jobmeta.name_of(job), "Succeeded")

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
    jobs = {jobmeta.name_of(j): inputs_of(storage, j) for j in backend.list(dataset)}
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


# -- with a retrain policy, on a fake clock ----------------------------------------------------------------
DAY = 86400.0
POLICIES = {  # what the consumers run with (the environment's defaults: coalesce.policy_for)
    "quiet": {"LANDFALL_QUIET_S": "10", "LANDFALL_MAX_WAIT_S": "60", "LANDFALL_MAX_JOBS_PER_DAY": "2"},
    "min_new": {"LANDFALL_MIN_NEW_INSTANCES": "40", "LANDFALL_MAX_WAIT_S": "60", "LANDFALL_MAX_JOBS_PER_DAY": "3"},
}
INSTANCES = 16  # per arrival: 3 of them reach min_new_instances


@pytest.fixture(scope="module", params=sorted(POLICIES))
def policy_consumers(request, emulator_stack, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"policy-{request.param}")
    clock = FakeClock(path=root / "clock")
    with _consumers(emulator_stack, root, 2, POLICIES[request.param], clock.path) as running:
        yield (*running, clock, request.param)


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(2, 8), duplicates=st.integers(0, 6), seed=st.integers(0, 2**16),
       steps=st.lists(st.tuples(st.sampled_from([0.0, 0.0, 2.0, 11.0, 61.0, DAY]), st.booleans(), st.booleans()),
                      min_size=14, max_size=14))
def test_with_a_retrain_policy_every_request_is_covered_by_one_job_once_time_passes_the_bounds(
        emulator_stack, policy_consumers, monkeypatch, n, duplicates, seed, steps):
    """Invariants over random interleavings, the policy held by the consumers and a reconciler (this test) on one
    fake clock: (1) never two unfinished jobs per dataset; (2) every arrival trained on, no request recorded by
    two jobs; (3) once time passes the policy's bounds and the reconciler runs, nothing waits: nothing lost;
    (4) every job was released when the policy allowed it: at most max_jobs_per_day in any 24 h, and only after
    its requests were quiet for quiet_s (or the oldest waited max_wait_s), or added min_new_instances."""
    bucket, topic, state, log, root, clock, name = policy_consumers
    policy = POLICIES[name]
    for key, value in policy.items():
        monkeypatch.setenv(key, value)  # the reconciler here runs the consumers' policy
    storage, pubsub = emulator_stack.storage, emulator_stack.pubsub
    dataset = unique("pol")
    rng = random.Random(seed)
    first = convert_arrival(storage, bucket, dataset, root, n=INSTANCES)
    made = [first]
    backend = LocalBackend(state)
    cfg = JobConfig.load({}, bucket=bucket, project=emulator_stack.project, gpus_per_worker=0, local_state=str(state))
    published: dict[str, float] = {}  # request id -> the fake time it was first published
    ended_at: dict[str, str] = {}

    def end_running_jobs() -> None:
        for job in backend.list(dataset):
            if not tfjob.is_finished(job):
                ended_at[jobmeta.name_of(job)] = _stamp(clock.now)
                set_state(backend, jobmeta.name_of(job), "Succeeded")

    def unfinished() -> int:
        return sum(not tfjob.is_finished(j) for j in backend.list(dataset))

    order = list(range(n)) + rng.choices(range(n), k=duplicates)
    rng.shuffle(order)
    for i, ((dt, end, settle), k) in enumerate(zip(steps, order, strict=False)):
        while len(made) <= k:  # an arrival's manifest exists from its first delivery on
            made.append(copy_arrival(storage, first, len(made)))
        request = made[k]
        published.setdefault(request.request_id, clock.now)
        pubsub.publish(topic, request.to_json(), request.attributes())  # no ordering key: any order
        until = time.monotonic() + 10
        while settle and len(handled(log, dataset)) <= i and time.monotonic() < until:
            time.sleep(0.05)  # sometimes the consumers catch up before the next step
        if dt or end:  # between deliveries: jobs end, time passes, the reconciler runs
            if end:
                end_running_jobs()
            clock.advance(dt)
            coalesce.reconcile(backend, storage, cfg, Layout(), dataset=dataset, clock=clock)
            assert unfinished() <= 1  # (1)
    deadline = time.monotonic() + 60
    while len(handled(log, dataset)) < len(order) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(handled(log, dataset)) >= len(order)
    assert {r["outcome"] for r in handled(log, dataset)} <= {"submitted", "coalesced", "held", "duplicate"}

    # (3) Time passes the bounds (quiet_s, max_wait_s; a day for max_jobs_per_day), the reconciler runs.
    for _ in range(2 * n + 2):
        if not pending_of(storage, bucket, dataset):
            break
        end_running_jobs()
        clock.advance(61.0)
        if not coalesce.reconcile(backend, storage, cfg, Layout(), dataset=dataset, clock=clock):
            clock.advance(DAY)
            coalesce.reconcile(backend, storage, cfg, Layout(), dataset=dataset, clock=clock)
        assert unfinished() <= 1  # (1)
    assert pending_of(storage, bucket, dataset) == []
    jobs = sorted((inputs_of(storage, j) for j in backend.list(dataset)), key=lambda i: i.seq)
    assert [i.seq for i in jobs] == list(range(1, len(jobs) + 1))
    for before, after in itertools.pairwise(jobs):
        assert after.after == before.job and after.released_at >= ended_at[before.job]  # (1)
    assert {r.manifest for r in made} <= {m for i in jobs for m in i.manifest_uris}  # (2)
    recorded = [r["request_id"] for i in jobs for r in i.requests]
    assert len(recorded) == len(set(recorded))  # (2)
    # (4) The policy's bounds, from the fake times each job was released at and its requests first published.
    times = [datetime.fromisoformat(i.released_at).timestamp() for i in jobs]
    cap = int(policy["LANDFALL_MAX_JOBS_PER_DAY"])
    assert all(later - earlier >= DAY for earlier, later in zip(times, times[cap:], strict=False)), times
    wait = float(policy["LANDFALL_MAX_WAIT_S"])
    for at, i in zip(times, jobs, strict=True):
        firsts = [published[r["request_id"]] for r in i.requests]
        if "LANDFALL_QUIET_S" in policy:
            assert at >= min(max(firsts) + float(policy["LANDFALL_QUIET_S"]), min(firsts) + wait) - 2e-3, i.job
        else:
            assert len(firsts) * INSTANCES >= int(policy["LANDFALL_MIN_NEW_INSTANCES"]) or (
                at >= min(firsts) + wait - 2e-3), i.job
