"""Every view over hostile records and dead letters (#46): ``landfall status`` (text and JSON), ``landfall trace``
(a job and an arrival) and ``landfall report`` on a bucket whose job's ``metrics.json`` is valid JSON of the wrong
type, invalid UTF-8, empty, or an object whose fields have the wrong types, with dead letters of the same kinds.
Each view answers (exit 0), shows what it can, and never a traceback."""

from __future__ import annotations

import json
import re

from landfall import cli
from landfall.submit import jobmeta
from landfall.submit.backends.local import LocalBackend
from landfall.submit.handler import handle_message
from tests.support import convert_arrival, runtime, set_state

HOSTILE = [b"[]", b'"x"', b"42", b"null", b"\xff\xfe", b"", b"{" * 200,
           json.dumps({"schema": 7, "status": [1], "epochs": 5, "instances": "x", "evaluation": 3, "timeline": 7,
                       "champion_view": "x", "verdict": {"a": 1}, "skill": "high", "started_at": 12,
                       "baselines": [1], "beaten_by": 3, "threshold": "t", "labelled": [None]}).encode(),
           json.dumps({"epochs": [1, "x", None, {"loss": "a", "val_loss": [2], "epoch": "e"}],
                       "timeline": {"summary": "x", "epochs_s": "y"}}).encode()]


def test_status_trace_and_report_show_hostile_records_and_dead_letters(emulator_stack, bucket, tmp_path, capsys,
                                                                       monkeypatch):
    storage, ps = emulator_stack.storage, emulator_stack.pubsub
    request = convert_arrival(storage, bucket, "hostile", tmp_path)
    state = tmp_path / "state"
    rt = runtime(emulator_stack, bucket, LocalBackend(state))
    assert handle_message(request.to_json(), {}, rt) == "submitted"
    name = jobmeta.name_of(rt.backend.list("hostile")[0])
    set_state(rt.backend, name, "Succeeded")
    dead = f"dl-{bucket}"
    ps.ensure_topic(dead)
    ps.ensure_subscription(dead, dead)
    letters = [b for b in HOSTILE if b]  # Pub/Sub refuses an empty message (400 "Some messages are empty")
    for body in letters:
        ps.publish(dead, body)
    monkeypatch.setenv("LANDFALL_BUCKET", bucket)
    monkeypatch.setenv("LANDFALL_LOCAL_STATE", str(state))
    monkeypatch.setenv("LANDFALL_DEAD_LETTER_SUBSCRIPTION", dead)
    arrival = request.manifest.rsplit("/", 2)[1]
    unreadable: set[str] = set()
    for body in HOSTILE:
        storage.write_bytes(f"gs://{bucket}/runs/{name}/metrics.json", body)
        assert cli.main(["status", "--json"]) == 0, body
        report = json.loads(capsys.readouterr().out)
        (job,) = report["jobs"]
        assert job["name"] == name and job["state"] == "Succeeded"
        if not body.startswith(b'{"'):  # not an object: named, not read
            assert job["metrics"]["invalid"].startswith(f"gs://{bucket}/runs/{name}/metrics.json is "), body
        dl = report["dead_letter"]  # one pull's worth: Pub/Sub may hand back fewer than it holds
        assert dl["count"] <= len(letters)  # (a peek just after another may find them still redelivering)
        for r in dl["requests"]:
            if r.get("unreadable"):
                assert r["unreadable"].startswith(f"dead letter {r['message_id']} is "), r
                unreadable.add(r["message_id"])
            else:
                assert all(v is None or isinstance(v, str) for v in r.values()), r
        assert cli.main(["status"]) == 0, body
        text = capsys.readouterr().out
        assert name in text and re.search(r"^dead-letter: \d+ request\(s\)$", text, re.M), text
        assert "Traceback" not in text
        for what in (name, arrival):
            code = cli.main(["trace", what, "--dataset", "hostile"])
            out = capsys.readouterr()
            assert code in (0, 1) and "Traceback" not in out.out + out.err, (body, what, out.err[-2000:])
        page = tmp_path / "report.html"
        assert cli.main(["report", "--out", str(page), "--dead-letter", dead]) == 0, body
        captured = capsys.readouterr()
        assert "Traceback" not in captured.out + captured.err and name in page.read_text()
    assert 1 <= len(unreadable) <= 6  # the dead letters that are not JSON objects, each named with its reason
