"""The submit stage against the real Pub/Sub and Cloud Storage emulators, on both backends.

Requests travel through a real Pub/Sub subscription (publish, pull, handle, ack or nack), manifests are
written by the real converter, and the ``kubernetes`` backend talks to the fake TFJob API server (which
enforces the API server's size limits).
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from landfall.core.contracts import layout
from landfall.core.contracts.layout import Layout
from landfall.core.contracts.messages import TrainingRequest
from landfall.core.errors import NotFound, TemporaryError
from landfall.submit import coalesce, jobmeta, tfjob
from landfall.submit.backends.kubernetes import KubeBackend
from landfall.submit.backends.local import LocalBackend
from landfall.submit.handler import handle_message
from landfall.submit.ledger import Ledger
from tests.fakes.kube_api import FakeKubeAPI
from tests.support import (
    consume,
    convert_arrival,
    copy_arrival,
    inputs_of,
    pending_of,
    publish,
    runtime,
    set_state,
    twin,
)


@pytest.fixture(params=["local", "kubernetes"])
def backend(request, tmp_path):
    if request.param == "local":
        yield LocalBackend(tmp_path / "state")
    else:
        with FakeKubeAPI() as api:
            yield KubeBackend.for_host(api.host)


# -- tests ----------------------------------------------------------------------------------------------
def test_the_same_request_three_times_makes_one_job(emulator_stack, bucket, topic, backend, tmp_path):
    request = convert_arrival(emulator_stack.storage, bucket, "dups", tmp_path)
    publish(emulator_stack, topic, request, times=3)
    outcomes = consume(emulator_stack, topic, runtime(emulator_stack, bucket, backend), expect=3)
    assert sorted(outcomes) == ["duplicate", "duplicate", "submitted"]
    (job,) = backend.list("dups")
    inputs = inputs_of(emulator_stack.storage, job)
    assert inputs.manifest_uris == [request.manifest] and inputs.seq == 1
    assert inputs.manifests[0].count == 64  # from the manifest object's metadata: listed, not read
    assert [r["request_id"] for r in inputs.requests] == [request.request_id]
    assert not tfjob.is_suspended(job)
    assert job["metadata"]["labels"][jobmeta.REQUEST_LABEL] == request.request_id
    assert pending_of(emulator_stack.storage, bucket, "dups") == []


def test_a_burst_of_50_while_a_job_runs_makes_exactly_one_follow_up(emulator_stack, bucket, topic, backend,
                                                                      tmp_path):
    storage = emulator_stack.storage
    first = convert_arrival(storage, bucket, "burst", tmp_path)
    rt = runtime(emulator_stack, bucket, backend)
    assert handle_message(first.to_json(), {}, rt) == "submitted"
    (active,) = backend.list("burst")
    set_state(backend, jobmeta.name_of(active), "Running")

    burst = [copy_arrival(storage, first, k) for k in range(50)]
    for r in burst:
        publish(emulator_stack, topic, r)
    # Several consumer instances at once, each with its own runtime and backend client (stateless, no shared
    # memory: they meet only in the backend's store and the bucket).
    outcomes = consume(emulator_stack, topic, lambda: runtime(emulator_stack, bucket, twin(backend)), expect=50,
                       workers=8)
    assert outcomes == ["coalesced"] * 50
    assert len(backend.list("burst")) == 1  # the follow-up waits as pending requests, not as a TFJob
    assert sorted(pending_of(storage, bucket, "burst")) == sorted(r.request_id for r in burst)

    # Duplicates of the burst while they wait: still nothing new.
    assert handle_message(burst[7].to_json(), {}, rt) == "duplicate"  # received before: not recorded twice
    assert len(backend.list("burst")) == 1

    # The active job ends; the next request (or a reconcile) releases the follow-up, which trains on all.
    set_state(backend, jobmeta.name_of(active), "Succeeded")
    late = copy_arrival(storage, first, 99)
    assert handle_message(late.to_json(), {}, rt) == "submitted"
    (follow,) = [j for j in backend.list("burst") if jobmeta.name_of(j) != jobmeta.name_of(active)]
    assert jobmeta.annotations(follow)[jobmeta.AFTER_ANNOTATION] == jobmeta.name_of(active)
    inputs = inputs_of(storage, follow)
    assert {r["request_id"] for r in inputs.requests} == {r.request_id for r in [*burst, late]}
    assert {r.manifest for r in [first, *burst, late]} == set(inputs.manifest_uris)
    args = follow["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["args"]
    assert "--manifest" not in args and args[args.index("--inputs") + 1] == jobmeta.inputs_of(follow)
    assert pending_of(storage, bucket, "burst") == []
    # Redelivering any of them now starts nothing: they wait, and the next release finds them covered.
    assert {handle_message(r.to_json(), {}, rt) for r in burst[:5]} <= {"duplicate", "coalesced"}
    set_state(backend, jobmeta.name_of(follow), "Succeeded")
    assert coalesce.reconcile(backend, storage, rt.config, rt.layout) == []
    assert len(backend.list("burst")) == 2 and pending_of(storage, bucket, "burst") == []


def test_two_datasets_in_parallel_never_block_each_other(emulator_stack, bucket, topic, backend, tmp_path):
    storage = emulator_stack.storage
    a, b = (convert_arrival(storage, bucket, ds, tmp_path, seed=i) for i, ds in enumerate(("alpha", "beta")))
    for r in (a, b):
        publish(emulator_stack, topic, r)
    rt = runtime(emulator_stack, bucket, backend)
    assert sorted(consume(emulator_stack, topic, rt, expect=2, workers=2)) == ["submitted", "submitted"]
    set_state(backend, jobmeta.name_of(backend.list("alpha")[0]), "Running")
    # alpha is busy: its next arrival waits; beta's first job finished: beta's next arrival starts at once.
    (beta_first,) = backend.list("beta")
    set_state(backend, jobmeta.name_of(beta_first), "Succeeded")
    a2, b2 = copy_arrival(storage, a, 1), copy_arrival(storage, b, 1)
    for r in (a2, b2):
        publish(emulator_stack, topic, r)
    assert sorted(consume(emulator_stack, topic, rt, expect=2, workers=2)) == ["coalesced", "submitted"]
    assert [tfjob.state(j) for j in backend.list("alpha")] == ["Running"]
    assert pending_of(storage, bucket, "alpha") == [a2.request_id]
    beta = backend.list("beta")
    (beta_next,) = [j for j in beta if jobmeta.name_of(j) != jobmeta.name_of(beta_first)]
    assert len(beta) == 2 and set(inputs_of(storage, beta_next).manifest_uris) == {b.manifest, b2.manifest}


def test_permanent_errors_are_acknowledged_and_recorded(emulator_stack, bucket, topic, tmp_path):
    storage = emulator_stack.storage
    good = convert_arrival(storage, bucket, "perm", tmp_path)
    bad_manifest = layout.gs(bucket, "tfrecords/perm/broken/manifest.json")
    storage.write_bytes(bad_manifest, b'{"schema": "landfall.manifest/v1", "count": "many"}')
    cases = [
        b"not json",
        json.dumps({"schema": "landfall.request/v1", "dataset": "perm"}).encode(),  # lacks manifest, request_id
        TrainingRequest("perm", layout.gs(bucket, "tfrecords/perm/gone/manifest.json"), "missing1").to_json(),
        TrainingRequest("perm", bad_manifest, "invalid1").to_json(),
        TrainingRequest("other", good.manifest, "wrongds1").to_json(),  # a manifest of another dataset
    ]
    for data in cases:
        emulator_stack.pubsub.publish(topic, data)
    backend = LocalBackend(tmp_path / "state")
    outcomes = consume(emulator_stack, topic, runtime(emulator_stack, bucket, backend), expect=len(cases))
    assert outcomes == ["rejected"] * len(cases)
    assert emulator_stack.pubsub.pull(topic, timeout_s=2.0) == []  # acknowledged: nothing comes back
    rejected = storage.list(layout.gs(bucket, "rejected/"))
    names = {u.rsplit("/", 2)[-2] + "/" + u.rsplit("/", 1)[-1] for u in rejected}
    assert {"perm/request-missing1.json", "perm/request-invalid1.json", "other/request-wrongds1.json"} <= names
    assert len(rejected) == len(cases)
    record = json.loads(storage.read_bytes(layout.gs(bucket, "rejected/perm/request-missing1.json")))
    assert record["reason"] == "NotFound" and "does not exist" in record["detail"]
    assert backend.list() == []


def test_a_temporary_backend_failure_is_redelivered_then_succeeds(emulator_stack, bucket, topic, tmp_path):
    request = convert_arrival(emulator_stack.storage, bucket, "flaky", tmp_path)
    ps = emulator_stack.pubsub
    dead_letter = topic + "-dl"
    ps.ensure_topic(dead_letter)
    ps.ensure_subscription(dead_letter, dead_letter)
    sub = topic + "-fn"
    ps.ensure_subscription(sub, topic, dead_letter_topic=dead_letter, max_delivery_attempts=5)
    with FakeKubeAPI() as api:
        rt = runtime(emulator_stack, bucket, KubeBackend.for_host(api.host))
        api.fail_next(1, 503)  # the API server is unavailable for the first delivery
        publish(emulator_stack, topic, request)
        attempts: list[int] = []
        outcome = None
        deadline = time.monotonic() + 60
        while outcome is None and time.monotonic() < deadline:
            for m in ps.pull(sub, timeout_s=2.0):
                attempts.append(m.delivery_attempt)
                try:
                    outcome = handle_message(m.data, m.attributes, rt)
                except TemporaryError:
                    ps.nack(sub, [m.ack_id])
                    continue
                ps.ack(sub, [m.ack_id])
        assert outcome == "submitted"  # the first attempt released it, the retry made its TFJob
        assert len(attempts) == 2
        assert api.names() and len(api.names()) == 1

    # An API server that never answers: after 5 deliveries the request is in the dead-letter subscription.
    rt = runtime(emulator_stack, bucket, KubeBackend.for_host("http://127.0.0.1:9"))
    other = convert_arrival(emulator_stack.storage, bucket, "flaky", tmp_path, seed=1)
    publish(emulator_stack, topic, other)
    deadline = time.monotonic() + 90
    dead: list = []
    while time.monotonic() < deadline and not dead:
        for m in ps.pull(sub, timeout_s=1.0):
            with pytest.raises(TemporaryError):
                handle_message(m.data, m.attributes, rt)
            ps.nack(sub, [m.ack_id])
        dead = ps.pull(dead_letter, timeout_s=1.0)
    assert [json.loads(m.data)["request_id"] for m in dead] == [other.request_id]


def test_policies_allow_and_forbid_and_manual_reruns(emulator_stack, bucket, tmp_path):
    storage = emulator_stack.storage
    first = convert_arrival(storage, bucket, "pol", tmp_path)
    second = copy_arrival(storage, first, 1)
    # allow: a job per request, at once.
    allow = runtime(emulator_stack, bucket, LocalBackend(tmp_path / "allow"), concurrency="allow")
    assert [handle_message(r.to_json(), {}, allow) for r in (first, second, first)] == [
        "submitted", "submitted", "duplicate"]
    assert len(allow.backend.list("pol")) == 2
    # forbid: dropped while a job runs, and not kept for later.
    forbid = runtime(emulator_stack, bucket, LocalBackend(tmp_path / "forbid"), concurrency="forbid")
    assert handle_message(first.to_json(), {}, forbid) == "submitted"
    third = copy_arrival(storage, first, 3)
    assert handle_message(third.to_json(), {}, forbid) == "dropped"
    assert len(forbid.backend.list("pol")) == 1 and pending_of(storage, bucket, "pol") == []


def test_a_window_and_manual_reruns(emulator_stack, bucket, tmp_path):
    storage = emulator_stack.storage
    first = convert_arrival(storage, bucket, "win", tmp_path)
    third = copy_arrival(storage, first, 3)
    # coalesce, window 1: the job trains on the newest arrival only (by the listing's generations).
    window = runtime(emulator_stack, bucket, LocalBackend(tmp_path / "window"), window=1)
    assert handle_message(third.to_json(), {}, window) == "submitted"
    (job,) = window.backend.list("win")
    assert inputs_of(storage, job).manifest_uris == [third.manifest]
    # A manual rerun of covered data runs again (a fresh request_id), once.
    set_state(window.backend, jobmeta.name_of(job), "Succeeded")
    manual = TrainingRequest("win", third.manifest, "manual-0001", reason="manual")
    assert handle_message(third.to_json(), {}, window) == "duplicate"
    assert handle_message(manual.to_json(), {}, window) == "submitted"
    assert handle_message(manual.to_json(), {}, window) == "duplicate"
    assert len(window.backend.list("win")) == 2


def test_a_late_redelivery_after_later_jobs_runs_nothing_again(emulator_stack, bucket, backend, tmp_path):
    """Pub/Sub may redeliver a request long after it was handled (an ack lost, a seek). By then the job it
    made ended and was TTL-deleted and later jobs ran, so no job in sight covers it: a manual request's id is
    only in an old job's inputs, and under a window an old arrival's manifest is in no newer job's."""
    storage = emulator_stack.storage
    first = convert_arrival(storage, bucket, "late", tmp_path)
    rt = runtime(emulator_stack, bucket, backend, window=1)
    manual = TrainingRequest("late", first.manifest, "manual-late-1", reason="manual")
    names = []
    for request in (first, manual, "second"):
        if request == "second":  # arrives after the others' jobs, so the window leaves the first out
            request = copy_arrival(storage, first, 2)
        assert handle_message(request.to_json(), {}, rt) == "submitted"
        (made,) = {jobmeta.name_of(j) for j in backend.list("late")} - set(names)
        names.append(made)
        set_state(backend, names[-1], "Succeeded")
    backend.delete(names[0])  # ttlSecondsAfterFinished
    backend.delete(names[1])
    for request in (manual, first, manual):
        assert handle_message(request.to_json(), {}, rt) == "duplicate"
    assert pending_of(storage, bucket, "late") == []
    assert coalesce.reconcile(backend, storage, rt.config) == []
    assert sorted(jobmeta.name_of(j) for j in backend.list("late")) == [names[2]]


