"""Series arrivals whose chunks drop to nothing, through the deployed function (issue #54): ``on_data_arrival`` under
functions-framework, on fake-gcs-server and the Pub/Sub emulator, with the dataset's spec in the bucket.

A chunk of a series can lose every row before it is stored: to ``arrival.drop_nonfinite`` (a channel empty for a
stretch), to ``duplicates.Merger`` (rows repeating the time the chunk before ended on), to a gap that closes the
segment before it, or because it held one row (the merger always hands the converter the last time of a file as a
chunk of its own). Whatever the file, the function answers 200 and either converts exactly what an independent
reading of the rows says (each time once by the spec's rule, the rows holding a non-finite value dropped, segments
cut at steps over ``max_gap``, those shorter than a window left out: the windows read back from the shards are those
of these rows), or refuses the arrival in one line that names the file and the reason, with nothing left written.

And an arrival whose event fails (a temporary error, or a bug) is shown by ``landfall status`` and ``landfall trace``
with its error while Pub/Sub redelivers it, until it converts or is refused.
"""

from __future__ import annotations

import io
import itertools
import json
import logging
import os
import re
import time
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from functions_framework import create_app
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from landfall import cli
from landfall.arrival import converter
from landfall.core.artifacts import failing, specs
from landfall.core.contracts import layout
from landfall.core.contracts.layout import Layout
from landfall.core.contracts.messages import Manifest
from landfall.core.errors import NotFound, TemporaryError
from landfall.core.rules import duplicates
from tests.landfall.arrival.ranged_helpers import series_windows

MAIN = str(Path(__file__).parents[2] / "functions" / "main.py")
DAPHNET = ("ankle_horiz_fwd", "ankle_vert", "ankle_horiz_lateral", "leg_horiz_fwd", "leg_vert", "leg_horiz_lateral",
           "trunk_horiz_fwd", "trunk_vert", "trunk_horiz_lateral")
CHANNELS = ("a", "b")
GAP = 50.0  # a step over MAX_GAP
MAX_GAP = 5.0


class Lines(logging.Handler):
    """What the ``landfall`` loggers say (they do not propagate to the root logger once ``main`` set them up)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def function(emulator_stack, topic, monkeypatch):
    """The deployed entry point, and what its loggers say."""
    monkeypatch.setenv("LANDFALL_REQUEST_TOPIC", topic)
    monkeypatch.setenv("LANDFALL_CHUNK_INSTANCES", "8192")  # each example sets its own; restored after the test
    app = create_app("on_data_arrival", MAIN, "cloudevent")
    import main  # the module functions-framework loaded

    main.arrival.runtime.cache_clear()
    lines = Lines()
    logging.getLogger("landfall").addHandler(lines)
    try:
        yield app.test_client(), lines, main
    finally:
        logging.getLogger("landfall").removeHandler(lines)
        main.arrival.runtime.cache_clear()


def finalized(bucket: str, name: str, generation: int, size: int) -> dict:
    """The CloudEvent Eventarc delivers for a finalized object (as tests/functions/events/storage_finalized.json)."""
    return {
        "attributes": {"specversion": "1.0", "id": uuid.uuid4().hex, "type": "google.cloud.storage.object.v1.finalized",
                       "source": f"//storage.googleapis.com/projects/_/buckets/{bucket}", "subject": f"objects/{name}"},
        "data": {"kind": "storage#object", "name": name, "bucket": bucket, "generation": str(generation),
                 "metageneration": "1", "size": str(size)},
    }


def post(client, event: dict):
    headers = {f"ce-{k}": v for k, v in event["attributes"].items()}
    return client.post("/", json=event["data"], headers={**headers, "Content-Type": "application/json"})


def series_spec(dataset: str, channels: tuple[str, ...], time_column: str, length: int, stride: int = 1,
                max_gap: float | None = MAX_GAP, policy: str = duplicates.DEFAULT) -> dict:
    series = {"time_column": time_column, "channels": list(channels), "duplicate_times": policy,
              **({"max_gap": max_gap} if max_gap is not None else {})}
    return {"apiVersion": specs.API_VERSION, "name": dataset,
            "shape": {"window": {"length": length, "stride": stride}, "features": len(channels)},
            "arrival": {"drop_nonfinite": True, "series": series}}


def csv_bytes(time_column: str, channels: tuple[str, ...], times: np.ndarray, values: np.ndarray) -> bytes:
    """A sensor export: a missing value is an empty cell, as Daphnet's exports and spreadsheets write it."""
    out = [",".join((time_column, *channels))]
    for t, row in zip(times, values, strict=True):
        out.append(",".join([repr(float(t)), *("" if np.isnan(v) else repr(float(v)) for v in row)]))
    return ("\n".join(out) + "\n").encode()


