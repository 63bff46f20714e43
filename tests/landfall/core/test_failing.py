"""The failing record of an arrival (``landfall.core.artifacts.failing``): at most one write a second, one writer of
two racing, and never an error of its own in place of the event's."""

from __future__ import annotations

import json

import numpy as np

from landfall.core.artifacts import failing
from landfall.core.contracts import layout
from landfall.core.contracts.layout import Layout
from landfall.core.errors import NotFound, TemporaryError
from tests.fakes.gcs_rate import RULE


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class Racing:
    """Another attempt rewrites the record between this one's read and its write."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def bounded(self, retry_deadline_s: float):
        return self

    def read_generation(self, uri: str):
        data, generation = self.inner.read_generation(uri)
        self.inner.write_bytes(uri, data)
        return data, generation

    def write_if_generation(self, *args, **kwargs):
        return self.inner.write_if_generation(*args, **kwargs)


class Store:
    """Objects in memory, each write stamped with the clock's time."""

    def __init__(self, clock: Clock) -> None:
        self.clock, self.objects, self.writes = clock, {}, []

    def bounded(self, retry_deadline_s: float):
        return self

    def read_generation(self, uri: str):
        if uri not in self.objects:
            raise NotFound(uri)
        return self.objects[uri]

    def write_if_generation(self, uri: str, data: bytes, generation: int) -> None:
        assert self.objects.get(uri, (b"", 0))[1] == generation
        self.objects[uri] = (data, generation + 1)
        self.writes.append(self.clock())


class Down:
    def bounded(self, retry_deadline_s: float):
        raise TemporaryError("Cloud Storage: 503")


def test_the_record_is_written_at_most_once_a_second_by_one_writer_and_never_raises(emulator_stack, bucket, caplog):
    storage, lay, clock = emulator_stack.storage, Layout(), Clock()
    arrival = layout.parse_arrival(bucket, "incoming/d/x.csv", 5, lay)
    uri = failing.uri_of(lay, arrival)
    assert failing.note(storage, lay, arrival, TemporaryError("first"), clock)
    clock.now += failing.WRITE_INTERVAL_S / 2
    assert not failing.note(storage, lay, arrival, TemporaryError("too soon"), clock)
    clock.now += failing.WRITE_INTERVAL_S / 2
    assert failing.note(storage, lay, arrival, TemporaryError("second"), clock)
    record = json.loads(storage.read_bytes(uri))
    assert (record["schema"], record["attempts"], record["error"], record["kind"], record["at"]) == (
        failing.SCHEMA, 2, "TemporaryError: second", "temporary", clock.now)
    clock.now += failing.WRITE_INTERVAL_S
    assert not failing.note(Racing(storage), lay, arrival, TemporaryError("lost the race"), clock)
    assert json.loads(storage.read_bytes(uri))["error"] == "TemporaryError: second"
    assert not failing.note(Down(), lay, arrival, TemporaryError("anything"), clock)
    assert "could not record that incoming/d/x.csv is failing" in caplog.text
    failing.clear(storage, lay, arrival)
    assert not storage.exists(uri)


def test_the_records_writes_keep_cloud_storages_rate_however_often_the_event_comes():
    """An event redelivered every 0.1 s for 5 s: the record is rewritten, but never sooner after its last write than
    Cloud Storage takes a write to one object name (``tests/fakes/gcs_rate.RULE``: one a second)."""
    clock = Clock()
    store = Store(clock)
    arrival = layout.parse_arrival("b", "incoming/d/x.csv", 5, Layout())
    for _ in range(50):
        failing.note(store, Layout(), arrival, TemporaryError("again"), clock)
        clock.now += 0.1
    assert len(store.writes) >= 4
    assert np.diff(store.writes).min() >= RULE["per_seconds"] / RULE["writes"]


def test_an_unexpected_error_is_one_line_naming_where_it_was_raised():
    def feed():
        raise IndexError("index -1 is out of bounds\nfor axis 0 with size 0")

    try:
        feed()
    except IndexError as exc:
        kind, line = failing.error_line(exc)
    assert kind == "unexpected" and "\n" not in line
    assert line.startswith("IndexError: index -1 is out of bounds for axis 0 with size 0 (at core/test_failing.py:")
    assert line.endswith(" in feed)")
    assert len(failing.error_line(TemporaryError("x" * 1000))[1]) == failing.MAX_ERROR
