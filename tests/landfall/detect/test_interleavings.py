"""Delivery is duplicated, reordered and concurrent: whatever the interleaving, every (arrival, champion) is scored
into one summary and announced by one message (landfall.detect.handler's create-only summary, then the marker).

Hypothesis draws, for a few committed arrivals, how many times each request is delivered and in which order; four
threads play four concurrent deliveries (a Cloud Run instance serves four at once); a delivery that raises a
temporary error (a duplicate that found the summary of another delivery still being announced) is delivered again
later, as Pub/Sub redelivers it. Each example is judged by a champion of its own (a new job), so its results are new."""

from __future__ import annotations

import collections
import concurrent.futures
import json
import threading
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from landfall.core.errors import TemporaryError
from landfall.detect import handler
from tests.conftest import pull_all, unique

from .helpers import SERIES_SPEC, commit, crown, scorer_runtime, series_frame, store_spec, zero_model

ARRIVALS = 4


@pytest.fixture(scope="module")
def committed(emulator_stack, tmp_path_factory):
    from landfall.arrival.config import ConverterConfig
    from landfall.core.contracts.layout import Layout
    from landfall.core.runtime import Runtime

    storage, pubsub = emulator_stack.storage, emulator_stack.pubsub
    bucket, topic, detections_topic = unique("bkt"), unique("requests"), unique("detections")
    storage.ensure_bucket(bucket)
    for name in (topic, detections_topic):
        pubsub.ensure_topic(name)
        pubsub.ensure_subscription(name, name)
    store_spec(storage, bucket, SERIES_SPEC)

    def arrival_runtime(**overrides):
        cfg = ConverterConfig.load({}, project=emulator_stack.project, request_topic=topic, **overrides)
        return Runtime(cfg, Layout(), storage, pubsub)

    requests = [commit(storage, arrival_runtime, bucket, f"incoming/pump/{i}.csv",
                       series_frame(seed=i, spike_at=10 + i).to_csv(index=False).encode(), pubsub, topic)
                for i in range(ARRIVALS)]
    model = zero_model(tmp_path_factory.mktemp("m"), (4, 1))
    return {"bucket": bucket, "requests": requests, "model": model, "detections": detections_topic}


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(copies=st.lists(st.integers(1, 3), min_size=ARRIVALS, max_size=ARRIVALS),
       order=st.randoms(use_true_random=False))
def test_every_arrival_is_announced_once_whatever_the_interleaving(emulator_stack, committed, copies, order):
    storage, pubsub = emulator_stack.storage, emulator_stack.pubsub
    run = f"job-{uuid.uuid4().hex[:8]}"
    crown(storage, committed["bucket"], "pump", committed["model"], run=run)
    rt = scorer_runtime(emulator_stack, committed["bucket"], committed["detections"], publish_wait_s=30.0)
    queue = collections.deque(r for r, n in zip(committed["requests"], copies, strict=True) for _ in range(n))
    order.shuffle(queue)
    lock, outcomes = threading.Lock(), collections.Counter()

    def deliver() -> None:
        for _ in range(100):  # a bound: Pub/Sub would dead-letter after 5 attempts of one message
            with lock:
                if not queue:
                    return
                request = queue.popleft()
            try:
                outcome = handler.handle(request.to_json(), {}, rt)
            except TemporaryError:
                with lock:
                    queue.append(request)  # redelivered later
                    outcomes["retried"] += 1
                continue
            with lock:
                outcomes[outcome] += 1

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for f in [pool.submit(deliver) for _ in range(4)]:
            f.result()
    assert not queue
    sent = [json.loads(m.data) for m in pull_all(pubsub, committed["detections"], expect=ARRIVALS, timeout_s=20)]
    sent += [json.loads(m.data) for m in pull_all(pubsub, committed["detections"], timeout_s=2)]
    mine = [m for m in sent if m["champion"]["run"] == run]
    assert sorted(m["arrival"] for m in mine) == sorted(r.manifest.rsplit("/", 2)[-2] for r in committed["requests"])
    assert outcomes["published"] == ARRIVALS and outcomes["duplicate"] == sum(copies) - ARRIVALS
    summaries = storage.list(f"gs://{committed['bucket']}/scores/pump/", suffix=f"/{run}/summary.json")
    markers = storage.list(f"gs://{committed['bucket']}/scores/pump/", suffix=f"/{run}/published.json")
    assert len(summaries) == len(markers) == ARRIVALS