def test_racing_consumers_on_a_finished_head_make_one_job(emulator_stack, bucket, tmp_path):
    storage = emulator_stack.storage
    first = convert_arrival(storage, bucket, "race", tmp_path)
    state = tmp_path / "state"
    rt = runtime(emulator_stack, bucket, LocalBackend(state))
    assert handle_message(first.to_json(), {}, rt) == "submitted"
    set_state(rt.backend, jobmeta.name_of(rt.backend.list("race")[0]), "Succeeded")
    arrivals = [copy_arrival(storage, first, k) for k in range(12)]
    barrier = threading.Barrier(12)

    def one(r):
        own = runtime(emulator_stack, bucket, LocalBackend(state))  # a separate instance
        barrier.wait()
        return handle_message(r.to_json(), {}, own)

    with ThreadPoolExecutor(12) as pool:
        outcomes = list(pool.map(one, arrivals))
    assert outcomes.count("submitted") >= 1
    assert set(outcomes) <= {"submitted", "coalesced", "duplicate"}
    jobs = rt.backend.list("race")
    assert sum(not tfjob.is_finished(j) for j in jobs) == 1  # at most one unfinished job, ever
    covered = {r["request_id"] for j in jobs for r in inputs_of(storage, j).requests}
    waiting = set(pending_of(storage, bucket, "race"))
    assert {r.request_id for r in arrivals} <= covered | waiting  # each is in a job, or waits for the next


