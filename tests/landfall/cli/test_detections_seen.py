"""Detections seen everywhere (#40, part 4), on the emulators with detections the scorer's handler made: ``landfall
trace`` ends at an arrival's detections (or says why there are none), ``landfall status`` counts the scored and
anomalous arrivals and peeks at the scorer's dead letters, and ``landfall report`` shows the newest detections with
the plot of each series' located scores. A corrupt summary stops none of them.

The champion reconstructs every window as zeros (``tests/landfall/detect/helpers.zero_model``): a spike of 3.0 makes
the seven rows around it anomalous (one range, peak 36/16 at the spike)."""

from __future__ import annotations

import io
import json
import re

import pyarrow.parquet as pq
import pytest

from landfall import cli
from landfall.cli import trace as trace_mod
from landfall.core.artifacts import detections
from landfall.core.contracts.layout import Layout
from landfall.detect import handler
from landfall.views import page
from landfall.views.reader import Reader
from tests.conftest import pull_all, unique
from tests.landfall.detect.helpers import (
    SERIES_SPEC,
    commit,
    crown,
    scorer_runtime,
    series_frame,
    store_spec,
    zero_model,
)
from tests.landfall.local.test_plots_named import svg_problems


def _csv(df) -> bytes:
    return df.to_csv(index=False).encode()


def _stamped(spike_at: int, seed: int = 0):
    df = series_frame(spike_at=spike_at, seed=seed)
    df["t"] = [f"2024-05-01T00:00:{i:02d}Z" for i in range(len(df))]
    return df


@pytest.fixture
def scored(emulator_stack, bucket, topic, arrival_runtime, tmp_path):
    """Dataset pump with a champion: arrival a (timestamped, spike at row 20) and c (spike at row 10) scored by the
    handler, b committed and not scored; dataset valve committed without a champion; a corrupt summary in b's folder
    and one of an arrival that does not exist."""
    storage, pubsub = emulator_stack.storage, emulator_stack.pubsub
    store_spec(storage, bucket, SERIES_SPEC)
    store_spec(storage, bucket, {**SERIES_SPEC, "name": "valve"})
    crown(storage, bucket, "pump", zero_model(tmp_path / "model", (4, 1)))
    out = unique("detections")
    pubsub.ensure_topic(out)
    pubsub.ensure_subscription(out, out)
    rt = scorer_runtime(emulator_stack, bucket, out)
    lay = Layout()
    reqs = {}
    for key, frame in (("a", _stamped(20)), ("b", series_frame(spike_at=None, seed=1)),
                       ("c", series_frame(spike_at=10, seed=2))):
        reqs[key] = commit(storage, arrival_runtime, bucket, f"incoming/pump/{key}.csv", _csv(frame), pubsub, topic)
    for key in ("a", "c"):
        assert handler.handle(reqs[key].to_json(), {}, rt) == "published"
    assert len(pull_all(pubsub, out, expect=2)) == 2
    reqs["v"] = commit(storage, arrival_runtime, bucket, "incoming/valve/v.csv", _csv(series_frame()), pubsub, topic)
    aids = {k: detections.arrival_of_manifest(r.manifest, lay, r.dataset) for k, r in reqs.items()}
    storage.write_bytes(f"gs://{bucket}/scores/pump/{aids['b']}/job-0/summary.json", b"{not json")
    storage.write_bytes(f"gs://{bucket}/scores/pump/gone-g1-00000000/job-1/summary.json",
                        json.dumps({"schema": "landfall.detections/v1", "message": {"schema": "other"}}).encode())
    return {"bucket": bucket, "aids": aids, "reqs": reqs, "storage": storage}


def test_trace_ends_at_the_detections_or_says_why_there_are_none(emulator_stack, scored, monkeypatch, capsys,
                                                                  tmp_path):
    bucket, aids, storage = scored["bucket"], scored["aids"], scored["storage"]
    monkeypatch.setenv("LANDFALL_BUCKET", bucket)
    monkeypatch.setenv("LANDFALL_LOCAL_STATE", str(tmp_path / "state"))
    assert cli.main(["trace", aids["a"], "--dataset", "pump", "--json"]) == 0
    t = json.loads(capsys.readouterr().out)
    step = t["steps"][-1]
    assert [s["what"] for s in t["steps"]][:2] == ["object", "manifest"] and step["what"] == "detections"
    d = step["detail"]
    assert (d["run"], d["seq"], d["kind"], d["count"], d["anomalies"], d["ranges_total"], d["published"]) == (
        "job-1", 1, "series", 40, 7, 1, True)
    [r] = d["ranges"]
    assert (r["first_row"], r["last_row"], r["start_at"], r["end_at"], r["peak_at"]) == (
        17, 23, "2024-05-01T00:00:17.000Z", "2024-05-01T00:00:23.000Z", "2024-05-01T00:00:20.000Z")
    summary = detections.read(storage, bucket, Layout(), "pump", aids["a"], "job-1")
    assert step["record"] == summary.uri and d["scores"] == summary.message["scores"] and storage.exists(d["scores"])
    assert t["stop"].endswith("; detections: 7 anomalous rows of 40 in 1 range(s), by champion job-1")
    assert cli.main(["trace", aids["a"], "--dataset", "pump"]) == 0
    text = capsys.readouterr().out
    assert re.search(r"detections scored by champion job-1 \(#1\): 7 anomalous rows of 40 above 0\.4, 1 range\(s\): "
                     r"2024-05-01T00:00:17\.000Z \.\. 2024-05-01T00:00:23\.000Z \(peak 2\.2\d* at "
                     r"2024-05-01T00:00:20\.000Z\); published; scores gs://", text), text
    assert text.splitlines()[-1] == "=> " + t["stop"]

    r = Reader(storage, bucket, Layout())
    b = trace_mod.trace(r, aids["b"], "pump")  # a champion, no summary (and one corrupt object in its folder)
    whats = [s.what for s in b.steps]
    assert whats[-2:] == ["detections", "detections"] and "unreadable detections summary" in b.steps[-2].text
    assert b.steps[-1].detail == {"scored": False, "champion": "job-1"}
    assert b.stop.endswith("; not scored: the scorer has not scored it (yet)")

    v = trace_mod.trace(r, aids["v"], "valve")  # no champion at all
    assert v.stop.endswith("; not scored: no champion when it arrived (dataset valve has none yet)")
    assert "landfall rescore --dataset valve" in v.steps[-1].text
    crown(storage, bucket, "valve", zero_model(tmp_path / "late", (4, 1)), run="job-7")  # crowned after it arrived
    v = trace_mod.trace(r, aids["v"], "valve")
    assert re.search(r"; not scored: no champion when it arrived \(the first, job-7, was promoted at \S+, after it "
                     r"was converted\)$", v.stop), v.stop


