"""The local operator plays Cloud Run (``landfall.local.executions``): executions recorded by ``LocalJobs`` run as
one process per task with Cloud Run's variables, failed tasks are retried up to max_retries; and the whole
large-file path on one machine: an arrival above a tiny threshold is dispatched by the arrival handler and
converted by three task processes (``python -m landfall.arrival.task``) into one manifest and one request."""

from __future__ import annotations

import json
import sys
import time

import numpy as np

from landfall.arrival import handler as arrival
from landfall.arrival.cloudrun import LocalJobs
from landfall.core.contracts import layout
from landfall.core.contracts.messages import Manifest
from landfall.local.executions import LocalCloudRun
from landfall.local.synthetic import time_series
from landfall.local.tfjob_controller import Operator
from tests.conftest import pull_all
from tests.landfall.arrival.test_handler import csv_bytes, put

SCRIPT = """
import json, os, pathlib, sys
keys = ("CLOUD_RUN_JOB", "CLOUD_RUN_EXECUTION", "CLOUD_RUN_TASK_INDEX", "CLOUD_RUN_TASK_COUNT",
        "CLOUD_RUN_TASK_ATTEMPT", "LANDFALL_SOURCE_NAME")
out = pathlib.Path(sys.argv[1])
out.joinpath(os.environ["CLOUD_RUN_TASK_INDEX"] + "-" + os.environ["CLOUD_RUN_TASK_ATTEMPT"]).write_text(
    json.dumps({k: os.environ.get(k) for k in keys}))
fail = os.environ.get("FAIL_TASK")
if fail == "always" or (fail == os.environ["CLOUD_RUN_TASK_INDEX"] and os.environ["CLOUD_RUN_TASK_ATTEMPT"] == "0"):
    sys.exit(75)
"""


def run_until_finished(runner: LocalCloudRun, execution: str, timeout_s: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        runner.tick()
        status = runner.status(execution)
        if status and status["state"] in ("Succeeded", "Failed"):
            return status
        time.sleep(0.1)
    runner.stop_all()
    raise AssertionError(f"{execution}: {runner.status(execution)}")


def test_tasks_get_cloud_run_variables_and_a_failed_task_is_retried(tmp_path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    name = LocalJobs(tmp_path / "state").run("landfall-convert", 3, {"LANDFALL_SOURCE_NAME": "incoming/d/x.csv",
                                                                       "FAIL_TASK": "1"})
    execution = name.rsplit("/", 1)[-1]
    runner = LocalCloudRun(tmp_path / "state", env={}, command=[sys.executable, "-c", SCRIPT, str(out)])
    status = run_until_finished(runner, execution)
    assert status["state"] == "Succeeded", status
    assert {i: t["attempts"] for i, t in status["tasks"].items()} == {"0": 1, "1": 2, "2": 1}
    seen = {p.name: json.loads(p.read_text()) for p in out.iterdir()}
    assert sorted(seen) == ["0-0", "1-0", "1-1", "2-0"]
    assert seen["2-0"] == {"CLOUD_RUN_JOB": "landfall-convert", "CLOUD_RUN_EXECUTION": execution,
                           "CLOUD_RUN_TASK_INDEX": "2", "CLOUD_RUN_TASK_COUNT": "3", "CLOUD_RUN_TASK_ATTEMPT": "0",
                           "LANDFALL_SOURCE_NAME": "incoming/d/x.csv"}
    assert "attempt 1" in runner.log_path(execution, 1).read_text()


def test_a_task_failing_past_max_retries_fails_the_execution(tmp_path) -> None:
    name = LocalJobs(tmp_path / "state").run("j", 1, {"FAIL_TASK": "always"})
    runner = LocalCloudRun(tmp_path / "state", env={}, command=[sys.executable, "-c", SCRIPT, str(tmp_path)],
                           max_retries=1)
    status = run_until_finished(runner, name.rsplit("/", 1)[-1])
    assert status["state"] == "Failed" and status["tasks"]["0"] == {
        "attempts": 2, "state": "Failed", "exitCode": 75, "pid": status["tasks"]["0"]["pid"]}


def test_large_arrival_converted_by_three_task_processes(emulator_stack, bucket, topic, arrival_runtime,
                                                         tmp_path) -> None:
    data = time_series(300, seed=11)
    payload = csv_bytes(data)
    state = tmp_path / "local"
    rt = arrival_runtime(inline_max_bytes=1000, task_bytes=len(payload) // 3 + 1, max_tasks=3,
                         shard_target_bytes=100_000)
    rt.jobs = LocalJobs(state, emulator_stack.project)
    obj = put(emulator_stack.storage, bucket, "incoming/d/large.csv", payload)
    assert arrival.handle(obj, rt) == "dispatched"
    assert arrival.handle(obj, rt) == "duplicate"  # a redelivery records no second execution
    [record] = list((state / "cloudrun" / "executions").glob("*.json"))
    assert json.loads(record.read_text())["task_count"] == 3

    env = {**emulator_stack.env(), "LANDFALL_REQUEST_TOPIC": topic, "LANDFALL_SHARD_TARGET_BYTES": "100000",
           "PYTHONUNBUFFERED": "1"}
    op = Operator(state, env=env, poll_s=0.1)
    try:
        execution = record.name[:-len(".json")]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            op.tick()
            status = op.cloud_run.status(execution)
            if status and status["state"] in ("Succeeded", "Failed"):
                break
            time.sleep(0.1)
    finally:
        op.stop_all()
    logs = "\n".join(p.read_text() for p in (state / "logs" / "cloudrun" / execution).glob("*.log"))
    assert status["state"] == "Succeeded", logs
    aid = layout.arrival_id(obj.name, obj.generation)
    manifests = emulator_stack.storage.list(f"gs://{bucket}/tfrecords/d/", suffix="/manifest.json")
    assert manifests == [f"gs://{bucket}/tfrecords/d/{aid}/manifest.json"]
    manifest = Manifest.from_json(emulator_stack.storage.read_bytes(manifests[0]))
    assert manifest.count == len(data) and len(manifest.shards) >= 3
    requests = pull_all(emulator_stack.pubsub, topic, expect=1, timeout_s=10)
    assert len(requests) == 1 and json.loads(requests[0].data)["manifest"] == manifests[0]
    assert pull_all(emulator_stack.pubsub, topic, timeout_s=3) == []
    assert np.isfinite(manifest.stats.mean).all()


def test_the_stack_points_the_arrival_function_at_the_local_operator(tmp_path) -> None:
    from landfall.local.stack import Stack, StackConfig

    env = Stack(StackConfig(state_dir=str(tmp_path), inline_max_bytes=4096))._function_env("h:1", "http://h:2",
                                                                                         tmp_path / "local")
    assert env["LANDFALL_JOBS_BACKEND"] == "local" and env["LANDFALL_INLINE_MAX_BYTES"] == "4096"
    assert env["LANDFALL_LOCAL_STATE"] == str(tmp_path / "local")  # where the operator looks for executions
    assert "LANDFALL_INLINE_MAX_BYTES" not in Stack(StackConfig(state_dir=str(tmp_path)))._function_env(
        "h:1", "http://h:2", tmp_path / "local") or "LANDFALL_INLINE_MAX_BYTES" in __import__("os").environ
