"""Overwrites and deletions: an object's newest generation supersedes its older ones, whatever the event order.

Against fake-gcs-server: real generations, real overwrites and deletes. Events are built as the
notification route delivers them (``ObjectEvent`` with ``kind`` finalize or delete) and handled by the
same ``handler.handle`` the function runs, duplicated, reordered and concurrently.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import io
import json
import random
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from landfall.arrival import converter
from landfall.arrival import handler as arrival
from landfall.core.artifacts import retractions
from landfall.core.contracts import layout
from landfall.core.contracts.events import ObjectEvent
from landfall.core.contracts.layout import Layout
from landfall.local.synthetic import time_series
from tests.conftest import unique

NAME = "incoming/sensors/latest.npy"


class RecordingPubSub:
    """The real client, remembering which request ids were published (pulling them back would be slower)."""

    def __init__(self, pubsub):
        self.pubsub = pubsub
        self.request_ids: list[str] = []
        self.lock = threading.Lock()

    def publish(self, topic, data, attributes=None, ordering_key=""):
        with self.lock:
            self.request_ids.append(json.loads(data)["request_id"])
        return self.pubsub.publish(topic, data, attributes, ordering_key=ordering_key)


def npy(seed: int, n: int = 8) -> bytes:
    buf = io.BytesIO()
    np.save(buf, time_series(n, seed=seed))
    return buf.getvalue()


def upload(storage, bucket: str, payload: bytes, name: str = NAME) -> ObjectEvent:
    storage.write_bytes(f"gs://{bucket}/{name}", payload)
    info = storage.stat(f"gs://{bucket}/{name}")
    return ObjectEvent(bucket, name, info.generation, info.size, info.crc32c)


def deleted(obj: ObjectEvent) -> ObjectEvent:
    return dataclasses.replace(obj, kind="delete")


def live(storage, bucket: str) -> list[str]:
    """What every job of the dataset resolves its manifests from (``landfall.submit.coalesce``)."""
    return retractions.live_manifests(storage, layout.gs(bucket, layout.dataset_prefix(Layout(), "sensors")))


def manifest_uri(bucket: str, obj: ObjectEvent) -> str:
    return f"gs://{bucket}/{layout.manifest_name(Layout(), 'sensors', layout.arrival_id(obj.name, obj.generation))}"


def retraction(storage, bucket: str, obj: ObjectEvent) -> dict | None:
    uri = f"gs://{bucket}/{layout.retraction_name(Layout(), 'sensors', layout.arrival_id(obj.name, obj.generation))}"
    return json.loads(storage.read_bytes(uri)) if storage.exists(uri) else None


@pytest.fixture
def rt(arrival_runtime):
    runtime = arrival_runtime()
    return dataclasses.replace(runtime, pubsub=RecordingPubSub(runtime.pubsub))


def test_a_newer_generation_retracts_the_older_one(emulator_stack, bucket, rt):
    first = upload(rt.storage, bucket, npy(1))
    assert arrival.handle(first, rt) == "converted"
    assert live(rt.storage, bucket) == [manifest_uri(bucket, first)]
    second = upload(rt.storage, bucket, npy(2))
    assert arrival.handle(second, rt) == "converted"
    assert live(rt.storage, bucket) == [manifest_uri(bucket, second)]
    record = retraction(rt.storage, bucket, first)
    assert record["schema"] == "landfall.retraction/v1" and record["reason"] == "superseded"
    assert record["by_generation"] == second.generation and record["source"]["generation"] == first.generation
    assert rt.storage.exists(manifest_uri(bucket, first))  # kept for audit
    # A late duplicate of the old finalize neither un-retracts it nor asks for training on stale data.
    assert arrival.handle(first, rt) == "superseded"
    assert live(rt.storage, bucket) == [manifest_uri(bucket, second)]
    assert rt.pubsub.request_ids == [layout.request_id(bucket, NAME, g) for g in (first.generation, second.generation)]


def test_another_object_with_the_same_file_name_is_left_alone(emulator_stack, bucket, rt):
    here = upload(rt.storage, bucket, npy(1), "incoming/sensors/a/latest.npy")
    there = upload(rt.storage, bucket, npy(2), "incoming/sensors/b/latest.npy")
    assert [arrival.handle(o, rt) for o in (here, there)] == ["converted", "converted"]
    newer = upload(rt.storage, bucket, npy(3), "incoming/sensors/b/latest.npy")
    assert arrival.handle(newer, rt) == "converted"
    assert live(rt.storage, bucket) == sorted([manifest_uri(bucket, here), manifest_uri(bucket, newer)])


def test_an_older_finalize_delivered_after_the_newer_converts_nothing(emulator_stack, bucket, rt):
    first = upload(rt.storage, bucket, npy(1))
    second = upload(rt.storage, bucket, npy(2))
    assert arrival.handle(second, rt) == "converted"
    assert arrival.handle(first, rt) == "superseded"
    assert not rt.storage.exists(manifest_uri(bucket, first))
    assert retraction(rt.storage, bucket, first)["reason"] == "superseded"
    assert rt.pubsub.request_ids == [layout.request_id(bucket, NAME, second.generation)]


@pytest.mark.parametrize("on_delete", ["retract", "keep"])
def test_deleting_the_live_object(emulator_stack, bucket, arrival_runtime, on_delete):
    rt = arrival_runtime(on_delete=on_delete)
    obj = upload(rt.storage, bucket, npy(1))
    assert arrival.handle(obj, rt) == "converted"
    rt.storage.delete(f"gs://{bucket}/{NAME}")
    if on_delete == "retract":
        assert arrival.handle(deleted(obj), rt) == "retracted"
        assert retraction(rt.storage, bucket, obj)["reason"] == "deleted" and live(rt.storage, bucket) == []
        assert arrival.handle(deleted(obj), rt) == "retracted"  # a duplicate changes nothing
        assert arrival.handle(obj, rt) == "superseded"  # nor does a late finalize
        assert live(rt.storage, bucket) == []
    else:
        assert arrival.handle(deleted(obj), rt) == "ignored"
        assert retraction(rt.storage, bucket, obj) is None
        assert live(rt.storage, bucket) == [manifest_uri(bucket, obj)]


def test_an_overwrite_retracts_even_with_deletes_kept(emulator_stack, bucket, arrival_runtime):
    """``OBJECT_ARCHIVE``/``OBJECT_DELETE`` of an overwritten generation retracts it whatever on_delete says."""
    rt = arrival_runtime(on_delete="keep")
    first = upload(rt.storage, bucket, npy(1))
    assert arrival.handle(first, rt) == "converted"
    second = upload(rt.storage, bucket, npy(2))
    assert arrival.handle(deleted(first), rt) == "retracted"  # the archive event came first
    assert retraction(rt.storage, bucket, first)["by_generation"] == second.generation
    assert arrival.handle(second, rt) == "converted"
    assert live(rt.storage, bucket) == [manifest_uri(bucket, second)]


def test_a_delete_handled_before_its_finalize(emulator_stack, bucket, rt):
    obj = upload(rt.storage, bucket, npy(1))
    rt.storage.delete(f"gs://{bucket}/{NAME}")
    assert arrival.handle(deleted(obj), rt) == "retracted"
    assert arrival.handle(obj, rt) == "superseded"
    assert not rt.storage.exists(manifest_uri(bucket, obj)) and rt.pubsub.request_ids == []


def test_overwritten_while_converting(emulator_stack, bucket, rt, monkeypatch):
    """Generation 1 is being converted when generation 2 lands and is handled: 1 ends retracted, unrequested."""
    first = upload(rt.storage, bucket, npy(1))
    converting, go_on = threading.Event(), threading.Event()
    real_convert = converter.convert

    def slow_convert(*args, **kwargs):
        manifest = real_convert(*args, **kwargs)
        if kwargs.get("generation") == first.generation:
            converting.set()
            assert go_on.wait(30)
        return manifest

    monkeypatch.setattr(converter, "convert", slow_convert)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(arrival.handle, first, rt)
        assert converting.wait(30)
        second = upload(rt.storage, bucket, npy(2))
        assert arrival.handle(second, rt) == "converted"
        go_on.set()
        assert pending.result() == "superseded"
    assert live(rt.storage, bucket) == [manifest_uri(bucket, second)]
    assert rt.pubsub.request_ids == [layout.request_id(bucket, NAME, second.generation)]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(generations=st.integers(2, 4), deletes=st.lists(st.booleans(), min_size=4, max_size=4),
       duplicates=st.integers(0, 4), workers=st.integers(1, 4), seed=st.integers(0, 2**16),
       delete_last=st.booleans())
def test_any_order_any_concurrency_ends_with_only_the_live_generation(
        emulator_stack, arrival_runtime, generations, deletes, duplicates, workers, seed, delete_last):
    """Every generation is written first; then its finalize events, the delete events of overwritten ones
    (some lost), duplicates, in a random order on several threads. Only the live generation may remain
    and only it may be requested; if the live object was deleted too, nothing remains."""
    bucket = unique("bkt")
    emulator_stack.storage.ensure_bucket(bucket)
    rt = arrival_runtime()
    rt = dataclasses.replace(rt, pubsub=RecordingPubSub(rt.pubsub))
    objs = [upload(rt.storage, bucket, npy(i)) for i in range(generations)]
    events = list(objs) + [deleted(o) for o, lost in zip(objs[:-1], deletes, strict=False) if not lost]
    if delete_last:
        rt.storage.delete(f"gs://{bucket}/{NAME}")
        events.append(deleted(objs[-1]))
    rng = random.Random(seed)
    events += rng.choices(events, k=duplicates)
    rng.shuffle(events)
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda e: arrival.handle(e, rt), events))
    expected = [] if delete_last else [manifest_uri(bucket, objs[-1])]
    assert live(rt.storage, bucket) == expected
    assert set(rt.pubsub.request_ids) <= {layout.request_id(bucket, NAME, objs[-1].generation)}
    for old in objs[:-1]:
        assert not rt.storage.exists(manifest_uri(bucket, old)) or retraction(rt.storage, bucket, old)