def test_a_job_created_between_a_consumers_two_reads_is_not_taken_for_deleted(emulator_stack, bucket, backend,
                                                                              tmp_path, monkeypatch):
    # The race CI found: consumer X reads the head TFJob (not there yet), the releaser creates it and marks
    # it submitted, then X reads the marker. Read in that order, X took a job that had just started for one
    # deleted, hence ended, and dropped requests as covered by it or released a second unfinished job.
    storage = emulator_stack.storage
    first = convert_arrival(storage, bucket, "between", tmp_path)
    rt = runtime(emulator_stack, bucket, backend)
    assert handle_message(first.to_json(), {}, rt) == "submitted"
    set_state(backend, jobmeta.name_of(backend.list("between")[0]), "Succeeded")
    second = copy_arrival(storage, first, 1)
    real_create, real_get = backend.create, backend.get

    rendered: list[dict] = []

    def crash(job):
        rendered.append(job)  # what the slow releaser creates later
        raise TemporaryError("the releasing instance is slow: its TFJob is created later")

    monkeypatch.setattr(backend, "create", crash)
    with pytest.raises(TemporaryError):
        handle_message(second.to_json(), {}, rt)  # job 2 released: inputs.json written, no TFJob yet
    monkeypatch.setattr(backend, "create", real_create)
    third = copy_arrival(storage, first, 2)  # arrives after job 2 was released: job 3 must train on it
    ledger = Ledger(storage, bucket, Layout())
    head = ledger.job_name("between", 2)

    def get_while_the_releaser_finishes(name):
        if name == head and not real_get_calls:
            real_get_calls.append(name)
            (job,) = rendered  # the slow releaser finishes its release: the TFJob, then the marker
            real_create(job)
            ledger.mark_submitted(head)
            raise NotFound(f'tfjobs "{name}" not found')  # what X read a moment before
        return real_get(name)

    real_get_calls: list[str] = []
    ledger.add_pending(third)  # X recorded it, then looks whether the head ended
    monkeypatch.setattr(backend, "get", get_while_the_releaser_finishes)
    assert coalesce.advance("between", rt.config, backend, ledger) == coalesce.Advance("active", head)
    assert real_get_calls == [head]
    assert handle_message(third.to_json(), {}, rt) == "coalesced"  # and a redelivery waits too
    jobs = backend.list("between")
    assert [inputs_of(storage, j).seq for j in jobs if not tfjob.is_finished(j)] == [2]
    # Job 3 will train on it (second stays pending too: the slow release has not removed it yet; job 2
    # covers it, so the next release drops it without a job of its own).
    assert set(pending_of(storage, bucket, "between")) == {second.request_id, third.request_id}