def parquet_bytes(time_column: str, channels: tuple[str, ...], times: np.ndarray, values: np.ndarray,
                  nulls: bool) -> bytes:
    """A missing value is a null (``nulls``) or a NaN."""
    columns = {time_column: pa.array(times)}
    for j, name in enumerate(channels):
        missing = np.isnan(values[:, j])
        columns[name] = pa.array(values[:, j], mask=missing if nulls else None)
    buf = io.BytesIO()
    pq.write_table(pa.table(columns), buf)
    return buf.getvalue()


# -- what the arrival must become, read independently of the converter ------------------------------------------
def stored_rows(times: np.ndarray, values: np.ndarray, policy: str) -> tuple[np.ndarray, np.ndarray, int, int] | str:
    """The rows a series stores, by the spec's rules, in one pass over the whole file: each time once (``policy``),
    then the rows holding a non-finite value dropped; with them the rows dropped and the rows merged. ``reject``
    with a repeated time: the reason the arrival is refused."""
    v = np.asarray(values, np.float32).astype(np.float64)  # channels are read as float32
    starts = np.flatnonzero(np.r_[True, times[1:] != times[:-1]])
    counts = np.diff(np.r_[starts, len(times)])
    if policy == duplicates.REJECT and len(starts) < len(times):
        return "duplicate_timestamps"
    if policy in (duplicates.FIRST, duplicates.REJECT):
        merged = v[starts]
    elif policy == duplicates.LAST:
        merged = v[starts + counts - 1]
    else:
        merged = np.add.reduceat(v, starts, axis=0) / counts[:, None]
    t, merged = times[starts], merged.astype(np.float32)
    ok = np.isfinite(merged).all(axis=1)
    return t[ok], merged[ok], int((~ok).sum()), len(times) - len(starts)


def segments_of(times: np.ndarray, max_gap: float, length: int) -> list[tuple[int, int]]:
    """``(first row, rows)`` of each run without a step over ``max_gap`` that holds a window."""
    cuts = [0, *(np.flatnonzero(np.diff(times) > max_gap) + 1).tolist(), len(times)]
    return [(a, b - a) for a, b in itertools.pairwise(cuts) if b - a >= length]


# -- one arrival through the function ---------------------------------------------------------------------------
def arrive(emulator_stack, bucket: str, client, spec: dict, name: str, body: bytes):
    """Applies ``spec``, uploads ``body`` as ``name`` and delivers its finalize event: (response, arrival)."""
    storage = emulator_stack.storage
    specs.apply(storage, bucket, spec)
    storage.write_bytes(f"gs://{bucket}/{name}", body)
    info = storage.stat(f"gs://{bucket}/{name}")
    response = post(client, finalized(bucket, name, info.generation, info.size))
    return response, layout.parse_arrival(bucket, name, info.generation, Layout())


def check_outcome(storage, lines: Lines, arrival, response, expected: dict) -> None:
    """The function answered 200 and did what ``expected`` says: ``reason`` (refused in one line naming the file,
    nothing written for the arrival) or ``rows`` (converted: exactly these rows' windows)."""
    assert response.status_code == 200, response.data[-2000:]
    bucket, dataset, aid = arrival.bucket, arrival.dataset, arrival.arrival_id
    folder = f"gs://{bucket}/{layout.shards_prefix(Layout(), dataset, aid)}"
    rejection_uri = f"gs://{bucket}/{layout.rejection_name(Layout(), dataset, aid)}"
    assert not storage.list(f"gs://{bucket}/tmp/{dataset}/"), "attempt-private objects left behind"
    source = f"gs://{bucket}/{arrival.name}"
    errors = [r for r in lines.records if r.levelno >= logging.ERROR]
    assert not [r for r in lines.records if r.exc_info], "a traceback was logged"
    if "reason" in expected:
        rejection = json.loads(storage.read_bytes(rejection_uri))
        assert rejection["reason"] == expected["reason"], rejection
        assert storage.list(folder) == [], "a refused arrival left records"
        [line] = [r.getMessage() for r in errors]
        assert line.startswith(f"rejected {source}: {expected['reason']}: ") and "\n" not in line, line
        if expected.get("detail"):
            assert re.search(expected["detail"], line), line
        return
    with pytest.raises(NotFound):
        storage.read_bytes(rejection_uri)
    assert not errors, [r.getMessage() for r in errors]
    manifest = Manifest.from_json(storage.read_bytes(folder + "manifest.json"))
    assert not storage.exists(folder + layout.FAILING)
    t, v = expected["rows"]
    length, stride = manifest.shape[0], manifest.series["stride"]
    max_gap = manifest.series["max_gap"]
    if expected.get("max_gap") is not None:
        assert max_gap == expected["max_gap"]
    elif len(t) > 1:  # derived from the rows: a number, whichever chunk its rows came in
        assert np.isfinite(max_gap) and max_gap > 0, manifest.series
    runs = segments_of(t, max_gap, length)
    assert [(s[1], s[3], s[4]) for s in manifest.series["segments"]] == [(n, t[a], t[a + n - 1]) for a, n in runs]
    want = [v[a + s:a + s + length] for a, n in runs for s in range(0, n - length + 1, stride)]
    got = series_windows(storage, manifest)
    assert manifest.count == len(want) == len(got)
    np.testing.assert_array_equal(got, np.stack(want))
    assert manifest.dropped_nonfinite == expected["dropped"]
    assert manifest.series["merged_rows"] == expected["merged"]


