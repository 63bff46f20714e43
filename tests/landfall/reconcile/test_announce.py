"""Every finished job yields exactly one ``landfall.result/v1`` message, against the Pub/Sub emulator: the chief
announces what it finished, the reconciler the jobs that ended without a chief to do so (Failed, or a chief
that died before publishing), and neither a second chief attempt nor reconciler restarts send it again."""

from __future__ import annotations

import json
import threading

from landfall.core.artifacts import results
from landfall.reconcile import announce, loop
from landfall.submit import jobmeta
from landfall.submit.backends.local import LocalBackend
from landfall.submit.handler import handle_message
from tests.conftest import pull_all, unique
from tests.support import convert_arrival, runtime, set_state


def _job(emulator_stack, bucket, backend, rt, tmp_path, dataset: str) -> tuple[str, str]:
    request = convert_arrival(emulator_stack.storage, bucket, dataset, tmp_path, n=8)
    assert handle_message(request.to_json(), {}, rt) == "submitted"
    (job,) = backend.list(dataset)
    name = jobmeta.name_of(job)
    return name, jobmeta.job_dir(bucket, name)


def test_one_result_per_finished_job_under_restarts_and_redelivery(emulator_stack, bucket, tmp_path, monkeypatch):
    storage, pubsub = emulator_stack.storage, emulator_stack.pubsub
    topic = unique("results")
    pubsub.ensure_topic(topic)
    pubsub.ensure_subscription(topic, topic)
    backend = LocalBackend(tmp_path / "state")
    rt = runtime(emulator_stack, bucket, backend, results_topic=topic)
    jobs = {ds: _job(emulator_stack, bucket, backend, rt, tmp_path, ds)
            for ds in ("ok", "failed", "died", "crashed", "running")}

    # ok: succeeded, and its chief announced it (twice: a second attempt of the chief sends nothing).
    name, job_dir = jobs["ok"]
    doc = {"job": name, "dataset": "ok", "status": "succeeded", "verdict": "promoted", "challenger_loss": 0.1,
           "model": job_dir + "/model", "champion": job_dir + "/model"}
    storage.write_bytes(job_dir + "/metrics.json", json.dumps(doc).encode())
    for _ in range(2):
        message = results.from_metrics(doc, job=name, dataset="ok", status="succeeded", inputs_uri=None,
                                       storage=storage, published_by="chief")
        results.announce(storage, pubsub, topic, job_dir, message)
    set_state(backend, name, "Succeeded")
    # failed: its retries ran out (the chief's last failure was retryable, so it sent nothing).
    name, job_dir = jobs["failed"]
    storage.write_bytes(job_dir + "/metrics.json", json.dumps(
        {"job": name, "status": "failed", "error": "storage unreachable", "retryable": True}).encode())
    set_state(backend, name, "Failed")
    # died: failed before writing anything.
    set_state(backend, jobs["died"][0], "Failed")
    # crashed: the chief created the marker, then died before publishing: its message is the one sent.
    name, job_dir = jobs["crashed"]
    chief = results.Result(dataset="crashed", job=name, status="succeeded", verdict="kept_champion",
                           challenger_loss=2.0, champion_loss=1.0, published_by="chief")
    storage.write_bytes(job_dir + "/result.json", json.dumps(
        {"message": json.loads(chief.to_json()), "published_at": None, "message_id": None}).encode())
    set_state(backend, name, "Succeeded")
    set_state(backend, jobs["running"][0], "Running")

    # Three reconcilers in a row (restarts), then the loop itself for a few passes.
    sent = []
    for _ in range(3):
        sent += announce.announce_finished(LocalBackend(tmp_path / "state"), storage, pubsub, rt.config)
    assert sorted(sent) == sorted(jobs[d][0] for d in ("failed", "died", "crashed"))
    monkeypatch.setattr(loop, "MIN_POLL_S", 0.05)
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(rt.config, storage, backend, stop, 0.05, None, pubsub))
    thread.start()
    stop.wait(0.5)
    stop.set()
    thread.join(10)

    got = pull_all(pubsub, topic, timeout_s=6.0)
    by_job = {}
    for m in got:
        r = results.Result.from_json(m.data)
        assert r.job not in by_job, f"{r.job} announced twice"
        by_job[r.job] = r
    assert set(by_job) == {jobs[d][0] for d in ("ok", "failed", "died", "crashed")}
    ok, failed, died, crashed = (by_job[jobs[d][0]] for d in ("ok", "failed", "died", "crashed"))
    assert (ok.status, ok.verdict, ok.published_by) == ("succeeded", "promoted", "chief")
    assert (failed.status, failed.verdict, failed.error, failed.published_by) == (
        "failed", "not_evaluated", "storage unreachable", "reconciler")
    assert failed.arrivals["count"] == 1 and failed.arrivals["inputs"].endswith("/inputs.json")
    assert (died.status, died.dataset, died.published_by) == ("failed", "died", "reconciler")
    assert (crashed.verdict, crashed.champion_loss, crashed.published_by) == ("kept_champion", 1.0, "chief")

    # The running one is announced once it ends, and only once.
    set_state(backend, jobs["running"][0], "Failed")
    for _ in range(2):
        announce.announce_finished(backend, storage, pubsub, rt.config)
    (last,) = pull_all(pubsub, topic, timeout_s=6.0)
    assert results.Result.from_json(last.data).job == jobs["running"][0]


