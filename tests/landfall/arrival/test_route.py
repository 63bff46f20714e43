"""Routing by size (``landfall.arrival.route``): in-process below the threshold, one Cloud Run execution above,
against the real emulators and the fake Cloud Run Admin API (``tests/fakes/cloud_run.py``)."""

from __future__ import annotations

import dataclasses
import json
import time

import numpy as np
import pytest

from landfall.arrival import format_registry, route
from landfall.arrival import handler as arrival
from landfall.arrival.cloudrun import CloudRunJobs
from landfall.arrival.config import ConverterConfig
from landfall.core.contracts import layout
from landfall.core.contracts.messages import REQUEST_SCHEMA
from landfall.core.errors import NotFound, PermanentError, TemporaryError
from landfall.local.synthetic import time_series
from tests.conftest import pull_all
from tests.fakes.cloud_run import FakeCloudRun
from tests.landfall.arrival.test_handler import csv_bytes, npy_bytes, put

REGION = "us-central1"
JOB = "landfall-convert"


@pytest.fixture(scope="module")
def data() -> np.ndarray:
    return time_series(40, seed=5)


@pytest.fixture
def cloud_run(emulator_stack):
    with FakeCloudRun() as fake:
        fake.add_job(emulator_stack.project, REGION, JOB)
        yield fake


@pytest.fixture
def routed(arrival_runtime, cloud_run, emulator_stack):
    """An arrival runtime whose Cloud Run client talks to the fake."""

    def make(**overrides):
        rt = arrival_runtime(**{"convert_job": JOB, "region": REGION, **overrides})
        rt.jobs = CloudRunJobs(emulator_stack.project, REGION, endpoint=cloud_run.endpoint)
        return rt

    return make


def marker(storage, bucket: str, obj) -> dict:
    aid = layout.arrival_id(obj.name, obj.generation)
    return json.loads(storage.read_bytes(f"gs://{bucket}/tfrecords/d/{aid}/{layout.DISPATCH}"))


def test_default_thresholds_are_half_of_timeout_times_rate() -> None:
    cfg = ConverterConfig.load({})
    assert route.inline_limit("npy", cfg) == 58_320_000_000
    assert route.inline_limit("csv", cfg) == 31_050_000_000 and route.inline_limit("parquet", cfg) == 37_800_000_000
    assert route.inline_limit("csv.gz", cfg) == 8_910_000_000 and route.inline_limit("npz", cfg) == 14_580_000_000
    one = ConverterConfig.load({"LANDFALL_INLINE_MAX_BYTES": "1000"})
    assert {route.inline_limit(f.name, one) for f in format_registry.known()} == {1000}
    assert route.converts_inline("csv", 1000, one) and not route.converts_inline("csv", 1001, one)


def test_task_count_from_size_capped_and_one_for_unsplittable() -> None:
    cfg = ConverterConfig.load({"LANDFALL_TASK_BYTES": "100", "LANDFALL_MAX_TASKS": "3"})
    assert [route.task_count("csv", n, cfg) for n in (1, 100, 101, 250, 10_000)] == [1, 1, 2, 3, 3]
    assert route.task_count("npy", 201, cfg) == 3
    assert route.task_count("npz", 10_000, cfg) == route.task_count("csv.gz", 10_000, cfg) == 1


def test_small_file_converts_in_process(emulator_stack, bucket, topic, routed, cloud_run, data) -> None:
    rt = routed()
    obj = put(emulator_stack.storage, bucket, "incoming/d/small.npy", npy_bytes(data))
    assert arrival.handle(obj, rt) == "converted"
    assert cloud_run.executions == []
    [msg] = pull_all(emulator_stack.pubsub, topic, expect=1)
    assert json.loads(msg.data)["schema"] == REQUEST_SCHEMA


