"""The managed engine's backend (``landfall.submit.backends.customjobs``) through Google's own ``JobServiceClient``
(REST transport) against the stand-in JobService (``landfall.local.vertex_server``), which answers and fails as the
service does by its published rules: a released job becomes exactly one CustomJob, found again by its name, its
metadata read back whole; the service's errors arrive with their retry class; the job states move only as the
service moves them."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.error
import urllib.request
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from landfall.core.errors import AccessDenied, AlreadyExists, Invalid, NotFound, TemporaryError
from landfall.core.services.storage import Storage
from landfall.local.vertex_server import VertexServer
from landfall.submit import jobmeta, vertex
from landfall.submit.backends.aiplatform import VertexJobs
from landfall.submit.backends.customjobs import VertexBackend
from landfall.submit.config import JobConfig

BUCKET: list[str] = []  # this test's bucket (the ``server`` fixture sets it)


@pytest.fixture()
def server(emulator_stack, bucket):
    BUCKET[:] = [bucket]
    fake = VertexServer().start()
    yield fake
    fake.stop()


def backend_of(server: VertexServer) -> VertexBackend:
    return VertexBackend(VertexJobs("proj-1", "europe-west4", server.url), Storage("proj-1"))


def released(dataset: str = "Pumps.North", request: str = "req-1", key: str = "k") -> dict:
    cfg = JobConfig.load({}, bucket=BUCKET[0], project="proj-1", region="europe-west4", workers=3,
                         trainer_image="trainer:v1", engine="vertex", backend="customjobs")
    name = jobmeta.job_name(dataset, key)
    return vertex.render(cfg, name=name, dataset=dataset, request_id=request,
                         inputs_uri=f"gs://{BUCKET[0]}/runs/{name}/inputs.json", after="prev-job",
                         released_at="2026-12-05T20:00:00.000Z")


def test_a_released_job_is_one_custom_job_found_again_by_its_name(server):
    backend, job = backend_of(server), released()
    name = jobmeta.name_of(job)
    created = backend.create(job)
    assert vertex.state(created) == "Suspended" and created["status"]["state"] == "JOB_STATE_QUEUED"
    assert created["status"]["resource"].startswith("projects/proj-1/locations/europe-west4/customJobs/")
    with pytest.raises(AlreadyExists):
        backend.create(job)  # a retried release finds its job
    assert len(server.jobs) == 1
    found = backend.get(name)
    assert found["metadata"]["labels"] == job["metadata"]["labels"]  # read back whole, upper case and dots kept
    assert jobmeta.annotations(found)[jobmeta.AFTER_ANNOTATION] == "prev-job"
    assert jobmeta.inputs_of(found) == jobmeta.inputs_of(job)
    assert vertex.workers_of(found) == 3 and jobmeta.bucket_in(vertex.containers_of(found)) == BUCKET[0]
    assert [jobmeta.name_of(j) for j in backend.list("Pumps.North")] == [name]
    assert backend.list("Pumps.South") == [] and len(backend.list()) == 1
    with pytest.raises(NotFound):
        backend.get(jobmeta.job_name("Pumps.North", "other"))


def test_states_move_as_the_service_moves_them_and_the_readers_follow(server):
    backend, job = backend_of(server), released()
    name = jobmeta.name_of(job)
    resource = backend.create(job)["status"]["resource"]
    seen = []
    for state in ("JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_FAILED"):
        server.advance(resource, state, error="replica workerpool0-0 exited with code 1" if "FAILED" in state else None)
        seen.append(vertex.state(backend.get(name)))
    assert seen == ["Created", "Running", "Failed"]
    assert vertex.conditions(backend.get(name))[0]["message"] == "replica workerpool0-0 exited with code 1"
    with pytest.raises(ValueError, match="JOB_STATE_FAILED never moves to JOB_STATE_RUNNING"):
        server.advance(resource, "JOB_STATE_RUNNING")


def test_delete_cancels_a_running_job_and_removes_an_ended_one(server):
    backend, job = backend_of(server), released()
    name = jobmeta.name_of(job)
    resource = backend.create(job)["status"]["resource"]
    server.advance(resource, "JOB_STATE_PENDING")
    backend.delete(name)
    assert server.jobs[resource]["state"] == "JOB_STATE_CANCELLED" and vertex.is_finished(backend.get(name))
    backend.delete(name)
    assert server.jobs == {}
    with pytest.raises(NotFound):
        backend.delete(name)
    with pytest.raises(Invalid, match="cannot be changed once created"):
        backend.patch(name, {"spec": {}})


def test_the_services_errors_arrive_with_their_retry_class(server):
    backend = backend_of(server)
    server.quota = {"NVIDIA_L4": 4}  # three replicas of one L4 fit; a second job does not
    backend.create(released(key="a"))
    with pytest.raises(TemporaryError, match="custom_model_training_nvidia_l4_gpus"):
        backend.create(released(key="b"))
    server.quota = {}
    server.denied = True
    with pytest.raises(AccessDenied, match=r"aiplatform\.customJobs\.create"):
        backend.create(released(key="c"))
    server.denied = False
    jobs = VertexJobs("proj-1", "europe-west4", server.url)
    body = released(key="d")["spec"]
    body["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["machineType"] = "n1-standard-8"  # no L4 on N1
    with pytest.raises(Invalid, match="1 x NVIDIA_L4 cannot attach to n1-standard-8"):
        jobs.create(body)
    with pytest.raises(ValueError, match='no field named "workerPools"'):
        jobs.create({**body, "workerPools": []})  # refused by the client's own message, before sending


def test_the_stand_in_refuses_what_the_api_refuses_over_http(server):
    """Straight to the stand-in, past the client: its answers are Google's error shape."""
    def post(body: dict) -> tuple[int, dict]:
        request = urllib.request.Request(f"{server.url}/v1/projects/p/locations/l/customJobs",
                                         data=json.dumps(body).encode(), method="POST")
        try:
            with urllib.request.urlopen(request) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    good = released()["spec"]
    assert post(good)[0] == 200
    code, doc = post({**good, "workerPools": []})
    assert code == 400 and doc["error"]["status"] == "INVALID_ARGUMENT" and "workerPools" in doc["error"]["message"]
    code, doc = post({"jobSpec": good["jobSpec"]})
    assert (code, doc["error"]["message"]) == (400, "displayName is required")
    two_chiefs = json.loads(json.dumps(good))
    two_chiefs["jobSpec"]["workerPoolSpecs"][0]["replicaCount"] = "2"
    assert post(two_chiefs)[0] == 400
    bad_label = {**good, "labels": {"Landfall.dev/dataset": "x"}}
    assert post(bad_label)[0] == 400


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=st.permutations(list(range(6))), repeats=st.lists(st.integers(0, 5), max_size=6))
def test_duplicated_and_reordered_releases_make_one_custom_job_each(server, order, repeats):
    """Each release (a job name) delivered in any order, some more than once: exactly one CustomJob per name."""
    server.jobs.clear()
    backend = backend_of(server)
    run = uuid.uuid4().hex[:6]  # this example's own job names: its claims are its own
    for i in [*order, *repeats]:
        with contextlib.suppress(AlreadyExists):
            backend.create(released(key=f"{run}-{i}"))
    names = sorted(j["displayName"] for j in server.jobs.values())
    assert names == sorted({jobmeta.job_name("Pumps.North", f"{run}-{i}") for i in range(6)})


