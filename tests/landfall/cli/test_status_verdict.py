"""``landfall status`` shows each dataset's champion and each job's verdict (against the emulators)."""

from __future__ import annotations

import json

from landfall import cli
from landfall.core import champion
from landfall.submit import tfjob
from landfall.submit.backends.local import LocalBackend
from landfall.submit.handler import handle_message
from tests.support import convert_arrival, runtime, set_state


def test_status_shows_the_champion_and_the_verdicts(emulator_stack, bucket, tmp_path, capsys, monkeypatch):
    storage = emulator_stack.storage
    state = tmp_path / "state"
    rt = runtime(emulator_stack, bucket, LocalBackend(state))
    assert handle_message(convert_arrival(storage, bucket, "champ", tmp_path, n=8).to_json(), {}, rt) == "submitted"
    name = tfjob.name_of(rt.backend.list("champ")[0])
    set_state(rt.backend, name, "Succeeded")
    storage.write_bytes(f"gs://{bucket}/runs/{name}/metrics.json", json.dumps({
        "status": "succeeded", "verdict": "kept_champion", "challenger_loss": 0.9, "champion_loss": 0.4,
        "epochs": [{"epoch": 1, "loss": 0.5}]}).encode())
    champion.force(storage, f"gs://{bucket}/models", "champ", run="job-0", model=f"gs://{bucket}/runs/job-0/model",
                   evaluation={"loss": 0.4}, by="alice")
    monkeypatch.setenv("LANDFALL_BUCKET", bucket)
    monkeypatch.setenv("LANDFALL_LOCAL_STATE", str(state))
    assert cli.main(["status", "--json", "--no-dead-letter"]) == 0
    report = json.loads(capsys.readouterr().out)
    shown = report["datasets"]["champ"]["champion"]
    assert (shown["run"], shown["seq"], shown["reason"], shown["promoted_by"], shown["loss"]) == (
        "job-0", 1, "forced", "alice", 0.4)
    (job,) = report["jobs"]
    assert (job["metrics"]["verdict"], job["metrics"]["challenger_loss"], job["metrics"]["champion_loss"]) == (
        "kept_champion", 0.9, 0.4)
    assert cli.main(["status", "--no-dead-letter"]) == 0
    text = capsys.readouterr().out
    assert "champion  job-0 #1 (forced by alice" in text and "verdict=kept_champion" in text
