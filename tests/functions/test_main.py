"""The deployed entry points, served by functions-framework, fed golden CloudEvents and real
GCS notifications that fake-gcs-server published to the Pub/Sub emulator."""

from __future__ import annotations

import base64
import io
import json
import time
from pathlib import Path

import numpy as np
import pytest
from functions_framework import create_app

from landfall.core.contracts import layout
from landfall.core.contracts.messages import Manifest
from landfall.local.synthetic import time_series
from tests.conftest import pull_all, unique

EVENTS = Path(__file__).parent / "events"
MAIN = str(Path(__file__).parents[2] / "functions" / "main.py")


@pytest.fixture
def client(emulator_stack, topic, monkeypatch):
    monkeypatch.setenv("LANDFALL_REQUEST_TOPIC", topic)
    app = create_app("on_data_arrival", MAIN, "cloudevent")
    import main  # the module functions-framework loaded

    main.arrival.runtime.cache_clear()
    yield app.test_client()
    main.arrival.runtime.cache_clear()


def golden(name: str, **subs: str) -> dict:
    text = (EVENTS / name).read_text()
    for key, value in subs.items():
        text = text.replace(key, value)
    return json.loads(text)


def post(client, event: dict):
    headers = {f"ce-{k}": v for k, v in event["attributes"].items() if k != "datacontenttype"}
    return client.post("/", json=event["data"], headers={**headers, "Content-Type": "application/json"})


def pushed(note) -> dict:
    """A notification pulled from the emulator, as the push subscription delivers it: a CloudEvent."""
    return {
        "attributes": {"specversion": "1.0", "id": note.message_id, "source": "//pubsub.googleapis.com/x",
                       "type": "google.cloud.pubsub.topic.v1.messagePublished"},
        "data": {"message": {"data": base64.b64encode(note.data).decode(), "attributes": note.attributes,
                             "messageId": note.message_id}},
    }


def upload_npy(storage, bucket: str, name: str, arr: np.ndarray):
    buf = io.BytesIO()
    np.save(buf, arr)
    storage.write_bytes(f"gs://{bucket}/{name}", buf.getvalue())
    return storage.stat(f"gs://{bucket}/{name}")


def manifest_of(storage, bucket: str, name: str, generation: int) -> Manifest:
    aid = layout.arrival_id(name, generation)
    return Manifest.from_json(storage.read_bytes(f"gs://{bucket}/tfrecords/sensors/{aid}/manifest.json"))


def test_eventarc_storage_event(emulator_stack, bucket, topic, client):
    data = time_series(64, seed=5)
    info = upload_npy(emulator_stack.storage, bucket, "incoming/sensors/day-1.npy", data)
    event = golden("storage_finalized.json", BUCKET=bucket, GENERATION=str(info.generation), SIZE=str(info.size))
    for _ in range(3):  # at-least-once: the platform may deliver it again
        assert post(client, event).status_code == 200
    assert manifest_of(emulator_stack.storage, bucket, "incoming/sensors/day-1.npy", info.generation).count == 64
    # One shard, its profile and manifest, and the dataset's reference profile: each written once.
    names = sorted(u.rsplit("/", 1)[-1] for u in emulator_stack.storage.list(f"gs://{bucket}/tfrecords/"))
    assert names == ["_reference.json", "manifest.json", "part-00000-of-00001.tfrecord", "profile.json"], names
    assert len({json.loads(m.data)["request_id"] for m in pull_all(emulator_stack.pubsub, topic, expect=3)}) == 1


def test_pubsub_notification_event(emulator_stack, bucket, topic, client):
    data = time_series(32, seed=6)
    info = upload_npy(emulator_stack.storage, bucket, "incoming/sensors/day-1.npy", data)
    resource = {"name": "incoming/sensors/day-1.npy", "bucket": bucket, "generation": str(info.generation),
                "size": str(info.size)}
    event = golden("pubsub_gcs_notification.json", BUCKET=bucket, GENERATION=str(info.generation),
                   PROJECT=emulator_stack.project,
                   PAYLOAD_BASE64=base64.b64encode(json.dumps(resource).encode()).decode())
    assert post(client, event).status_code == 200
    assert manifest_of(emulator_stack.storage, bucket, "incoming/sensors/day-1.npy", info.generation).count == 32


