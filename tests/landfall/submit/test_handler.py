"""The submit stage against the real Pub/Sub and Cloud Storage emulators, on both backends.

Requests travel through a real Pub/Sub subscription (publish, pull, handle, ack or nack), manifests are
written by the real converter, and the ``kubernetes`` backend talks to the fake TFJob API server.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from landfall.core import layout
from landfall.core.errors import TemporaryError
from landfall.core.messages import TrainingRequest
from landfall.submit import tfjob
from landfall.submit.backends.kubernetes import KubeBackend
from landfall.submit.backends.local import LocalBackend
from landfall.submit.handler import handle_message
from tests.fakes.kube_api import FakeKubeAPI
from tests.support import consume, convert_arrival, copy_arrival, publish, runtime, set_state, twin


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
    assert tfjob.manifests_of(job) == [request.manifest]
    assert tfjob.is_suspended(job) is False
    assert job["metadata"]["labels"][tfjob.REQUEST_LABEL] == request.request_id


def test_a_burst_of_50_while_a_job_runs_makes_exactly_one_follow_up(emulator_stack, bucket, topic, backend,
                                                                      tmp_path):
    storage = emulator_stack.storage
    first = convert_arrival(storage, bucket, "burst", tmp_path)
    rt = runtime(emulator_stack, bucket, backend)
    assert handle_message(first.to_json(), {}, rt) == "submitted"
    (active,) = backend.list("burst")
    set_state(backend, tfjob.name_of(active), "Running")

    burst = [copy_arrival(storage, first, k) for k in range(50)]
    for r in burst:
        publish(emulator_stack, topic, r)
    # Several consumer instances at once, each with its own runtime and backend client (stateless, no shared
    # memory: they meet only in the backend's store and the bucket).
    outcomes = consume(emulator_stack, topic, lambda: runtime(emulator_stack, bucket, twin(backend)), expect=50,
                       workers=8)
    assert outcomes == ["coalesced"] * 50
    jobs = backend.list("burst")
    assert len(jobs) == 2
    (follow,) = [j for j in jobs if tfjob.name_of(j) != tfjob.name_of(active)]
    assert tfjob.is_suspended(follow) and tfjob.annotations(follow)[tfjob.AFTER_ANNOTATION] == tfjob.name_of(active)
    assert {r["request_id"] for r in tfjob.requests_of(follow)} >= {r.request_id for r in burst}

    # Duplicates of the burst while the follow-up waits: still nothing new.
    assert handle_message(burst[7].to_json(), {}, rt) == "duplicate"
    assert len(backend.list("burst")) == 2

    # The active job ends; the next request (or a reconcile) releases the follow-up, which trains on all.
    set_state(backend, tfjob.name_of(active), "Succeeded")
    late = copy_arrival(storage, first, 99)
    assert handle_message(late.to_json(), {}, rt) == "duplicate"  # released first, the late one is in it
    follow = backend.get(tfjob.name_of(follow))
    assert not tfjob.is_suspended(follow)
    manifests = set(tfjob.manifests_of(follow))
    assert {r.manifest for r in burst} <= manifests and late.manifest in manifests and first.manifest in manifests
    args = follow["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["args"]
    assert args.count("--manifest") == 52
    # Redelivering any of them now changes nothing.
    assert {handle_message(r.to_json(), {}, rt) for r in burst[:5]} == {"duplicate"}
    assert len(backend.list("burst")) == 2


def test_two_datasets_in_parallel_never_block_each_other(emulator_stack, bucket, topic, backend, tmp_path):
    storage = emulator_stack.storage
    a, b = (convert_arrival(storage, bucket, ds, tmp_path, seed=i) for i, ds in enumerate(("alpha", "beta")))
    for r in (a, b):
        publish(emulator_stack, topic, r)
    rt = runtime(emulator_stack, bucket, backend)
    assert sorted(consume(emulator_stack, topic, rt, expect=2, workers=2)) == ["submitted", "submitted"]
    set_state(backend, tfjob.name_of(backend.list("alpha")[0]), "Running")
    # alpha is busy: its next arrival waits; beta's first job finished: beta's next arrival starts at once.
    (beta_first,) = backend.list("beta")
    set_state(backend, tfjob.name_of(beta_first), "Succeeded")
    a2, b2 = copy_arrival(storage, a, 1), copy_arrival(storage, b, 1)
    for r in (a2, b2):
        publish(emulator_stack, topic, r)
    assert sorted(consume(emulator_stack, topic, rt, expect=2, workers=2)) == ["coalesced", "submitted"]
    assert sorted(tfjob.state(j) for j in backend.list("alpha")) == ["Running", "Suspended"]
    beta = backend.list("beta")
    (beta_next,) = [j for j in beta if tfjob.name_of(j) != tfjob.name_of(beta_first)]
    assert len(beta) == 2 and not tfjob.is_suspended(beta_next)
    assert set(tfjob.manifests_of(beta_next)) == {b.manifest, b2.manifest}


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
        assert outcome == "submitted"
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
    # forbid: dropped while a job runs.
    forbid = runtime(emulator_stack, bucket, LocalBackend(tmp_path / "forbid"), concurrency="forbid")
    assert handle_message(first.to_json(), {}, forbid) == "submitted"
    third = copy_arrival(storage, first, 3)
    assert handle_message(third.to_json(), {}, forbid) == "dropped"
    assert len(forbid.backend.list("pol")) == 1
    # coalesce, window 1: the job trains on the newest arrival only.
    window = runtime(emulator_stack, bucket, LocalBackend(tmp_path / "window"), window=1)
    assert handle_message(third.to_json(), {}, window) == "submitted"
    (job,) = window.backend.list("pol")
    assert tfjob.manifests_of(job) == [third.manifest]
    # A manual rerun of covered data runs again (a fresh request_id), once.
    set_state(window.backend, tfjob.name_of(job), "Succeeded")
    manual = TrainingRequest("pol", third.manifest, "manual-0001", reason="manual")
    assert handle_message(third.to_json(), {}, window) == "duplicate"
    assert handle_message(manual.to_json(), {}, window) == "submitted"
    assert handle_message(manual.to_json(), {}, window) == "duplicate"
    assert len(window.backend.list("pol")) == 2


def test_racing_consumers_on_a_finished_head_make_one_job(emulator_stack, bucket, tmp_path):
    storage = emulator_stack.storage
    first = convert_arrival(storage, bucket, "race", tmp_path)
    state = tmp_path / "state"
    rt = runtime(emulator_stack, bucket, LocalBackend(state))
    assert handle_message(first.to_json(), {}, rt) == "submitted"
    set_state(rt.backend, tfjob.name_of(rt.backend.list("race")[0]), "Succeeded")
    arrivals = [copy_arrival(storage, first, k) for k in range(12)]
    barrier = threading.Barrier(12)

    def one(r):
        own = runtime(emulator_stack, bucket, LocalBackend(state))  # a separate instance
        barrier.wait()
        return handle_message(r.to_json(), {}, own)

    with ThreadPoolExecutor(12) as pool:
        outcomes = list(pool.map(one, arrivals))
    assert outcomes.count("submitted") == 1
    assert set(outcomes) <= {"submitted", "coalesced", "duplicate"}
    # Every manifest existed before the race, so the one next job resolves them all: no follow-up is needed.
    (job,) = [j for j in rt.backend.list("race") if tfjob.annotations(j).get(tfjob.AFTER_ANNOTATION)]
    assert not tfjob.is_suspended(job)
    assert {r.manifest for r in arrivals} <= set(tfjob.manifests_of(job))
