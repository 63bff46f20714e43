"""End to end on this machine: ``landfall up`` on real emulators, an upload, one TFJob to Succeeded.

The stack runs with a tiny inline threshold (``--inline-max-bytes``), so the upload takes the large-file path:
the arrival function records one Cloud Run execution, the local operator runs its three tasks as processes
(``python -m landfall.arrival.task``), and the committing task publishes the request. The in-process path is
covered function by function (tests/functions, tests/landfall/arrival)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from landfall.core.artifacts import champion
from landfall.core.contracts import layout
from landfall.core.services.pubsub import PubSub
from landfall.core.services.storage import Storage
from landfall.local import detection_feed
from landfall.local.anomalies import inject
from landfall.local.synthetic import time_series
from landfall.submit import jobmeta, tfjob
from landfall.submit.backends.local import LocalBackend
from tests.support import stack_ready, wait_for

TRAINER_ARGS = json.dumps(["--units", "8,4", "--verbose", "0"])


def _pgids() -> dict[int, int]:
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(stat.parent.name)] = int(fields[2])
    return out


@pytest.fixture
def stack(memory_dir):
    state = memory_dir / "state"  # the emulators' data in memory (tests/conftest.py)
    env = {**os.environ, "LANDFALL_EPOCHS": "2", "LANDFALL_BATCH_SIZE_PER_WORKER": "64",
           "LANDFALL_TRAINER_ARGS": TRAINER_ARGS, "LANDFALL_TASK_BYTES": "300000"}  # the upload: 3 tasks
    for key in ("PUBSUB_EMULATOR_HOST", "STORAGE_EMULATOR_HOST", "GOOGLE_CLOUD_PROJECT"):
        env.pop(key, None)  # the stack starts its own emulators
    proc = subprocess.Popen([sys.executable, "-m", "landfall.cli", "up", "--state-dir", str(state),
                             "--inline-max-bytes", "100000"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    try:
        yield proc, state, wait_for(lambda: stack_ready(state), 90, "landfall up"), env
    finally:
        if proc.poll() is None:  # the test failed before its own SIGTERM: stop the stack the same way
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def test_up_runs_an_upload_to_succeeded_once_and_stops_cleanly(stack, tmp_path, monkeypatch):
    proc, state, info, env = stack
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", info["storage_emulator_host"])
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", info["pubsub_emulator_host"])
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", info["project"])

    # A second `landfall up` on the same state folder says so instead of fighting over ports.
    second = subprocess.run([sys.executable, "-m", "landfall.cli", "up", "--state-dir", str(state)],
                            capture_output=True, text=True, env=env, timeout=60)
    assert second.returncode == 1 and "already running" in second.stderr

    # Listen to the notifications the stack's fake-gcs-server publishes, to replay one as a duplicate.
    pubsub = PubSub(info["project"])
    pubsub.ensure_subscription("test-notification-tap", "landfall-gcs-notifications")
    data = tmp_path / "sensors.npy"
    buf = io.BytesIO()
    np.save(buf, time_series(512, seed=4))
    data.write_bytes(buf.getvalue())
    up = subprocess.run([sys.executable, "-m", "landfall.cli", "upload", str(data), "--dataset", "plant",
                         "--state-dir", str(state)], capture_output=True, text=True, env=env, timeout=60)
    assert up.returncode == 0, up.stderr
    assert up.stdout.strip() == f"gs://{info['bucket']}/incoming/plant/sensors.npy"

    note = wait_for(lambda: pubsub.pull("test-notification-tap", timeout_s=2), 30, "the GCS notification")[0]
    for _ in range(2):  # Pub/Sub may deliver the same notification again: replay it twice
        pubsub.publish("landfall-gcs-notifications", note.data, note.attributes)

    backend = LocalBackend(info["local_state"])
    executions = Path(info["local_state"]) / "cloudrun" / "executions"
    [execution] = wait_for(lambda: sorted(executions.glob("*[!s].json")), 60, "the Cloud Run execution")
    assert json.loads(execution.read_text())["task_count"] == 3
    job = wait_for(lambda: [j for j in backend.list("plant") if tfjob.is_finished(j)], 240, "the TFJob to finish")[0]
    assert tfjob.state(job) == "Succeeded"
    time.sleep(3)  # let the replayed notifications run through the functions
    assert len(backend.list("plant")) == 1
    assert len(list(executions.glob("*[!s].json"))) == 1  # the replayed notifications started none
    status = json.loads(execution.with_name(execution.name[:-len(".json")] + ".status.json").read_text())
    assert status["state"] == "Succeeded" and len(status["tasks"]) == 3
    storage = Storage(info["project"])
    assert len(storage.list(f"gs://{info['bucket']}/tfrecords/plant/", suffix="manifest.json")) == 1
    metrics = json.loads(storage.read_bytes(jobmeta.job_dir(info["bucket"], jobmeta.name_of(job)) + "/metrics.json"))
    assert metrics["status"] == "succeeded" and [e["epoch"] for e in metrics["epochs"]] == [1, 2]
    assert all(np.isfinite(e["loss"]) for e in metrics["epochs"]) and metrics["num_workers"] == 2

    # Next to a running stack, `landfall status` needs no exports.
    shown = subprocess.run([sys.executable, "-m", "landfall.cli", "status", "--json"], capture_output=True,
                           text=True, env={**env, "LANDFALL_STATE_DIR": str(state)}, timeout=60)
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert [(j["name"], j["state"]) for j in report["jobs"]] == [(jobmeta.name_of(job), "Succeeded")]
    assert report["datasets"]["plant"]["arrivals"] == 1 and report["jobs"][0]["metrics"]["epochs"] == 2

    # Only incoming/ starts work: the job's runs/, the converter's tfrecords/ and tmp/, and these writes
    # reached no function. Deleting the upload reaches it, and retracts the arrival.
    for other in ("runs/x/y.json", "tfrecords/plant/x.json", "tmp/x.bin", "rejected/x.json"):
        storage.write_bytes(f"gs://{info['bucket']}/{other}", b"{}")
    storage.delete(f"gs://{info['bucket']}/incoming/plant/sensors.npy")
    (manifest,) = storage.list(f"gs://{info['bucket']}/tfrecords/plant/", suffix="manifest.json")
    arrival_folder = manifest.rsplit("/", 1)[0]
    wait_for(lambda: storage.exists(arrival_folder + "/retracted.json"), 30, "the retraction")
    tapped = pubsub.pull("test-notification-tap", timeout_s=3) + pubsub.pull("test-notification-tap", timeout_s=3)
    assert {(m.attributes["objectId"], m.attributes["eventType"]) for m in tapped} == {
        ("incoming/plant/sensors.npy", "OBJECT_FINALIZE"), ("incoming/plant/sensors.npy", "OBJECT_DELETE")}

    # With a champion (this tiny 2-epoch job is not one by its verdict: promoted by hand, as an operator does), the
    # next arrival is scored by the stack's scorer and its detections published.
    promoted = subprocess.run([sys.executable, "-m", "landfall.cli", "promote", "--dataset", "plant", "--run",
                               jobmeta.name_of(job)], capture_output=True, text=True,
                              env={**env, "LANDFALL_STATE_DIR": str(state)}, timeout=120)
    assert promoted.returncode == 0, promoted.stderr
    current, _ = champion.read(storage, champion.bucket_root(info["bucket"]), "plant")
    assert current is not None and current.run == jobmeta.name_of(job)
    spiked, injected = inject(time_series(512, seed=4, anomaly_fraction=0.0)[:64], 3, magnitude=50.0)
    buf = io.BytesIO()
    np.save(buf, spiked)
    storage.write_bytes(f"gs://{info['bucket']}/incoming/plant/next.npy", buf.getvalue())
    aid = layout.arrival_id("incoming/plant/next.npy", storage.stat(f"gs://{info['bucket']}/incoming/plant/next.npy")
                            .generation)
    message, _ = detection_feed.wait_for(pubsub, "landfall-detections", aid, 120)
    assert message["champion"]["run"] == current.run and message["count"] == 64 and message["kind"] == "instances"
    flagged = {i for r in message["ranges"] for i in range(r["first_row"], r["last_row"] + 1)}
    assert set(injected) <= flagged, (injected, message["ranges"])
    assert storage.exists(message["summary"]) and storage.exists(message["scores"])

    # SIGTERM stops every process it started, and theirs, leaving none behind.
    groups = set(info["processes"].values()) | {proc.pid}
    for j in backend.list():
        groups |= {r["pid"] for r in ((j.get("status") or {}).get("local") or {}).get("replicas", [])
                   if r.get("pid")}
    members = {pid for pid, pgid in _pgids().items() if pgid in groups}
    assert members, "expected the stack's processes to be visible"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    time.sleep(1)
    left = {pid for pid, pgid in _pgids().items() if pgid in groups or pid in members}
    assert not left, f"processes left behind: {left}"
    assert not (state / "stack.json").exists()
