"""Shared, session-scoped emulators: Google's Pub/Sub emulator and fake-gcs-server.

Started once per test session on free loopback ports; a failure to start is an error, never a skip.
fake-gcs-server announces every finalized ``incoming/`` object on ``GCS_TOPIC`` (JSON_API_V1
notifications), as ``gcloud storage buckets notifications create`` does in production.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from landfall.core.pubsub import PubSub
from landfall.core.storage import Storage
from landfall.local import emulators

# The release's enough-data hold (landfall.submit.sufficient) is off for the suite's coalescing tests, whose
# arrivals are a few instances at the default batch of 1,024; its own tests (tests/landfall/submit/
# test_enough_data.py) turn it on.
os.environ.setdefault("LANDFALL_MIN_DATA", "off")

PROJECT = "landfall-test"
GCS_TOPIC = "gcs-notifications"


@dataclasses.dataclass
class Emulators:
    project: str
    pubsub_host: str
    storage_url: str
    gcs_topic: str
    storage: Storage
    pubsub: PubSub

    def env(self) -> dict[str, str]:
        return {
            "PUBSUB_EMULATOR_HOST": self.pubsub_host,
            "STORAGE_EMULATOR_HOST": self.storage_url,
            "GOOGLE_CLOUD_PROJECT": self.project,
        }


@pytest.fixture(scope="session")
def emulator_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulators]:
    state = tmp_path_factory.mktemp("emulators")
    pubsub_proc, pubsub_host = emulators.start_pubsub(state, PROJECT)
    saved = {k: os.environ.get(k) for k in ("PUBSUB_EMULATOR_HOST", "STORAGE_EMULATOR_HOST", "GOOGLE_CLOUD_PROJECT")}
    os.environ["PUBSUB_EMULATOR_HOST"] = pubsub_host
    os.environ["GOOGLE_CLOUD_PROJECT"] = PROJECT
    gcs_proc = None
    try:
        pubsub = PubSub(PROJECT)
        pubsub.ensure_topic(GCS_TOPIC)
        gcs_proc, storage_url = emulators.start_gcs(
            state, pubsub_host=pubsub_host, project=PROJECT, topic=GCS_TOPIC, object_prefix="incoming/"
        )
        os.environ["STORAGE_EMULATOR_HOST"] = storage_url
        yield Emulators(PROJECT, pubsub_host, storage_url, GCS_TOPIC, Storage(PROJECT), pubsub)
    finally:
        if gcs_proc:
            gcs_proc.stop()
        pubsub_proc.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def bucket(emulator_stack: Emulators) -> str:
    """A fresh bucket per test, so tests sharing the emulators never see each other's objects."""
    name = unique("bkt")
    emulator_stack.storage.ensure_bucket(name)
    return name


@pytest.fixture
def topic(emulator_stack: Emulators) -> str:
    """A fresh request topic with a pull subscription of the same name."""
    name = unique("requests")
    emulator_stack.pubsub.ensure_topic(name)
    emulator_stack.pubsub.ensure_subscription(name, name, ordering=True)
    return name


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


@pytest.fixture
def arrival_runtime(emulator_stack: Emulators, topic: str):
    """Builds the data-arrival runtime against the emulators, publishing to this test's topic."""
    from landfall.arrival.config import ConverterConfig
    from landfall.core.config import Layout
    from landfall.core.runtime import Runtime

    def make(**overrides) -> Runtime:
        cfg = ConverterConfig.load({}, project=emulator_stack.project, request_topic=topic, **overrides)
        return Runtime(cfg, Layout(), emulator_stack.storage, emulator_stack.pubsub)

    return make


def pull_all(pubsub: PubSub, subscription: str, expect: int | None = None, timeout_s: float = 10.0) -> list:
    """Pulls and acks until ``expect`` messages arrived (or, with ``expect=None``, until a pull comes back empty)."""
    import time

    got: list = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        batch = pubsub.pull(subscription, timeout_s=2.0)
        pubsub.ack(subscription, [m.ack_id for m in batch])
        got += batch
        if expect is not None and len(got) >= expect:
            break
        if expect is None and not batch:
            break
    return got


@pytest.fixture(scope="session")
def small_flow(emulator_stack: Emulators, tmp_path_factory: pytest.TempPathFactory):
    """One small real flow with every kind of record (``tests/flow.py``): trace, report and monitoring tests."""
    from tests.flow import build

    return build(emulator_stack, tmp_path_factory.mktemp("flow"))
