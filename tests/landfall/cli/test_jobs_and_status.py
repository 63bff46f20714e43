"""``landfall render-tfjob | republish | status`` (``landfall.cli.jobs``) against the emulators."""

from __future__ import annotations

import json

import pytest
import yaml

from landfall import cli
from landfall.arrival import route
from landfall.core.artifacts import rejections, retractions
from landfall.core.contracts.layout import Arrival, Layout
from landfall.core.contracts.messages import Rejection
from landfall.submit import jobmeta
from landfall.submit.backends.local import LocalBackend
from landfall.submit.handler import handle_message
from tests.fakes.kube_api import validate
from tests.support import convert_arrival, runtime, set_state


def test_render_tfjob_prints_what_the_consumer_submits(emulator_stack, bucket, tmp_path, capsys, monkeypatch):
    request = convert_arrival(emulator_stack.storage, bucket, "render", tmp_path)
    # (this test converted a local file, so the manifest's source is not the arrival: name the request)
    assert cli.main(["render-tfjob", "--manifest", request.manifest, "--workers", "3", "--gpus-per-worker", "2",
                     "--image", "registry/trainer@sha256:abc", "--request-id", request.request_id]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert validate(printed) == []
    worker = printed["spec"]["tfReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 3
    assert worker["template"]["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 2}
    assert worker["template"]["spec"]["containers"][0]["image"] == "registry/trainer@sha256:abc"

    rt = runtime(emulator_stack, bucket, LocalBackend(tmp_path / "state"), workers=3, gpus_per_worker=2,
                 trainer_image="registry/trainer@sha256:abc")
    assert handle_message(request.to_json(), {}, rt) == "submitted"
    (submitted,) = rt.backend.list("render")
    assert submitted["metadata"]["name"] == printed["metadata"]["name"]
    assert submitted["metadata"]["labels"] == printed["metadata"]["labels"]
    assert submitted["spec"] == printed["spec"]
    assert jobmeta.inputs_of(submitted) == jobmeta.inputs_of(printed)


def test_republish_publishes_a_manual_rerun(emulator_stack, bucket, topic, tmp_path, capsys, monkeypatch):
    request = convert_arrival(emulator_stack.storage, bucket, "again", tmp_path)
    rt = runtime(emulator_stack, bucket, LocalBackend(tmp_path / "state"))
    assert handle_message(request.to_json(), {}, rt) == "submitted"
    set_state(rt.backend, jobmeta.name_of(rt.backend.list("again")[0]), "Succeeded")
    monkeypatch.setenv("LANDFALL_BUCKET", bucket)
    monkeypatch.setenv("LANDFALL_REQUEST_TOPIC", topic)
    assert cli.main(["republish", "--dataset", "again"]) == 0
    assert cli.main(["republish", "--manifest", request.manifest]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [p["reason"] for p in printed] == ["manual", "manual"]
    got = emulator_stack.pubsub.pull(topic, timeout_s=5.0)
    emulator_stack.pubsub.ack(topic, [m.ack_id for m in got])
    bodies = [json.loads(m.data) for m in got]
    assert {b["request_id"] for b in bodies} == {p["request_id"] for p in printed}
    assert all(b["manifest"] == request.manifest and b["reason"] == "manual" for b in bodies)
    assert request.request_id not in {b["request_id"] for b in bodies}
    outcomes = [handle_message(m.data, m.attributes, rt) for m in got]
    assert sorted(outcomes) in (["coalesced", "submitted"], ["duplicate", "submitted"], ["submitted", "submitted"])
    assert len(rt.backend.list("again")) >= 2  # the rerun happened although the data did not change


def test_status_shows_arrivals_jobs_metrics_and_dead_letters(emulator_stack, bucket, tmp_path, capsys,
                                                              monkeypatch):
    storage, ps = emulator_stack.storage, emulator_stack.pubsub
    request = convert_arrival(storage, bucket, "shown", tmp_path)
    state = tmp_path / "state"
    rt = runtime(emulator_stack, bucket, LocalBackend(state))
    assert handle_message(request.to_json(), {}, rt) == "submitted"
    name = jobmeta.name_of(rt.backend.list("shown")[0])
    set_state(rt.backend, name, "Running")
    storage.write_bytes(f"gs://{bucket}/runs/{name}/metrics.json", json.dumps({
        "schema": "landfall.metrics/v1", "status": "running", "restarts": 0,
        "epochs": [{"epoch": 1, "loss": 0.5, "val_loss": 0.6, "wall_s": 1.0, "examples_per_s": 100.0}]}).encode())
    assert handle_message(b"garbage", {}, rt) == "rejected"
    # An arrival retracted because its object was overwritten, and one the converter refused.
    older = convert_arrival(storage, bucket, "shown", tmp_path, seed=1)
    aid = older.manifest.rsplit("/", 2)[1]
    retractions.retract(storage, Layout(), Arrival(bucket, "incoming/shown/part-1.npy", 1, "shown", aid),
                        "superseded", 2)
    rejections.record(Rejection(stage="arrival", reason="quoted_newline", detail="a quoted field holds a line break",
                                dataset="shown", source={"bucket": bucket, "name": "incoming/shown/x.csv",
                                                         "generation": 7}),
                      "x.csv", storage=storage, lay=Layout(), bucket=bucket, key="x.csv-g7")
    # An arrival dispatched to the Cloud Run job whose manifest is not there yet.
    big = Arrival(bucket, "incoming/shown/big.csv", 9, "shown", "big-g9")
    storage.write_bytes(route.marker_uri(big, Layout()),
                        route.Marker("landfall-convert", 4, 1.0, "landfall-convert-abc12").to_json(big))
    dead = f"dl-{bucket}"
    ps.ensure_topic(dead)
    ps.ensure_subscription(dead, dead)
    ps.publish(dead, request.to_json())
    monkeypatch.setenv("LANDFALL_BUCKET", bucket)
    monkeypatch.setenv("LANDFALL_LOCAL_STATE", str(state))
    monkeypatch.setenv("LANDFALL_DEAD_LETTER_SUBSCRIPTION", dead)
    assert cli.main(["status", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    shown = report["datasets"]["shown"]
    assert (shown["arrivals"], shown["retracted"], shown["rejected"]) == (1, 1, 1)
    assert [(r["name"], r["reason"], r["by_generation"]) for r in shown["latest_retractions"]] == [
        ("incoming/shown/part-1.npy", "superseded", 2)]
    assert [(r["name"], r["generation"], r["reason"]) for r in shown["latest_rejections"]] == [
        ("incoming/shown/x.csv", 7, "quoted_newline")]
    assert report["datasets"]["_invalid"]["rejected"] == 1
    assert shown["converting"] == 1 and [(r["name"], r["generation"], r["execution"], r["task_count"])
                                         for r in shown["latest_converting"]] == [
        ("incoming/shown/big.csv", 9, "landfall-convert-abc12", 4)]
    (job,) = report["jobs"]
    assert job["name"] == name and job["state"] == "Running" and job["requests"] == [request.request_id]
    assert job["metrics"]["loss"] == 0.5 and job["metrics"]["epochs"] == 1
    assert report["dead_letter"]["count"] == 1
    assert report["dead_letter"]["requests"][0]["request_id"] == request.request_id
    assert cli.main(["status", "--dataset", "shown"]) == 0
    text = capsys.readouterr().out
    assert name in text and "Running" in text and "dead-letter: 1" in text
    assert "1 arrivals, 1 retracted, 1 rejected, 1 converting on Cloud Run" in text and "quoted_newline" in text
    assert "converting incoming/shown/big.csv#9: Cloud Run execution landfall-convert-abc12 (4 tasks" in text
    assert "retracted incoming/shown/part-1.npy#1: superseded by generation 2" in text


@pytest.fixture
def spied_reconcile(monkeypatch):
    """``coalesce.reconcile`` (what releases jobs) replaced by a spy: the calls, and what the next call does."""
    from landfall.submit import coalesce

    calls, outcome = [], {"result": ["job-released"]}

    def spy(backend, storage, cfg, layout=None, dataset=None, clock=None):
        calls.append(dataset)
        if isinstance(outcome["result"], Exception):
            raise outcome["result"]
        return outcome["result"]

    monkeypatch.setattr(coalesce, "reconcile", spy)
    return calls, outcome


def test_status_is_read_only_unless_asked_to_reconcile(emulator_stack, bucket, tmp_path, capsys, monkeypatch,
                                                       spied_reconcile):
    calls, _ = spied_reconcile
    monkeypatch.setenv("LANDFALL_BUCKET", bucket)
    monkeypatch.setenv("LANDFALL_LOCAL_STATE", str(tmp_path / "state"))
    assert cli.main(["status", "--json", "--no-dead-letter"]) == 0
    assert "released" not in json.loads(capsys.readouterr().out)
    assert cli.main(["status", "--no-dead-letter", "--dataset", "d"]) == 0
    assert "released" not in capsys.readouterr().out
    assert calls == []  # plain status released nothing

    assert cli.main(["status", "--json", "--no-dead-letter", "--reconcile", "--dataset", "d"]) == 0
    assert json.loads(capsys.readouterr().out)["released"] == ["job-released"]
    assert cli.main(["status", "--no-dead-letter", "--reconcile"]) == 0
    assert "released: job-released" in capsys.readouterr().out
    assert calls == ["d", None]


def test_status_reconcile_reports_a_failed_release_and_still_shows_the_rest(emulator_stack, bucket, tmp_path,
                                                                              capsys, monkeypatch, spied_reconcile):
    calls, outcome = spied_reconcile
    outcome["result"] = KeyError("landfall.io/dataset")  # e.g. a TFJob without Landfall's labels
    convert_arrival(emulator_stack.storage, bucket, "shown", tmp_path)
    monkeypatch.setenv("LANDFALL_BUCKET", bucket)
    monkeypatch.setenv("LANDFALL_LOCAL_STATE", str(tmp_path / "state"))
    assert cli.main(["status", "--json", "--no-dead-letter", "--reconcile"]) == 1
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert len(calls) == 1 and "released" not in report
    assert report["reconcile_error"].startswith("KeyError") and "reconcile failed: KeyError" in err
    assert report["datasets"]["shown"]["arrivals"] == 1  # the rest of the report is there