def test_real_gcs_notifications_from_the_emulator(emulator_stack, bucket, topic, client):
    """fake-gcs-server announces the upload on Pub/Sub; we push what arrives to the function."""
    sub = unique("arrivals")
    emulator_stack.pubsub.ensure_subscription(sub, emulator_stack.gcs_topic)
    info = upload_npy(emulator_stack.storage, bucket, "incoming/sensors/day-2.npy", time_series(16, seed=7))
    emulator_stack.storage.write_bytes(f"gs://{bucket}/elsewhere/ignored.npy", b"x")  # not under incoming/
    deadline, mine = time.monotonic() + 20, []
    while not mine and time.monotonic() < deadline:
        mine = [m for m in pull_all(emulator_stack.pubsub, sub, timeout_s=3) if m.attributes.get("bucketId") == bucket]
    (note,) = mine
    assert note.attributes["eventType"] == "OBJECT_FINALIZE" and note.attributes["payloadFormat"] == "JSON_API_V1"
    assert post(client, pushed(note)).status_code == 200
    assert manifest_of(emulator_stack.storage, bucket, "incoming/sensors/day-2.npy", info.generation).count == 16


def test_bad_input_is_acknowledged_not_retried(emulator_stack, bucket, topic, client):
    emulator_stack.storage.write_bytes(f"gs://{bucket}/incoming/sensors/broken.npy", b"not numpy")
    info = emulator_stack.storage.stat(f"gs://{bucket}/incoming/sensors/broken.npy")
    event = golden("storage_finalized.json", BUCKET=bucket, GENERATION=str(info.generation), SIZE=str(info.size))
    event = json.loads(json.dumps(event).replace("day-1.npy", "broken.npy"))
    assert post(client, event).status_code == 200
    (rejection,) = emulator_stack.storage.list(f"gs://{bucket}/rejected/sensors/")
    assert json.loads(emulator_stack.storage.read_bytes(rejection))["reason"] == "corrupt_npy"


def test_storage_outage_is_retried(emulator_stack, topic, monkeypatch):
    """A temporary error surfaces as a failed invocation (HTTP 500), so the platform retries."""
    monkeypatch.setenv("LANDFALL_REQUEST_TOPIC", topic)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("LANDFALL_STORAGE_RETRY_S", "2")
    app = create_app("on_data_arrival", MAIN, "cloudevent")
    import main

    main.arrival.runtime.cache_clear()
    try:
        event = golden("storage_finalized.json", BUCKET="b-down", GENERATION="1", SIZE="10")
        assert post(app.test_client(), event).status_code == 500
    finally:
        main.arrival.runtime.cache_clear()


def test_archive_notification_retracts_the_overwritten_generation(emulator_stack, bucket, topic, client):
    """Versioned bucket, object overwritten: GCS sends OBJECT_ARCHIVE for the old generation."""
    storage = emulator_stack.storage
    name = "incoming/sensors/day-1.npy"
    old = upload_npy(storage, bucket, name, time_series(16, seed=8))
    event = golden("storage_finalized.json", BUCKET=bucket, GENERATION=str(old.generation), SIZE=str(old.size))
    assert post(client, event).status_code == 200
    new = upload_npy(storage, bucket, name, time_series(16, seed=9))
    resource = {"name": name, "bucket": bucket, "generation": str(old.generation), "size": str(old.size)}
    archive = golden("pubsub_gcs_archive.json", BUCKET=bucket, GENERATION=str(old.generation),
                     NEWER=str(new.generation), PROJECT=emulator_stack.project,
                     PAYLOAD_BASE64=base64.b64encode(json.dumps(resource).encode()).decode())
    assert post(client, archive).status_code == 200
    aid = layout.arrival_id(name, old.generation)
    record = json.loads(storage.read_bytes(f"gs://{bucket}/tfrecords/sensors/{aid}/retracted.json"))
    assert record["reason"] == "superseded" and record["by_generation"] == new.generation


def test_real_delete_notification_from_the_emulator_retracts(emulator_stack, bucket, topic, client):
    sub = unique("deletes")
    emulator_stack.pubsub.ensure_subscription(sub, emulator_stack.gcs_topic)
    storage = emulator_stack.storage
    name = "incoming/sensors/gone.npy"
    info = upload_npy(storage, bucket, name, time_series(16, seed=10))
    storage.delete(f"gs://{bucket}/{name}")
    notes, deadline = [], time.monotonic() + 20
    while len(notes) < 2 and time.monotonic() < deadline:
        pulled = pull_all(emulator_stack.pubsub, sub, timeout_s=3)
        notes += [m for m in pulled if m.attributes.get("bucketId") == bucket]
    assert sorted(n.attributes["eventType"] for n in notes) == ["OBJECT_DELETE", "OBJECT_FINALIZE"]
    for note in sorted(notes, key=lambda n: n.attributes["eventType"]):  # the delete first: out of order
        assert post(client, pushed(note)).status_code == 200
    folder = f"gs://{bucket}/tfrecords/sensors/{layout.arrival_id(name, info.generation)}/"
    assert storage.list(folder) == [folder + "retracted.json"]  # retracted, never converted
