"""``shape.window.length: auto`` (landfall.arrival.autowindow): the first arrival's period becomes the dataset's window,
written into the spec's next generation, and every arrival after it is cut with it; two first arrivals racing agree."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from landfall.arrival import autowindow, period
from landfall.arrival.config import ConverterConfig, with_spec
from landfall.core.artifacts import specs
from landfall.core.contracts import layout
from landfall.core.contracts.layout import Layout
from landfall.core.contracts.messages import Manifest
from tests.landfall.detect.helpers import commit

SPEC = {"apiVersion": "landfall.dataset/v1", "name": "hum",
        "shape": {"window": {"length": "auto"}, "features": 1},
        "arrival": {"series": {"time_column": "t", "channels": ["v"]}}}


SIZE = 40_000  # bytes: both files padded to it with empty lines (which the CSV reader skips)


def _series(rows: int, cycle: int, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    t = np.arange(rows, dtype=float)
    v = np.sin(2 * np.pi * t / cycle) + rng.normal(0, 0.05, rows)
    return pd.DataFrame({"t": t, "v": v}).to_csv(index=False).encode()


def test_the_first_arrival_sets_the_window_and_every_later_one_uses_it(emulator_stack, bucket, topic,
                                                                       arrival_runtime):
    storage, pubsub = emulator_stack.storage, emulator_stack.pubsub
    first_generation, _ = specs.apply(storage, bucket, SPEC)
    assert specs.for_dataset(storage, bucket, "hum").trainer_args().count("--timesteps") == 0  # not known yet
    request = commit(storage, arrival_runtime, bucket, "incoming/hum/a.csv", _series(900, 50), pubsub, topic)
    spec = specs.for_dataset(storage, bucket, "hum")
    window = spec.shape["window"]
    assert window["length"] == 50 == period.length(np.sin(2 * np.pi * np.arange(900) / 50))
    assert window["estimated_from"].startswith(f"gs://{bucket}/incoming/hum/a.csv#")
    assert spec.generation != first_generation and "--timesteps" in spec.trainer_args()
    manifest = Manifest.from_json(storage.read_bytes(request.manifest), request.manifest)
    assert manifest.shape == [50, 1] and manifest.spec_generation == spec.generation
    # A later arrival of another period is cut with the dataset's window, not re-estimated.
    later = commit(storage, arrival_runtime, bucket, "incoming/hum/b.csv", _series(900, 80, 1), pubsub, topic)
    assert Manifest.from_json(storage.read_bytes(later.manifest), later.manifest).shape == [50, 1]
    assert specs.for_dataset(storage, bucket, "hum").generation == spec.generation
    # The deploy build applies the reviewed spec (still auto) at every deploy: the estimate stays, no new generation.
    assert specs.apply(storage, bucket, SPEC) == (spec.generation, False)
    assert specs.for_dataset(storage, bucket, "hum").shape["window"] == window
    redeployed = {**SPEC, "training": {"epochs": 3}}  # another change reviewed: applied, the window kept
    generation, changed = specs.apply(storage, bucket, redeployed)
    kept = specs.for_dataset(storage, bucket, "hum")
    assert changed and kept.generation == generation and kept.shape["window"] == window
    # A number applied is the user's choice: it replaces the estimate.
    chosen = {**SPEC, "shape": {"window": {"length": 64}, "features": 1}}
    specs.apply(storage, bucket, chosen)
    assert specs.for_dataset(storage, bucket, "hum").shape["window"] == {"length": 64}


def test_two_first_arrivals_racing_agree_on_one_window(emulator_stack, bucket, monkeypatch):
    storage = emulator_stack.storage
    specs.apply(storage, bucket, SPEC)
    base = with_spec(ConverterConfig(), storage, bucket, "hum")
    assert base.window_auto
    arrivals = []
    for name, cycle in (("incoming/hum/x.csv", 40), ("incoming/hum/y.csv", 64)):
        storage.write_bytes(f"gs://{bucket}/{name}", _series(800, cycle).ljust(SIZE, b"\n"))
        arrivals.append(layout.parse_arrival(bucket, name, storage.stat(f"gs://{bucket}/{name}").generation,
                                             Layout()))
    estimate = autowindow.estimate
    # y's estimate runs while x's lands: y read generation 1 (auto), x writes generation 2, y's write then loses.
    def racing(cfg, storage_, source, generation, size):
        if source.endswith("y.csv"):
            autowindow.resolve(base, storage, arrivals[0], SIZE, Layout())
        return estimate(cfg, storage_, source, generation, size)

    monkeypatch.setattr(autowindow, "estimate", racing)
    two = autowindow.resolve(base, storage, arrivals[1], SIZE, Layout())
    one = autowindow.resolve(base, storage, arrivals[0], SIZE, Layout())  # later: reads the number, estimates nothing
    assert one.timesteps == two.timesteps == 40 and not one.window_auto and not two.window_auto
    assert specs.for_dataset(storage, bucket, "hum").shape["window"]["estimated_from"].endswith(
        "x.csv#" + str(arrivals[0].generation))


def test_a_first_arrival_delivered_twice_at_once_is_estimated_and_converted_once(emulator_stack, bucket, topic,
                                                                                  arrival_runtime):
    """Pub/Sub delivers at least once: the first arrival's two deliveries race through the estimate and the
    conversion. One spec generation is written (the other delivery's conditional write loses, or it reads the
    number), one manifest, cut with that window, and both deliveries end well."""
    from concurrent.futures import ThreadPoolExecutor

    from landfall.arrival import handler
    from landfall.core.contracts.events import ObjectEvent
    from tests.conftest import pull_all

    storage, pubsub = emulator_stack.storage, emulator_stack.pubsub
    applied, _ = specs.apply(storage, bucket, SPEC)
    uri = f"gs://{bucket}/incoming/hum/first.csv"
    storage.write_bytes(uri, _series(900, 50))
    info = storage.stat(uri)
    event = ObjectEvent(bucket, "incoming/hum/first.csv", info.generation, info.size, info.crc32c)
    with ThreadPoolExecutor(2) as pool:
        outcomes = sorted(pool.map(lambda _: handler.handle(event, arrival_runtime()), range(2)))
    assert set(outcomes) <= {"converted", "duplicate"} and "converted" in outcomes, outcomes
    spec = specs.for_dataset(storage, bucket, "hum")
    assert spec.shape["window"]["length"] == 50 and spec.generation != applied
    manifests = [i.uri for i in storage.list_objects(f"gs://{bucket}/tfrecords/hum/") if i.uri.endswith(
        "/manifest.json")]
    assert len(manifests) == 1
    manifest = Manifest.from_json(storage.read_bytes(manifests[0]), manifests[0])
    assert manifest.shape == [50, 1] and manifest.spec_generation == spec.generation
    requests = pull_all(pubsub, topic, expect=1)
    assert {json.loads(m.data)["manifest"] for m in requests} == {manifests[0]}  # a duplicate may publish again