def test_two_submitters_racing_make_one_custom_job_and_a_crashed_claim_is_taken_over(server):
    """The service has no create-only name: the create-only claim in the job's directory makes one creator."""
    job = released(key="race")
    name = jobmeta.name_of(job)
    outcomes: list[str] = []
    barrier = threading.Barrier(4)

    def submit() -> None:
        backend = backend_of(server)
        barrier.wait()
        try:
            backend.create(job)
            outcomes.append("created")
        except (AlreadyExists, TemporaryError) as exc:
            outcomes.append(type(exc).__name__)

    threads = [threading.Thread(target=submit) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("created") == 1 and len(outcomes) == 4, outcomes
    assert [j["displayName"] for j in server.jobs.values()] == [name]
    # A claim whose creator crashed before creating (no job after the grace): the next submitter takes it over.
    crashed = released(key="crashed")
    job_dir = f"gs://{BUCKET[0]}/runs/{jobmeta.name_of(crashed)}"
    storage = Storage("proj-1")
    storage.write_bytes(f"{job_dir}/customjob.json", json.dumps({"claimed_at": 0}).encode())
    created = backend_of(server).create(crashed)
    assert created["metadata"]["name"] == jobmeta.name_of(crashed)
    fresh = released(key="in-flight")
    storage.write_bytes(f"gs://{BUCKET[0]}/runs/{jobmeta.name_of(fresh)}/customjob.json",
                        json.dumps({"claimed_at": time.time()}).encode())
    with pytest.raises(TemporaryError, match="another submitter is creating it"):
        backend_of(server).create(fresh)


def test_a_failed_custom_job_is_one_clear_line_in_status_and_its_reason_in_the_reader(server, tmp_path, capsys):
    """A job that fails for good: ``landfall status`` says why in the service's words, and so does the read model
    ``trace`` asks (``views.reader.Reader.job_failure``)."""
    from landfall.cli import status
    from landfall.core.contracts.layout import Layout
    from landfall.views.reader import Reader

    backend, job = backend_of(server), released(dataset="pumps")
    name = jobmeta.name_of(job)
    resource = backend.create(job)["status"]["resource"]
    server.advance(resource, "JOB_STATE_PENDING")
    server.advance(resource, "JOB_STATE_RUNNING")
    server.advance(resource, "JOB_STATE_FAILED", error="The replica workerpool1-0 exited with a non-zero status of 1.")
    cfg = JobConfig.load({}, bucket=BUCKET[0], project="proj-1", engine="vertex", backend="customjobs")
    shown = status.collect(cfg, Storage("proj-1"), backend, "pumps")
    (row,) = shown["jobs"]
    assert (row["name"], row["state"]) == (name, "Failed")
    assert row["failure"] == "The replica workerpool1-0 exited with a non-zero status of 1."
    assert "  failed: The replica workerpool1-0 exited with a non-zero status of 1." in status.job_lines(row)
    assert Reader(Storage("proj-1"), BUCKET[0], Layout(), backend).job_failure(name) == row["failure"]


@pytest.mark.parametrize("carried", ["not json", "[1, 2]", '{"name": 7, "labels": "x"}', '"a string"'])
def test_a_custom_job_whose_carried_metadata_is_not_ours_is_read_by_its_display_name(server, carried):
    """Valid JSON of the wrong type, or no JSON, in the metadata variable (a job someone else labelled as
    Landfall's): the listing still reads, by the job's display name."""
    body = released(key="foreign")["spec"]
    for pool in body["jobSpec"]["workerPoolSpecs"]:
        pool["containerSpec"]["env"] = [{"name": "LANDFALL_JOB_METADATA", "value": carried}]
    VertexJobs("proj-1", "europe-west4", server.url).create(body)
    (job,) = backend_of(server).list()
    assert job["metadata"]["name"] == body["displayName"] and job["metadata"]["labels"] == {}


def test_the_stand_in_answers_a_body_that_is_not_a_json_object_with_400(server):
    for data in (b"{not json", b"[1, 2]"):
        request = urllib.request.Request(f"{server.url}/v1/projects/p/locations/l/customJobs", data=data,
                                         method="POST")
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request)
        assert caught.value.code == 400
        assert json.loads(caught.value.read())["error"]["status"] == "INVALID_ARGUMENT"
