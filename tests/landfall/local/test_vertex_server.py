"""The stand-in JobService runs each replica of a CustomJob as a local process (``landfall.local.vertex_server``),
with what Vertex AI gives a replica (``TF_CONFIG``, ``CLUSTER_SPEC``, the ``AIP_*`` directories), and ends the job
as the service does: the primary replica reports for the job, any replica's non-zero exit fails it, the timeout
fails it, a cancel stops its replicas. Replicas here are small Python programs; the trainer itself runs in
tests/landfall/local/test_vertex_training.py."""

from __future__ import annotations

import json
import time

import pytest

from landfall.local.vertex_server import VertexServer
from landfall.submit.backends.aiplatform import VertexJobs
from trainer.training.cluster import Cluster

PARENT = "projects/p/locations/l"
# Each replica writes what it was given, then sleeps (a worker) or exits with its pool's code.
SCRIPT = """
import json, os, sys, time
task = json.loads(os.environ["TF_CONFIG"])["task"]
out = os.path.join(os.environ["OUT"], f"{task['type']}-{task['index']}.json")
json.dump({k: os.environ.get(k) for k in ("TF_CONFIG", "CLUSTER_SPEC", "AIP_MODEL_DIR", "MINE")}, open(out, "w"))
if task["type"] == "worker" and os.environ.get("WORKER_EXIT"):
    sys.exit(int(os.environ["WORKER_EXIT"]))
time.sleep(float(os.environ.get("SLEEP_" + task["type"].upper(), "0")))
"""


def body(out, workers: int = 2, timeout: int = 3600, **env) -> dict:
    container = {"imageUri": "trainer:v1", "command": ["python", "-c", SCRIPT],
                 "env": [{"name": "OUT", "value": str(out)}, {"name": "MINE", "value": "kept"},
                         *({"name": k, "value": str(v)} for k, v in env.items())]}
    pools = [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1", "containerSpec": container}]
    if workers:
        pools.append({"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": str(workers),
                      "containerSpec": container})
    return {"displayName": "j", "jobSpec": {"workerPoolSpecs": pools, "scheduling": {"timeout": f"{timeout}s"},
                                            "baseOutputDirectory": {"outputUriPrefix": "gs://b/runs/j"}}}


@pytest.fixture()
def server(tmp_path):
    fake = VertexServer(replicas_dir=tmp_path / "replicas", poll_s=0.05).start()
    yield fake
    fake.stop()


def ended(server: VertexServer, name: str, timeout_s: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = server.get(name)
        if job["state"] in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"{name} still {server.get(name)['state']}")


def test_each_replica_gets_what_vertex_gives_and_the_primary_ends_the_job(server, tmp_path):
    jobs = VertexJobs("p", "l", server.url)
    name = jobs.create(body(tmp_path, SLEEP_WORKER=60))["name"]
    job = ended(server, name)
    assert job["state"] == "JOB_STATE_SUCCEEDED" and "startTime" in job and "endTime" in job
    seen = {p.stem: json.loads(p.read_text()) for p in tmp_path.glob("*.json")}
    assert sorted(seen) == ["chief-0", "worker-0", "worker-1"]
    positions = sorted((Cluster.from_env({"TF_CONFIG": s["TF_CONFIG"]}).worker_index, k) for k, s in seen.items())
    assert positions == [(0, "chief-0"), (1, "worker-0"), (2, "worker-1")]
    spec = json.loads(seen["worker-1"]["CLUSTER_SPEC"])
    assert spec["task"] == {"type": "workerpool1", "index": 1} and len(spec["cluster"]["workerpool1"]) == 2
    assert seen["chief-0"]["AIP_MODEL_DIR"] == "gs://b/runs/j/model" and seen["chief-0"]["MINE"] == "kept"
    assert server.replicas_of(name) == []  # the sleeping workers were stopped when the primary ended the job
    logs = sorted(p.name for p in (tmp_path / "replicas" / name.rsplit("/", 1)[-1]).glob("workerpool*.log"))
    assert logs == ["workerpool0-0.log", "workerpool1-0.log", "workerpool1-1.log"]


def test_a_replica_that_exits_non_zero_fails_the_job_with_the_services_words(server, tmp_path):
    jobs = VertexJobs("p", "l", server.url)
    name = jobs.create(body(tmp_path, SLEEP_CHIEF=60, WORKER_EXIT=3))["name"]
    job = ended(server, name)
    assert job["state"] == "JOB_STATE_FAILED"
    assert job["error"]["message"] in (f"The replica workerpool1-{i} exited with a non-zero status of 3."
                                       for i in (0, 1))


def test_the_timeout_fails_the_job_and_a_cancel_stops_its_replicas(server, tmp_path):
    jobs = VertexJobs("p", "l", server.url)
    slow = jobs.create(body(tmp_path, workers=0, timeout=1, SLEEP_CHIEF=60))["name"]
    job = ended(server, slow)
    assert (job["state"], job["error"]["message"]) == ("JOB_STATE_FAILED", "Job exceeded its timeout of 1 s.")
    (tmp_path / "x").mkdir()
    other = jobs.create(body(tmp_path / "x", workers=1, SLEEP_CHIEF=60, SLEEP_WORKER=60))["name"]
    deadline = time.monotonic() + 20
    while server.get(other)["state"] != "JOB_STATE_RUNNING" and time.monotonic() < deadline:
        time.sleep(0.05)
    running = server.replicas_of(other)
    assert len(running) == 2 and all(r.proc.poll() is None for r in running)
    jobs.cancel(other)
    assert server.get(other)["state"] == "JOB_STATE_CANCELLED" and server.replicas_of(other) == []
    assert all(r.proc.poll() is not None for r in running)