def expect(times: np.ndarray, values: np.ndarray, policy: str, length: int, max_gap: float | None) -> dict:
    """What the arrival must become (see ``check_outcome``)."""
    found = stored_rows(times, values, policy)
    if isinstance(found, str):
        return {"reason": found}
    t, v, dropped, merged = found
    if len(t) < length:
        return {"reason": "too_short", "detail": rf"^rejected \S+: too_short: {len(t)} rows"}
    if max_gap is not None and not segments_of(t, max_gap, length):
        return {"reason": "all_gaps"}
    return {"rows": (t, v), "dropped": dropped, "merged": merged, "max_gap": max_gap}


# -- the Daphnet export of the issue ------------------------------------------------------------------------------
def test_a_daphnet_export_with_a_channel_empty_for_its_second_half_converts_its_finite_rows(emulator_stack, bucket,
                                                                                           function):
    """The export of issue #54: 9 named channels at 64 Hz, a time column, 128 rows, ``ankle_vert`` empty from row 65
    on, for a spec with ``arrival.drop_nonfinite: true``. It raised IndexError in ``SeriesWriter.feed`` (the merger's
    last chunk, one row, dropped to nothing), answered 500 and was redelivered into the dead letter. Now its 64 finite
    rows convert, and the arrival is recorded nowhere as failing."""
    client, lines, _ = function
    rng = np.random.default_rng(54)
    times = np.arange(128) / 64.0
    values = np.round(rng.normal(0, 300, size=(128, 9)), 1)
    values[64:, DAPHNET.index("ankle_vert")] = np.nan
    spec = series_spec("gait", DAPHNET, "time", length=32, max_gap=None)
    name = "incoming/gait/S01R01-half-empty.csv"
    response, arrival = arrive(emulator_stack, bucket, client, spec, name, csv_bytes("time", DAPHNET, times, values))
    check_outcome(emulator_stack.storage, lines, arrival, response,
                  {**expect(times, values, duplicates.DEFAULT, 32, None), "max_gap": 3 / 64})
    manifest = Manifest.from_json(emulator_stack.storage.read_bytes(
        f"gs://{bucket}/{layout.manifest_name(Layout(), 'gait', arrival.arrival_id)}"))
    assert (manifest.count, manifest.dropped_nonfinite, manifest.series["stored_rows"]) == (33, 64, 64)


def test_a_daphnet_export_with_no_finite_row_is_refused_in_one_line(emulator_stack, bucket, function):
    """The same export with ``ankle_vert`` empty throughout: nothing left to store, refused as too short, saying how
    many rows were dropped, never a 500."""
    client, lines, _ = function
    times = np.arange(128) / 64.0
    values = np.ones((128, 9))
    values[:, DAPHNET.index("ankle_vert")] = np.nan
    spec = series_spec("gait", DAPHNET, "time", length=32, max_gap=None)
    response, arrival = arrive(emulator_stack, bucket, client, spec, "incoming/gait/S01R02-empty.csv",
                               csv_bytes("time", DAPHNET, times, values))
    check_outcome(emulator_stack.storage, lines, arrival, response, {
        "reason": "too_short",
        "detail": r"too_short: 0 rows left after dropping 128 with a non-finite or missing value \(arrival\."
                  r"drop_nonfinite\), fewer than one window of 32$"})


# -- any arrival whose chunks drop to nothing ------------------------------------------------------------------
KINDS = ("rows", "nonfinite", "duplicates", "gap", "scattered", "mixed")