def test_status_counts_scored_and_anomalous_arrivals_and_the_scorer_dead_letters(emulator_stack, scored,
                                                                                 monkeypatch, capsys, tmp_path):
    bucket, pubsub = scored["bucket"], emulator_stack.pubsub
    dead = unique("scorer-dl")
    pubsub.ensure_topic(dead)
    pubsub.ensure_subscription(dead, dead)
    pubsub.publish(dead, scored["reqs"]["b"].to_json())
    monkeypatch.setenv("LANDFALL_BUCKET", bucket)
    monkeypatch.setenv("LANDFALL_LOCAL_STATE", str(tmp_path / "state"))
    assert cli.main(["status", "--json", "--scorer-dead-letter", dead]) == 0
    report_ = json.loads(capsys.readouterr().out)
    pump = report_["datasets"]["pump"]["detections"]
    assert (pump["scored"], pump["anomalous"], pump["anomalies"]) == (2, 2, 14)  # a and c; b unscored, corrupt left out
    assert [d["arrival"] for d in pump["latest_anomalous"]] == [scored["aids"]["c"], scored["aids"]["a"]]
    assert report_["datasets"]["valve"]["detections"]["scored"] == 0
    sdl = report_["scorer_dead_letter"]
    assert sdl["subscription"] == dead and sdl["count"] == 1
    assert sdl["requests"][0]["request_id"] == scored["reqs"]["b"].request_id
    assert cli.main(["status", "--dataset", "pump", "--scorer-dead-letter", dead]) == 0
    text = capsys.readouterr().out
    assert "  detections 2 arrival(s) scored on arrival, 2 anomalous (14 anomalies), newest scored at " in text
    assert f"  anomalous {scored['aids']['c']}: 7 of 40 rows in 1 range(s), champion job-1" in text
    assert f"scorer dead-letter: 1 request(s) not scored ({dead})" in text
    assert f"  {scored['reqs']['b'].request_id} pump {scored['reqs']['b'].manifest}" in text


def test_the_report_shows_the_newest_detections_with_their_located_scores(scored):
    bucket, aids, storage = scored["bucket"], scored["aids"], scored["storage"]
    data = page.collect(Reader(storage, bucket, Layout()))
    rows = data["detections"]
    assert [(d["dataset"], d["arrival"], d["champion"], d["anomalies"], d["count"], d["ranges_total"])
            for d in rows] == [("pump", aids["c"], "job-1", 7, 40, 1), ("pump", aids["a"], "job-1", 7, 40, 1)]
    assert rows[0]["scored_at"] > rows[1]["scored_at"]
    plots = {p["arrival"]: p for p in data["detection_plots"]}
    assert set(plots) == {aids["a"], aids["c"]}
    a = plots[aids["a"]]
    assert a["threshold"] == 0.4 and len(a["times"]) == 40 and a["time"] == "timestamp"
    scores = pq.read_table(io.BytesIO(storage.read_bytes(rows[1]["scores"]))).column("score").to_pylist()
    assert a["scores"] == scores and a["scores"][20] == pytest.approx(36 / 16, rel=0.01)  # every row: 40 < 1200 points
    assert [i for i, v in enumerate(a["scores"]) if v > a["threshold"]] == list(range(17, 24))
    assert [(r["first_row"], r["last_row"]) for r in a["ranges"]] == [(17, 23)]
    assert a["labelled_ranges"] == [{"start": a["times"][20], "end": a["times"][20]}]  # the file's label column
    html_text = page.render(data)
    json.dumps(data)
    section = html_text[html_text.index('<section id="detections">'):]
    section = section[:section.index('<section id="rejections">')]
    assert section.index(f'data-arrival="{aids["c"]}"') < section.index(f'data-arrival="{aids["a"]}"')
    assert re.search(r"2024-05-01T00:00:17\.000Z \.\. 2024-05-01T00:00:23\.000Z \(peak 2\.2\d*\)", section)
    assert "7 / 40 rows" in section and section.count('<svg class="scored"') == 2
    svgs = re.findall(r"<svg\b.*?</svg>", html_text, flags=re.S)
    assert len(svgs) >= 3 and [p for s in svgs for p in svg_problems(s)] == []
