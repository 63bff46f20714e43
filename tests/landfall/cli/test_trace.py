"""``landfall trace`` on a small real flow (``tests/flow.py``, against the emulators): an arrival that trained,
one rejected, one retracted, one still pending, and a job back to its arrivals. The flow runs no scorer, so every
converted arrival ends saying why it has no detections (tests/landfall/cli/test_detections_seen.py has them)."""

from __future__ import annotations

import json

import pytest

from landfall import cli
from trainer.judging import baselines


@pytest.fixture
def trace(small_flow, monkeypatch, capsys):
    for key, value in small_flow.env().items():
        monkeypatch.setenv(key, value)

    def run(*args: str) -> tuple[int, str]:
        code = cli.main(["trace", *args])
        return code, capsys.readouterr().out

    return run


def _json(trace, *args: str) -> dict:
    code, out = trace(*args, "--json")
    assert code == 0, out
    return json.loads(out)


def test_an_arrival_that_trained_ends_at_its_champion(small_flow, trace):
    a, job = small_flow.arrivals["trained"], small_flow.jobs["trained"]
    report = _json(trace, f"gs://{small_flow.bucket}/{a.name}")
    assert report["stop"].startswith(f"trained by job {job} (Succeeded): promoted, the champion of sensors (#1)")
    # The detectors to beat (trainer.judging.baselines): a promoted model that one of them beats is named so.
    step = next(s for s in report["steps"] if s["what"] == "baselines")
    beaten = step["detail"]["beaten_by"]
    assert ("BEATEN BY " + ", ".join(beaten) in report["stop"]) if beaten else ("BEATEN" not in report["stop"])
    assert set(step["detail"]["baselines"]) == set(baselines.NAMES)
    assert step["detail"]["instances"]["validation"] > 0  # the job's held-out count
    whats = [s["what"] for s in report["steps"]]
    assert whats == ["object", "manifest", "request", "job", "job", "metrics", "baselines", "detection",
                     "champion_view", "timeline", "result", "champion", "detections"]
    chosen = next(s for s in report["steps"] if s["what"] == "detection")  # which candidate detects best (#47)
    assert chosen["text"].startswith(f"detects best: {chosen['detail']['chosen']} [")  # then what it is, in words
    assert "; rows scored: " in chosen["text"] and "] (surrogate average precision over kinds: " in chosen["text"]
    timeline = next(s for s in report["steps"] if s["what"] == "timeline")  # where the job's time went (#42)
    assert timeline["text"].startswith("timeline: manifests ") and "epochs " in timeline["text"]
    assert "outside the epochs" in timeline["text"] and timeline["detail"]["outside_epochs_s"] > 0
    assert [r["phase"] for r in timeline["detail"]["phases"]][:1] == ["reading the manifests"]
    view = next(s for s in report["steps"] if s["what"] == "champion_view")  # the dataset's first job: no champion
    assert view["detail"]["flagged"] is None and "no champion" in view["text"]
    object_step, request = report["steps"][0], report["steps"][2]
    assert object_step["detail"]["generation"] == a.generation == object_step["detail"]["live_generation"]
    assert request["detail"]["request_id"] == a.request_id
    metrics = next(s for s in report["steps"] if s["what"] == "metrics")
    assert metrics["detail"]["status"] == "succeeded" and metrics["detail"]["epochs"] == 2
    assert metrics["detail"]["verdict"] == "promoted"
    assert report["steps"][-2]["detail"] == {"run": job, "seq": 1, "reason": "first", "this_job": True}
    # It arrived before the dataset's first champion: the chain ends saying it was not scored, and why (#40).
    assert report["stop"].endswith(f"; not scored: no champion when it arrived (the first, {job}, was promoted at "
                                   f"{report['steps'][-2]['at']}, after it was converted)")
    assert report["steps"][-1]["detail"] == {"scored": False, "champion": job}
    # The same chain from its arrival id alone (the dataset found by listing), as a readable timeline.
    code, text = trace(a.arrival_id)
    assert code == 0 and text.splitlines()[-1] == "=> " + report["stop"]
    assert f"job {job} (#1 of sensors) released with 1 manifests for 1 requests" in text


def test_a_rejected_arrival_names_the_reason(small_flow, trace):
    a = small_flow.arrivals["rejected"]
    report = _json(trace, a.arrival_id, "--dataset", "sensors")
    assert report["stop"].startswith("rejected (corrupt_npy)")
    (rejection,) = [s for s in report["steps"] if s["what"] == "rejection"]
    assert rejection["detail"]["stage"] == "arrival" and "magic string" in rejection["detail"]["detail"]


def test_a_retracted_arrival_says_so_and_where_its_request_waits(small_flow, trace):
    a, behind = small_flow.arrivals["retracted"], small_flow.jobs["running"]
    report = _json(trace, f"gs://{small_flow.bucket}/{a.name}")  # deleted: found by its recorded generation
    assert report["stop"] == (f"retracted (deleted), request pending behind job {behind} (Running); not scored (a "
                              "retracted arrival is not scored)")
    assert report["steps"][0]["detail"]["live_generation"] is None


def test_a_pending_arrival_waits_behind_the_running_job(small_flow, trace):
    a, behind = small_flow.arrivals["pending"], small_flow.jobs["running"]
    report = _json(trace, f"{a.name}#{a.generation}", "--bucket", small_flow.bucket)
    # Converted after the dataset's champion was crowned, and this flow runs no scorer (#40).
    assert report["stop"] == (f"converted, request pending behind job {behind} (Running); not scored: the scorer "
                              "has not scored it (yet)")


def test_a_running_arrival_and_a_failed_job(small_flow, trace):
    running = _json(trace, small_flow.arrivals["running"].arrival_id)
    assert running["stop"] == (f"converted, training in job {small_flow.jobs['running']} (Running); not scored: the "
                               "scorer has not scored it (yet)")
    failed = _json(trace, small_flow.arrivals["failed"].arrival_id)
    assert failed["stop"].startswith(f"trained by job {small_flow.jobs['failed']}: Failed")


def test_a_job_leads_back_to_its_arrivals(small_flow, trace):
    job = small_flow.jobs["running"]
    report = _json(trace, job)
    assert report["kind"] == "job" and report["dataset"] == "sensors"
    assert [a["arrival_id"] for a in report["arrivals"]] == [small_flow.arrivals["running"].arrival_id]
    assert report["stop"] == f"job {job} (Running)"


def test_nothing_recorded_is_exit_1(small_flow, trace):
    code, text = trace("nosuch.npy-g1-0123abcd", "--dataset", "sensors")
    assert code == 1 and "no record of arrival nosuch.npy-g1-0123abcd in dataset sensors" in text
    code, text = trace("sensors-0000000000")
    assert code == 1 and "inputs.json does not exist" in text