@st.composite
def emptied_arrivals(draw) -> dict:
    """A series in blocks of ``chunk`` rows (the Parquet reader's chunks; a CSV this small is read as one), each
    block one of ``KINDS``: ordinary rows; rows that each hold a missing or infinite value; rows that repeat the time
    the series stood at; rows after a gap (so the block before is all before it); rows each after a gap (each too
    short for a window alone); a mix of finite and not. A last
    block of one row may follow (and with ``chunk`` 1 or 2 every chunk, or the merger's first, is one row)."""
    chunk = draw(st.integers(1, 4))
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=6))
    tail = draw(st.sampled_from((None, *KINDS)))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    times, values, now = [], [], 0.0
    for kind, rows in [*((k, chunk) for k in kinds), *([(tail, 1)] if tail else [])]:
        for i in range(rows):
            if kind == "duplicates" and times:
                step = 0.0
            elif times and (kind == "scattered" or (kind == "gap" and i == 0)):
                step = GAP
            else:
                step = 1.0 if times else 0.0
            now += step
            row = rng.integers(-20, 21, size=len(CHANNELS)) / 4.0  # exact in float32, and their means' sums exact
            if kind == "nonfinite" or (kind == "mixed" and rng.random() < 0.5):
                row[rng.integers(len(CHANNELS))] = np.inf if rng.random() < 0.25 else np.nan
            times.append(now)
            values.append(row)
    return {"chunk": chunk, "times": np.array(times), "values": np.array(values),
            "length": draw(st.integers(2, 4)), "stride": draw(st.integers(1, 2)),
            "policy": draw(st.sampled_from(duplicates.POLICIES)), "auto_gap": draw(st.booleans()),
            "fmt": draw(st.sampled_from(("csv", "parquet"))), "nulls": draw(st.booleans())}


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=emptied_arrivals())
def test_a_series_whose_chunks_drop_to_nothing_converts_exactly_or_is_refused_in_one_line(emulator_stack, bucket,
                                                                                         function, case):
    client, lines, main = function
    lines.records.clear()
    os.environ["LANDFALL_CHUNK_INSTANCES"] = str(case["chunk"])  # the fixture restores it
    main.arrival.runtime.cache_clear()
    dataset = f"s-{uuid.uuid4().hex[:10]}"
    max_gap = None if case["auto_gap"] else MAX_GAP
    spec = series_spec(dataset, CHANNELS, "t", case["length"], case["stride"], max_gap, case["policy"])
    times, values = case["times"], case["values"]
    body = (csv_bytes("t", CHANNELS, times, values) if case["fmt"] == "csv" else
            parquet_bytes("t", CHANNELS, times, values, case["nulls"]))
    response, arrival = arrive(emulator_stack, bucket, client, spec, f"incoming/{dataset}/export.{case['fmt']}", body)
    expected = expect(times, values, case["policy"], case["length"], max_gap)
    if case["auto_gap"] and "reason" not in expected and not emulator_stack.storage.exists(
            f"gs://{bucket}/{layout.manifest_name(Layout(), dataset, arrival.arrival_id)}"):
        # max_gap derived from the rows: refused only if no run of a window fits under the max_gap it names
        line = next(r.getMessage() for r in lines.records if r.levelno >= logging.ERROR)
        derived = float(re.search(r"max_gap=(\S+?):", line).group(1))
        assert not segments_of(expected["rows"][0], derived, case["length"]), line
        expected = {"reason": "all_gaps"}
    event(f"refused: {expected['reason']}" if "reason" in expected else "converted")
    check_outcome(emulator_stack.storage, lines, arrival, response, expected)