def test_a_jobset_that_failed_without_a_chief_is_announced_once(emulator_stack, bucket, tmp_path) -> None:
    """The reconciler reads JobSets as it reads TFJobs (LANDFALL_ENGINE=jobset): Failed with JobSet's
    condition, no result.json -> one failed result, with JobSet's message as the error."""
    storage, pubsub = emulator_stack.storage, emulator_stack.pubsub
    topic = unique("results")
    pubsub.ensure_topic(topic)
    pubsub.ensure_subscription(topic, topic)
    backend = LocalBackend(tmp_path / "state", engine_name="jobset")
    rt = runtime(emulator_stack, bucket, backend, results_topic=topic, engine="jobset")
    name, _ = _job(emulator_stack, bucket, backend, rt, tmp_path, "js")
    assert backend.get(name)["kind"] == "JobSet"
    assert announce.announce_finished(backend, storage, pubsub, rt.config) == []  # not finished yet
    backend.patch_status(name, {"terminalState": "Failed", "conditions": [{
        "type": "Failed", "status": "True", "reason": "FailJobSetFailurePolicyAction",
        "message": f"applying FailJobSet failure policy action (first failed job: {name}-worker-0)",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
    for _ in range(2):
        announce.announce_finished(backend, storage, pubsub, rt.config)
    (m,) = pull_all(pubsub, topic, timeout_s=6.0)
    r = results.Result.from_json(m.data)
    assert (r.job, r.status, r.published_by) == (name, "failed", "reconciler")
    assert "FailJobSet" in r.error


def test_a_job_that_ended_without_a_chief_is_announced_with_its_estimated_cost(emulator_stack, bucket, tmp_path):
    """No ``metrics.json`` gpu_seconds: the reconciler estimates from the job's start and end times and resources
    (2 workers x 1 GPU for 600 s), and says so (``cost_basis: job_object``)."""
    storage, pubsub = emulator_stack.storage, emulator_stack.pubsub
    topic = unique("results")
    pubsub.ensure_topic(topic)
    pubsub.ensure_subscription(topic, topic)
    backend = LocalBackend(tmp_path / "state")
    rt = runtime(emulator_stack, bucket, backend, results_topic=topic, workers=2, gpus_per_worker=1,
                 accelerator="nvidia-l4")
    name, _ = _job(emulator_stack, bucket, backend, rt, tmp_path, "costly")
    failed = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "pods killed",
              "lastTransitionTime": "2026-01-01T00:10:00Z"}
    backend.patch_status(name, {"startTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T00:10:00Z",
                                "conditions": [failed]})
    assert announce.announce_finished(backend, storage, pubsub, rt.config) == [name]
    (m,) = pull_all(pubsub, topic, timeout_s=6.0)
    r = results.Result.from_json(m.data)
    assert (r.gpu_seconds, r.accelerator, r.cost_basis) == (1200.0, "nvidia-l4", "job_object")
    assert r.estimated_cost == round(1200 / 3600 * 0.56, 6)
    # A message from before the cost fields existed still decodes (they are None).
    old = {k: v for k, v in json.loads(m.data).items()
           if k not in ("gpu_seconds", "accelerator", "estimated_cost", "cost_basis")}
    assert results.Result.from_json(json.dumps(old)).gpu_seconds is None
