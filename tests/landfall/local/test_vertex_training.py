"""The trainer, unchanged, as a Vertex AI CustomJob (issue #57): a request goes through the submit stage to the
``customjobs`` backend (Google's client) and the stand-in JobService runs its replicas as local processes with
``TF_CONFIG`` as Vertex AI sets it (pool 0 the chief, pool 1 a worker).

Worker 1's VM is lost after epoch 1, without notice (SIGKILL): the service restarts the worker, and with
``restartJobOnWorkerRestart`` every replica, which resume at the next epoch from the backup. Then its Spot VM is
reclaimed mid-epoch, with Compute Engine's notice (SIGTERM, SIGKILL 30 s later): the trainer finishes the epoch in
progress and saves it, and the third attempt resumes at the next epoch. No epoch is trained twice; the job ends
``SUCCEEDED`` with early stopping before the ceiling, and the chief's metrics are in the bucket as on any engine."""

from __future__ import annotations

import json
import os
import time

from landfall.core.contracts.layout import Layout
from landfall.core.runtime import Runtime
from landfall.local.vertex_server import VertexServer
from landfall.submit import engine, jobmeta, vertex
from landfall.submit.backends.aiplatform import VertexJobs
from landfall.submit.backends.customjobs import VertexBackend
from landfall.submit.config import JobConfig
from landfall.submit.handler import handle_message
from tests.landfall.local.test_operator import CEILING, CONVERGING, read_metrics
from tests.support import convert_arrival


def _diagnose(server: VertexServer, tmp_path) -> str:
    out = []
    for log in sorted((tmp_path / "replicas").rglob("*.log")):
        out.append(f"--- {log.name}\n" + log.read_text()[-3000:])
    return "\n".join(out) + "\n" + json.dumps(list(server.jobs.values()), default=str)[-2000:]


def test_a_custom_job_trains_and_resumes_after_a_lost_vm_and_a_reclaimed_spot_vm(emulator_stack, bucket, tmp_path):
    storage = emulator_stack.storage
    request = convert_arrival(storage, bucket, "train", tmp_path, n=512)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    server = VertexServer(replicas_dir=tmp_path / "replicas", env=env, poll_s=0.1).start()
    try:
        backend = VertexBackend(VertexJobs(emulator_stack.project, "us-central1", server.url))
        config = JobConfig.load({}, bucket=bucket, project=emulator_stack.project, gpus_per_worker=0, engine="vertex",
                                backend="customjobs", capacity="spot", vertex_endpoint=server.url, epochs=CEILING,
                                batch_size_per_worker=32, trainer_args=CONVERGING)
        rt = Runtime(config, Layout(), storage, backend=backend)
        assert handle_message(request.to_json(), {}, rt) == "submitted"
        (job,) = backend.list("train")
        assert job["kind"] == "CustomJob" and len(server.jobs) == 1
        name, resource = jobmeta.name_of(job), job["status"]["resource"]
        assert job["spec"]["jobSpec"]["scheduling"]["strategy"] == "SPOT"
        metrics_uri = f"gs://{bucket}/runs/{name}/metrics.json"
        deadline = time.monotonic() + 300
        lost = reclaimed = False
        while not engine.is_finished(job := backend.get(name)):
            assert time.monotonic() < deadline, _diagnose(server, tmp_path)
            epochs = read_metrics(storage, metrics_uri).get("epochs", [])
            if not lost and len(epochs) >= 1 and server.replicas_of(resource):
                time.sleep(0.4)  # into epoch 2
                server.preempt(resource, 1, 0, notice_s=0.0)  # the VM is gone: no notice
                lost = True
            elif lost and not reclaimed and server.restarts_of(resource) == 1 and any(
                    e.get("attempt") == 2 for e in epochs) and server.replicas_of(resource):
                time.sleep(0.4)  # mid-epoch
                server.preempt(resource, 1, 0)  # a Spot VM reclaimed: SIGTERM, SIGKILL 30 s later
                reclaimed = True
            time.sleep(0.2)
        assert vertex.state(job) == "Succeeded", _diagnose(server, tmp_path)
        assert server.restarts_of(resource) == 2
    finally:
        server.stop()
    metrics = read_metrics(storage, metrics_uri)
    assert metrics["status"] == "succeeded" and metrics["num_workers"] == 2, metrics
    run = metrics["epochs_run"]
    assert [e["epoch"] for e in metrics["epochs"]] == list(range(1, run + 1))  # no epoch trained twice
    assert 2 <= run < CEILING and metrics["stopped_early"] is True
    attempts = [e["attempt"] for e in metrics["epochs"]]
    assert attempts == sorted(attempts) and set(attempts) == {1, 2, 3}, attempts
    (notice,) = metrics["preemptions"]  # the reclaimed Spot VM: the epoch in progress finished and saved
    assert (notice["attempt"], notice["worker"], notice["steps_lost"]) == (2, 1, 0)
    logs = sorted((tmp_path / "replicas").rglob("workerpool1-0.log"))
    text = logs[0].read_text()
    assert text.count("resuming at epoch") == 2 and "from the backup checkpoint" in text