# -- an arrival whose event fails, shown before the dead letter takes it ------------------------------------------
def test_a_failing_arrival_is_shown_with_its_error_until_it_converts_or_is_refused(emulator_stack, bucket, function,
                                                                                    monkeypatch, tmp_path, capsys):
    """Its event raises (a temporary error, or an unexpected one): the function answers 500 and Pub/Sub redelivers
    it, and meanwhile the arrival's ``failing.json`` (``landfall.core.artifacts.failing``) names the error, so
    ``landfall status`` and ``landfall trace`` show it. A redelivery within the second does not rewrite the record
    (Cloud Storage's one write a second per object); a later one counts another attempt. Once the arrival converts,
    or is refused, nothing shows it as failing any more."""
    client, _, _ = function
    storage = emulator_stack.storage
    monkeypatch.setattr(failing, "WRITE_INTERVAL_S", 0.3)  # the rule, at a tenth of the time
    convert = converter.convert  # what the arrival function converts with (landfall.arrival.handler)
    problem: dict[str, Exception] = {"error": TemporaryError("gs://x: Cloud Storage answered 503 Backend Error")}

    def flaky(*args, **kwargs):
        raise problem["error"]

    monkeypatch.setattr(converter, "convert", flaky)
    spec = series_spec("pump", CHANNELS, "t", length=2)
    rows = csv_bytes("t", CHANNELS, np.arange(8.0), np.ones((8, 2)))
    response, arrival = arrive(emulator_stack, bucket, client, spec, "incoming/pump/day-1.csv", rows)
    assert response.status_code == 500
    event = finalized(bucket, arrival.name, arrival.generation, len(rows))
    uri = f"gs://{bucket}/{layout.failing_name(Layout(), 'pump', arrival.arrival_id)}"
    record = json.loads(storage.read_bytes(uri))
    assert (record["kind"], record["attempts"], record["source"]["name"]) == ("temporary", 1, arrival.name)
    assert record["error"] == "TemporaryError: gs://x: Cloud Storage answered 503 Backend Error"
    written = storage.stat(uri).generation
    assert post(client, event).status_code == 500  # redelivered at once: not rewritten
    assert storage.stat(uri).generation == written
    time.sleep(0.35)
    problem["error"] = IndexError("index -1 is out of bounds for axis 0 with size 0")  # a bug: retried as well
    assert post(client, event).status_code == 500
    again = json.loads(storage.read_bytes(uri))
    assert (again["kind"], again["attempts"], again["first_failed_at"]) == ("unexpected", 2, record["first_failed_at"])
    assert again["error"].startswith("IndexError: index -1 is out of bounds for axis 0 with size 0 (at ")
    assert again["error"].endswith(" in flaky)")

    monkeypatch.setenv("LANDFALL_BUCKET", bucket)
    monkeypatch.setenv("LANDFALL_LOCAL_STATE", str(tmp_path / "state"))
    assert cli.main(["status", "--json", "--no-dead-letter", "--dataset", "pump"]) == 0
    shown = json.loads(capsys.readouterr().out)["datasets"]["pump"]
    assert (shown["arrivals"], shown["rejected"], shown["failing"]) == (0, 0, 1)
    [entry] = shown["latest_failing"]
    assert (entry["name"], entry["generation"], entry["kind"], entry["attempts"]) == (
        arrival.name, arrival.generation, "unexpected", 2)
    assert cli.main(["status", "--no-dead-letter", "--dataset", "pump"]) == 0
    text = capsys.readouterr().out
    assert "0 arrivals, 0 retracted, 0 rejected, 0 converting on Cloud Run, 0 request(s) waiting for the next job, " \
           "1 failing (their event retried)" in text
    assert f"  failing   {arrival.name}#{arrival.generation}: IndexError: index -1 is out of bounds" in text
    assert cli.main(["trace", f"gs://{bucket}/{arrival.name}", "--json"]) == 0
    traced = json.loads(capsys.readouterr().out)
    assert traced["stop"].startswith("not converted: its event fails (unexpected: IndexError: index -1")
    assert [s["what"] for s in traced["steps"]] == ["object", "failing"]

    # The cause is gone: the next redelivery converts it, and the record no longer counts.
    monkeypatch.setattr(converter, "convert", convert)
    assert post(client, event).status_code == 200
    assert cli.main(["status", "--json", "--no-dead-letter", "--dataset", "pump"]) == 0
    shown = json.loads(capsys.readouterr().out)["datasets"]["pump"]
    assert shown["arrivals"] == 1 and "failing" not in shown and "latest_failing" not in shown
    # An arrival that fails, then is refused for good (too short for a window): shown as rejected only.
    monkeypatch.setattr(converter, "convert", flaky)
    short = csv_bytes("t", CHANNELS, np.arange(1.0), np.ones((1, 2)))
    assert arrive(emulator_stack, bucket, client, spec, "incoming/pump/day-2.csv", short)[0].status_code == 500
    monkeypatch.setattr(converter, "convert", convert)
    refused = storage.stat(f"gs://{bucket}/incoming/pump/day-2.csv")
    assert post(client, finalized(bucket, "incoming/pump/day-2.csv", refused.generation, refused.size)).status_code \
        == 200
    assert cli.main(["status", "--json", "--no-dead-letter", "--dataset", "pump"]) == 0
    shown = json.loads(capsys.readouterr().out)["datasets"]["pump"]
    assert (shown["arrivals"], shown["rejected"], shown.get("failing", 0)) == (1, 1, 0)
