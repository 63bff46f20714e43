"""A job's timeline (issue #42): merging the workers' own, the summary, the line, GPU-seconds outside the epochs."""

from __future__ import annotations

import pytest

from landfall.core.contracts import timeline


def worker(i: int, started_at: str, phases: list[tuple[str, str | None, float, float]], total: float) -> dict:
    spans = [{"phase": p, "within": w, "start_s": s, "seconds": d, **({"epoch": n} if p == "epoch" else {})}
             for n, (p, w, s, d) in enumerate(phases)]
    return {"worker": i, "started_at": started_at, "total_s": total, "phases": spans}


CHIEF = worker(0, "2026-01-01T00:00:01+00:00", [
    ("staging the shards", None, 0.0, 2.0), ("training", None, 2.0, 6.0), ("epoch", "training", 2.5, 2.0),
    ("epoch", "training", 4.5, 3.0), ("evaluating against the champion", None, 8.0, 2.0),
    ("fitting the baselines", "evaluating against the champion", 8.0, 1.5)], 10.0)
OTHER = worker(1, "2026-01-01T00:00:00+00:00", [
    ("staging the shards", None, 0.0, 3.0), ("training", None, 3.0, 6.0), ("epoch", "training", 3.5, 2.5),
    ("epoch", "training", 5.5, 3.0)], 9.5)
DOC = {"started_at": "2026-01-01T00:00:00+00:00", "ended_at": "2026-01-01T00:00:12+00:00",
       "epochs": [{"epoch": 1, "wall_s": 2.5}, {"epoch": 2, "wall_s": 3.0}]}


def test_merge_counts_every_start_from_the_earliest_worker_and_sums_the_epochs():
    t = timeline.merge([CHIEF, OTHER], 2, DOC)
    assert t["origin"] == "2026-01-01T00:00:00+00:00"
    assert [w["offset_s"] for w in t["workers"]] == [1.0, 0.0]
    assert t["workers"][0]["phases"][0]["start_s"] == 1.0  # the chief started a second later
    rows = {(r["phase"], r["within"]): r for r in t["summary"]}
    assert rows[("epochs", None)] == {"phase": "epochs", "within": None, "seconds": 5.5, "per_worker": [5.0, 5.5],
                                      "count": 2}
    assert rows[("fitting the baselines", "evaluating against the champion")]["per_worker"] == [1.5, None]
    assert (t["epochs_s"], t["outside_epochs_s"]) == (5.5, 6.5)


def test_a_worker_that_did_not_report_is_named_not_dropped():
    t = timeline.merge([CHIEF], 3, DOC)
    assert [w.get("missing") for w in t["workers"]] == [None, "not reported", "not reported"]


def test_gpu_seconds_outside_the_epochs():
    assert timeline.gpu_fields(DOC, 48.0) == {"epochs_gpu_seconds": 22.0, "outside_epochs_gpu_seconds": 26.0}
    assert timeline.gpu_fields(DOC, None) == {"epochs_gpu_seconds": None, "outside_epochs_gpu_seconds": None}
    assert timeline.gpu_fields({**DOC, "ended_at": None}, 0.0)["outside_epochs_gpu_seconds"] == 0.0


def test_one_line_and_the_compact_form_agree():
    doc = {**DOC, "timeline": timeline.merge([CHIEF, OTHER], 2, DOC), "outside_epochs_gpu_seconds": 26.0}
    line = timeline.line(doc)
    assert line == ("timeline: staging 3.0 s, fit with its epochs 6.0 s, epochs 5.5 s (2), verdict 2.0 s "
                    "(baselines 1.5); outside the epochs 6.5 s (26.0 GPU-s)")
    assert timeline.compact_line(timeline.compact(doc)) == line
    assert timeline.line({}) == "" and timeline.compact(None) is None
    assert timeline.compact(doc)["workers"][1] == {"worker": 1, "total_s": 9.5}


@pytest.mark.parametrize("name", ["reading the manifests", "the labelled check"])
def test_every_phase_has_a_short_name(name):
    assert timeline.SHORT[name] != name


def test_one_reading_of_a_timestamp():
    """``landfall.core.rules.timestamps``: what ``utc_now`` writes, an offset, a naive time (UTC) and a date alone;
    ``epoch`` gives None for what is not a timestamp, ``parse`` raises."""
    import pytest

    from landfall.core.contracts.messages import utc_now
    from landfall.core.rules import timestamps

    assert timestamps.epoch("2026-12-05T10:00:00.000Z") == timestamps.epoch("2026-12-05T11:00:00+01:00") == 1796464800.0
    assert timestamps.parse("2026-12-05T10:00:00") == timestamps.parse("2026-12-05T10:00:00Z")
    assert timestamps.epoch("2026-12-05") == 1796428800.0
    assert abs(timestamps.epoch(utc_now()) - __import__("time").time()) < 5
    assert timestamps.epoch("yesterday") is None and timestamps.epoch(None) is None and timestamps.epoch("") is None
    with pytest.raises(ValueError):
        timestamps.parse("yesterday")