def test_large_file_starts_one_execution_with_its_overrides(emulator_stack, bucket, topic, routed, cloud_run,
                                                           data) -> None:
    rt = routed(inline_max_bytes=1000, task_bytes=20_000, max_tasks=8)
    payload = csv_bytes(data)
    obj = put(emulator_stack.storage, bucket, "incoming/d/big.csv", payload)
    assert arrival.handle(obj, rt) == "dispatched"
    [execution] = cloud_run.executions
    assert execution.job == f"projects/{emulator_stack.project}/locations/{REGION}/jobs/{JOB}"
    assert execution.task_count == min(8, -(-len(payload) // 20_000)) > 1
    assert execution.env == {"LANDFALL_SOURCE_BUCKET": bucket, "LANDFALL_SOURCE_NAME": obj.name,
                             "LANDFALL_SOURCE_GENERATION": str(obj.generation)}
    assert marker(emulator_stack.storage, bucket, obj)["execution"] == execution.name
    # Nothing converted or requested by the function itself.
    aid = layout.arrival_id(obj.name, obj.generation)
    assert not emulator_stack.storage.exists(f"gs://{bucket}/tfrecords/d/{aid}/manifest.json")
    assert pull_all(emulator_stack.pubsub, topic, timeout_s=3) == []


def test_unsplittable_formats_get_one_task(emulator_stack, bucket, routed, cloud_run, data) -> None:
    rt = routed(inline_max_bytes=10, task_bytes=100)
    obj = put(emulator_stack.storage, bucket, "incoming/d/big.csv.gz", b"\x1f\x8b" + b"x" * 5000)
    assert arrival.handle(obj, rt) == "dispatched"
    assert [e.task_count for e in cloud_run.executions] == [1]


def test_duplicate_events_start_one_execution(emulator_stack, bucket, routed, cloud_run, data) -> None:
    rt = routed(inline_max_bytes=1000)
    obj = put(emulator_stack.storage, bucket, "incoming/d/dup.npy", npy_bytes(data))
    assert arrival.handle(obj, rt) == "dispatched"
    assert [arrival.handle(obj, rt) for _ in range(3)] == ["duplicate"] * 3
    assert len(cloud_run.executions) == 1
    assert [p for m, p in cloud_run.requests if m == "POST"] == [f"/v2/{cloud_run.executions[0].job}:run"]


def test_transient_cloud_run_failure_is_temporary_and_the_retry_starts_it(emulator_stack, bucket, routed,
                                                                           cloud_run, data) -> None:
    rt = routed(inline_max_bytes=1000)
    obj = put(emulator_stack.storage, bucket, "incoming/d/retry.npy", npy_bytes(data))
    for code in (503, 429):
        cloud_run.fail_next(1, code)
        with pytest.raises(TemporaryError):
            arrival.handle(obj, rt)
        with pytest.raises(NotFound):  # removed: the redelivery need not wait out the grace
            marker(emulator_stack.storage, bucket, obj)
    assert cloud_run.executions == []
    assert arrival.handle(obj, rt) == "dispatched"
    assert arrival.handle(obj, rt) == "duplicate"
    assert len(cloud_run.executions) == 1


def test_a_crash_between_marker_and_run_is_repaired(emulator_stack, bucket, routed, cloud_run, data) -> None:
    rt = routed(inline_max_bytes=1000)
    obj = put(emulator_stack.storage, bucket, "incoming/d/crash.npy", npy_bytes(data))
    parsed = layout.parse_arrival(bucket, obj.name, obj.generation, rt.layout)
    uri = route.marker_uri(parsed, rt.layout)
    left = route.Marker(JOB, 1, time.time())  # what a handler that died before run_job leaves
    emulator_stack.storage.write_bytes(uri, left.to_json(parsed), if_absent=True)
    with pytest.raises(TemporaryError, match="another handler"):  # it may still be starting: wait
        arrival.handle(obj, rt)
    assert cloud_run.executions == []
    old = dataclasses.replace(left, created=time.time() - route.CLAIM_GRACE_S - 1)
    emulator_stack.storage.write_bytes(uri, old.to_json(parsed))
    assert arrival.handle(obj, rt) == "dispatched"
    assert arrival.handle(obj, rt) == "duplicate"
    assert len(cloud_run.executions) == 1


def test_an_unknown_job_keeps_the_arrival_waiting(emulator_stack, bucket, routed, cloud_run, data) -> None:
    rt = routed(inline_max_bytes=1000, convert_job="no-such-job")
    obj = put(emulator_stack.storage, bucket, "incoming/d/nojob.npy", npy_bytes(data))
    with pytest.raises(TemporaryError, match="not found"):
        arrival.handle(obj, rt)
    assert cloud_run.executions == []


def test_wrapper_maps_errors_by_retry_class(emulator_stack, cloud_run) -> None:
    jobs = CloudRunJobs(emulator_stack.project, REGION, endpoint=cloud_run.endpoint)
    with pytest.raises(NotFound):
        jobs.run("missing", 1, {})
    cloud_run.fail_next(1, 403)
    with pytest.raises(PermanentError):
        jobs.run(JOB, 1, {})
    name = jobs.run(f"projects/{emulator_stack.project}/locations/{REGION}/jobs/{JOB}", 2, {"A": "1"})
    assert name == cloud_run.executions[-1].name and name.startswith(cloud_run.executions[-1].job + "/executions/")


def test_the_marker_is_rewritten_no_sooner_than_the_write_rate_of_one_name_allows(emulator_stack, bucket, routed,
                                                                                   data) -> None:
    """Cloud Storage's one write a second to one object name (``tests/fakes/gcs_rate.RULE``): the marker is created,
    the execution started (at once on the fake), then the marker rewritten with its name, a second later, not
    refused."""
    from landfall.core.services.storage import Storage
    from tests.fakes.gcs_rate import rate_limited_client

    client, session = rate_limited_client(emulator_stack.project)
    rt = routed(inline_max_bytes=1000, task_bytes=20_000)
    rt.storage = Storage(emulator_stack.project, client=client, retry_deadline_s=0.5)
    obj = put(emulator_stack.storage, bucket, "incoming/d/big.csv", csv_bytes(data))
    assert arrival.handle(obj, rt) == "dispatched"
    name = (bucket, f"tfrecords/d/{layout.arrival_id(obj.name, obj.generation)}/{layout.DISPATCH}")
    assert session.writes[name] == 2 and not session.refused, session.refused
    assert session.closest[name] >= 1.0