def test_a_job_deleted_by_hand_or_by_ttl_counts_as_finished(emulator_stack, bucket, backend, tmp_path):
    storage = emulator_stack.storage
    first = convert_arrival(storage, bucket, "gone", tmp_path)
    rt = runtime(emulator_stack, bucket, backend)
    assert handle_message(first.to_json(), {}, rt) == "submitted"
    (job,) = backend.list("gone")
    backend.delete(jobmeta.name_of(job))  # the TTL controller, or someone with kubectl
    again = copy_arrival(storage, first, 1)
    assert handle_message(again.to_json(), {}, rt) == "submitted"
    (second,) = backend.list("gone")
    assert inputs_of(storage, second).seq == 2 and jobmeta.annotations(second)[jobmeta.AFTER_ANNOTATION] == \
        jobmeta.name_of(job)


def test_a_release_that_crashed_before_its_tfjob_is_completed(emulator_stack, bucket, backend, tmp_path,
                                                              monkeypatch):
    storage = emulator_stack.storage
    first = convert_arrival(storage, bucket, "crash", tmp_path)
    rt = runtime(emulator_stack, bucket, backend)
    real_create = backend.create

    def crash(job):
        raise TemporaryError("the function instance died here")

    monkeypatch.setattr(backend, "create", crash)
    with pytest.raises(TemporaryError):
        handle_message(first.to_json(), {}, rt)
    monkeypatch.setattr(backend, "create", real_create)
    assert backend.list("crash") == []
    assert handle_message(first.to_json(), {}, rt) == "submitted"  # released already: its TFJob is made now
    assert handle_message(first.to_json(), {}, rt) == "duplicate"
    (job,) = backend.list("crash")
    assert inputs_of(storage, job).manifest_uris == [first.manifest]


def test_a_release_that_misses_a_requested_manifest_retries(emulator_stack, bucket, tmp_path):
    """The bucket setting points elsewhere: the listing lacks the request's manifest. No job without data."""
    storage = emulator_stack.storage
    request = convert_arrival(storage, bucket, "miss", tmp_path)
    other = f"{bucket}-other"
    storage.ensure_bucket(other)
    rt = runtime(emulator_stack, other, LocalBackend(tmp_path / "state"))
    with pytest.raises(TemporaryError, match=r"lacks|no manifest"):
        coalesce.submit(request, rt.config, rt.backend, storage, rt.layout)
    assert rt.backend.list() == []
