"""The scorer's stage (landfall.detect.handler) on the emulators: a committed arrival scored by its dataset's champion
exactly as ``landfall score`` scores the same file, its results create-only under ``scores/``, one
``landfall.detection/v1`` message per (arrival, champion), whatever the duplicates.

The champion is a SavedModel that reconstructs every window as zeros (``helpers.zero_model``), so a window's error is
the mean of its squared values and the expected ranges are worked out by hand: a spike of 3.0 at row 20 makes the
four 4-row windows over it score 9/4 each, so rows 17..23 get a mean score of 9/16, 18/16, 27/16, 36/16, 27/16,
18/16, 9/16, all above the threshold 0.4."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from landfall import cli
from landfall.core.artifacts import champion, detections, model_files
from landfall.core.contracts import layout
from landfall.core.contracts.layout import Layout
from landfall.core.errors import TemporaryError
from landfall.detect import handler
from tests.conftest import pull_all

from .helpers import SERIES_SPEC, commit, crown, scorer_runtime, series_frame, store_spec, zero_model


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return {"series": zero_model(root / "series", (4, 1)), "instances": zero_model(root / "instances", (36, 10), 0.5),
            "no_threshold": zero_model(root / "bare", (4, 1), None),
            "row": zero_model(root / "row", (4, 1), 0.4, row=1.0)}


def _csv(df) -> bytes:
    return df.to_csv(index=False).encode()


def test_a_series_arrival_is_scored_as_landfall_score_scores_its_file(
        emulator_stack, bucket, topic, arrival_runtime, detections_topic, models, tmp_path, monkeypatch):
    storage, pubsub = emulator_stack.storage, emulator_stack.pubsub
    store_spec(storage, bucket, SERIES_SPEC)
    crown(storage, bucket, "pump", models["series"])
    request = commit(storage, arrival_runtime, bucket, "incoming/pump/a.csv", _csv(series_frame()), pubsub, topic)
    rt = scorer_runtime(emulator_stack, bucket, detections_topic)

    assert handler.handle(request.to_json(), {}, rt) == "published"
    [msg] = pull_all(pubsub, detections_topic, expect=1)
    message = json.loads(msg.data)
    aid = detections.arrival_of_manifest(request.manifest, Layout(), "pump")
    assert msg.attributes["detection_id"] == message["detection_id"] == detections.detection_id("pump", aid, "job-1")
    assert message["schema"] == "landfall.detection/v1" and message["arrival"] == aid
    assert message["champion"]["run"] == "job-1" and message["kind"] == "series" and message["count"] == 40
    [r] = message["ranges"]
    assert (r["first_row"], r["last_row"], r["peak_row"], r["start"], r["end"]) == (17, 23, 20, 17.0, 23.0)
    assert r["peak_score"] == pytest.approx(36 / 16, rel=0.01) and message["anomalies"] == 7

    # The same file through `landfall score`: identical rows, ranges and summary figures.
    monkeypatch.setenv("LANDFALL_BUCKET", bucket)
    out = tmp_path / "a.scores.parquet"
    assert cli.main(["score", f"gs://{bucket}/incoming/pump/a.csv", "--dataset", "pump", "--bucket", bucket,
                     "--out", str(out), "--json"]) == 0
    by_hand = json.loads(out.with_name("a.scores.json").read_text())
    on_arrival = pq.read_table(io.BytesIO(storage.read_bytes(message["scores"])))
    assert on_arrival.equals(pq.read_table(out))
    summary = detections.read(storage, bucket, Layout(), "pump", aid, "job-1")
    assert summary is not None and summary.scoring["ranges"] == by_hand["ranges"]
    for key in ("rows", "windows", "anomalies", "threshold", "quantiles", "labelled", "stride", "length"):
        assert summary.scoring[key] == by_hand[key], key
    assert summary.scoring["labelled"]["range"]["recall"] == 1.0  # the labelled spike is in the range

    # Delivered again (a duplicate notification, a republish): scored once, sent once.
    assert handler.handle(request.to_json(), {}, rt) == "duplicate"
    assert pull_all(pubsub, detections_topic, timeout_s=3) == []


def test_the_specs_row_score_is_what_arrival_detection_and_landfall_score_give(
        emulator_stack, bucket, topic, arrival_runtime, detections_topic, models, tmp_path, monkeypatch):
    """``shape.window.combine: row`` (a row's own error, averaged over the windows that hold it): the arrival's
    detection keeps the spike on its row (9.0 at row 20, every other row its noise), flagged against the champion's
    row threshold (1.0), and ``landfall score`` without ``--combine`` gives the same rows from the same spec."""
    storage, pubsub = emulator_stack.storage, emulator_stack.pubsub
    spec = {**SERIES_SPEC, "shape": {**SERIES_SPEC["shape"], "window": {"length": 4, "stride": 1, "combine": "row"}}}
    store_spec(storage, bucket, spec)
    crown(storage, bucket, "pump", models["row"])
    frame = series_frame()
    request = commit(storage, arrival_runtime, bucket, "incoming/pump/r.csv", _csv(frame), pubsub, topic)
    rt = scorer_runtime(emulator_stack, bucket, detections_topic)

    assert handler.handle(request.to_json(), {}, rt) == "published"
    [msg] = pull_all(pubsub, detections_topic, expect=1)
    message = json.loads(msg.data)
    assert message["threshold"] == 1.0 and message["anomalies"] == 1
    [r] = message["ranges"]
    assert (r["first_row"], r["last_row"], r["peak_row"]) == (20, 20, 20) and r["peak_score"] == pytest.approx(9.0)
    on_arrival = pq.read_table(io.BytesIO(storage.read_bytes(message["scores"])))
    np.testing.assert_allclose(on_arrival.column("score").to_numpy(), frame["v"].to_numpy() ** 2, rtol=1e-5)
    assert handler.handle(request.to_json(), {}, rt) == "duplicate"  # delivered again: scored once, sent once
    assert pull_all(pubsub, detections_topic, timeout_s=3) == []

    monkeypatch.setenv("LANDFALL_BUCKET", bucket)
    out = tmp_path / "r.scores.parquet"
    assert cli.main(["score", f"gs://{bucket}/incoming/pump/r.csv", "--dataset", "pump", "--bucket", bucket,
                     "--out", str(out), "--json"]) == 0
    assert json.loads(out.with_name("r.scores.json").read_text())["combine"] == "row"
    assert on_arrival.equals(pq.read_table(out))

    # A champion saved without a row threshold (trained before the spec asked for rows): the arrival is unscorable
    # (permanent, logged), not flagged against the window's threshold; nothing is written or sent.
    crown(storage, bucket, "pump", models["series"], run="job-window-only")
    again = commit(storage, arrival_runtime, bucket, "incoming/pump/r2.csv", _csv(frame), pubsub, topic)
    assert handler.handle(again.to_json(), {}, rt) == "unscorable"
    assert pull_all(pubsub, detections_topic, timeout_s=3) == []


def test_a_detection_names_the_rows_of_the_file_as_it_was_sent(
        emulator_stack, bucket, topic, arrival_runtime, detections_topic, models):
    """Issue #55: an arrival that repeats a time (a re-sent row before the spike, merged by the default
    ``duplicate_times: mean``) is announced with the file's rows: ``count`` the rows sent, the range's
    ``first_row``/``last_row``/``peak_row`` one further on than in the series, the scores one row per row sent."""
    storage, pubsub = emulator_stack.storage, emulator_stack.pubsub
    store_spec(storage, bucket, SERIES_SPEC)
    crown(storage, bucket, "pump", models["series"])
    frame = series_frame()
    sent = pd.concat([frame, frame.iloc[[5]]]).sort_values("t", kind="stable").reset_index(drop=True)
    request = commit(storage, arrival_runtime, bucket, "incoming/pump/b.csv", _csv(sent), pubsub, topic)
    assert handler.handle(request.to_json(), {}, scorer_runtime(emulator_stack, bucket, detections_topic)) == \
        "published"
    [msg] = pull_all(pubsub, detections_topic, expect=1)
    message = json.loads(msg.data)
    assert message["count"] == 41 and message["anomalies"] == 7
    [r] = message["ranges"]
    assert (r["first_row"], r["last_row"], r["peak_row"], r["start"], r["end"]) == (18, 24, 21, 17.0, 23.0)
    table = pq.read_table(io.BytesIO(storage.read_bytes(message["scores"]))).to_pydict()
    assert table["row"] == list(range(41)) and table["time"] == sent["t"].tolist()
    assert [i for i, a in enumerate(table["anomaly"]) if a] == list(range(18, 25))
    summary = detections.read(storage, bucket, Layout(), "pump", message["arrival"], "job-1")
    assert summary is not None and (summary.scoring["rows"], summary.scoring["merged_rows"]) == (41, 1)


def test_an_instance_arrival_is_scored_from_its_manifest(emulator_stack, bucket, topic, arrival_runtime,
                                                         detections_topic, models):
    storage, pubsub = emulator_stack.storage, emulator_stack.pubsub
    crown(storage, bucket, "inst", models["instances"])
    x = np.random.default_rng(0).normal(0, 0.1, (50, 36, 10)).astype(np.float32)
    x[[7, 8, 30]] += 5.0
    buf = io.BytesIO()
    np.save(buf, x)
    request = commit(storage, arrival_runtime, bucket, "incoming/inst/x.npy", buf.getvalue(), pubsub, topic)
    rt = scorer_runtime(emulator_stack, bucket, detections_topic)
    assert handler.handle(request.to_json(), {}, rt) == "published"
    [msg] = pull_all(pubsub, detections_topic, expect=1)
    message = json.loads(msg.data)
    assert message["kind"] == "instances" and message["count"] == 50 and message["anomalies"] == 3
    assert [(r["first_row"], r["last_row"]) for r in message["ranges"]] == [(7, 8), (30, 30)]
    table = pq.read_table(io.BytesIO(storage.read_bytes(message["scores"]))).to_pydict()
    assert table["index"] == list(range(50)) and [i for i, a in enumerate(table["anomaly"]) if a] == [7, 8, 30]


def test_what_is_not_scored_and_why(emulator_stack, bucket, topic, arrival_runtime, detections_topic, models):
    storage, pubsub = emulator_stack.storage, emulator_stack.pubsub
    store_spec(storage, bucket, SERIES_SPEC)
    request = commit(storage, arrival_runtime, bucket, "incoming/pump/a.csv", _csv(series_frame()), pubsub, topic)
    rt = scorer_runtime(emulator_stack, bucket, detections_topic)
    assert handler.handle(request.to_json(), {}, rt) == "no_champion"  # and a later champion does not go back
    assert handler.handle(b"{not json", {}, rt) == "invalid"
    foreign = scorer_runtime(emulator_stack, "another-bucket", detections_topic)
    assert handler.handle(request.to_json(), {}, foreign) == "invalid"
    crown(storage, bucket, "pump", models["no_threshold"], run="job-bare")
    assert handler.handle(request.to_json(), {}, rt) == "unscorable"
    crown(storage, bucket, "pump", models["series"], run="job-2")
    storage.delete(f"gs://{bucket}/incoming/pump/a.csv")  # the arrival stage's deletion rule retracts it ...
    from landfall.core.artifacts import retractions

    aid = detections.arrival_of_manifest(request.manifest, Layout(), "pump")
    gen = layout.generation_of("incoming/pump/a.csv", aid)
    retractions.retract(storage, Layout(), layout.parse_arrival(bucket, "incoming/pump/a.csv", gen, Layout()),
                        "deleted")
    assert handler.handle(request.to_json(), {}, rt) == "gone"
    assert pull_all(pubsub, detections_topic, timeout_s=3) == []
    assert storage.list(f"gs://{bucket}/scores/") == []


def test_a_champion_file_replaced_after_promotion_is_not_loaded(emulator_stack, bucket, topic, arrival_runtime,
                                                               detections_topic, models):
    """The champion record names its files by digest (``landfall.core.artifacts.model_files``) and the scorer checks
    them when it loads the model: a file replaced in the bucket since (tampered with, or half copied) scores nothing.
    The arrival is unscorable: no results, no message."""
    storage, pubsub = emulator_stack.storage, emulator_stack.pubsub
    store_spec(storage, bucket, SERIES_SPEC)
    uri = crown(storage, bucket, "pump", models["series"], run="job-replaced")
    champion.force(storage, champion.bucket_root(bucket), "pump", run="job-replaced", model=uri, evaluation={},
                   by="test", files=model_files.of_folder(models["series"]))
    storage.write_bytes(f"{uri}/threshold.json", json.dumps({"value": 1e9, "quantile": 0.99}).encode())
    request = commit(storage, arrival_runtime, bucket, "incoming/pump/a.csv", _csv(series_frame()), pubsub, topic)
    rt = scorer_runtime(emulator_stack, bucket, detections_topic)
    assert handler.handle(request.to_json(), {}, rt) == "unscorable"
    assert pull_all(pubsub, detections_topic, timeout_s=3) == []
    assert storage.list(f"gs://{bucket}/scores/") == []


def test_a_summary_without_its_marker_is_sent_once_by_whoever_finds_it_late(
        emulator_stack, bucket, topic, arrival_runtime, detections_topic, models):
    storage, pubsub = emulator_stack.storage, emulator_stack.pubsub
    store_spec(storage, bucket, SERIES_SPEC)
    crown(storage, bucket, "pump", models["series"])
    request = commit(storage, arrival_runtime, bucket, "incoming/pump/a.csv", _csv(series_frame()), pubsub, topic)
    rt = scorer_runtime(emulator_stack, bucket, detections_topic)
    assert handler.handle(request.to_json(), {}, rt) == "published"
    first = pull_all(pubsub, detections_topic, expect=1)
    aid = detections.arrival_of_manifest(request.manifest, Layout(), "pump")
    summary = detections.read(storage, bucket, Layout(), "pump", aid, "job-1")
    storage.delete(summary.uri.rsplit("/", 1)[0] + "/published.json")  # as if the sender died before its marker
    with pytest.raises(TemporaryError, match="not yet published"):  # young: the writer is still sending it
        handler.handle(request.to_json(), {}, rt)
    late = scorer_runtime(emulator_stack, bucket, detections_topic, publish_wait_s=0.0)
    assert handler.handle(request.to_json(), {}, late) == "published"
    [again] = pull_all(pubsub, detections_topic, expect=1)
    assert again.data == first[0].data  # the same message, its detection_id the consumers' key
