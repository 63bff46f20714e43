"""``landfall status`` shows each dataset's champion and each job's verdict (against the emulators)."""

from __future__ import annotations

import json

from landfall import cli
from landfall.core.artifacts import champion, results
from landfall.submit import jobmeta
from landfall.submit.backends.local import LocalBackend
from landfall.submit.handler import handle_message
from tests.support import convert_arrival, runtime, set_state
from trainer.judging import baselines


def test_status_shows_the_champion_and_the_verdicts(emulator_stack, bucket, tmp_path, capsys, monkeypatch):
    storage = emulator_stack.storage
    state = tmp_path / "state"
    rt = runtime(emulator_stack, bucket, LocalBackend(state))
    assert handle_message(convert_arrival(storage, bucket, "champ", tmp_path, n=8).to_json(), {}, rt) == "submitted"
    name = jobmeta.name_of(rt.backend.list("champ")[0])
    set_state(rt.backend, name, "Succeeded")
    storage.write_bytes(f"gs://{bucket}/runs/{name}/metrics.json", json.dumps({
        "status": "succeeded", "verdict": "kept_champion", "challenger_loss": 0.9, "champion_loss": 0.4,
        "baseline_loss": 1.5, "skill": 0.4, "min_skill": 0.1, "epochs_run": 4, "epochs_ceiling": 10,
        "stopped_early": True, "best_epoch": 3, "ceiling_gpu_seconds": 20.0,
        "labelled": {"challenger": {"average_precision": 0.9, "precision": 0.8, "recall": 0.7}, "champion": None},
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
    # The skill over the naive baseline, the labelled check (a champion never scored on labels: unknown, not 0)
    # and how the epochs ended.
    assert ("verdict=kept_champion skill=0.400 average_precision=0.900 (champion unknown) epochs_run=4/10 "
            "(stopped early, best epoch 3)") in text
    assert job["metrics"]["ceiling_gpu_seconds"] == 20.0 and job["metrics"]["skill"] == 0.4


def test_a_noise_only_dataset_gets_no_champion_and_status_says_why(emulator_stack, bucket, tmp_path, capsys,
                                                                   monkeypatch):
    """Pure noise has nothing to learn: the real trainer, run on the job the submit stage released, finds the
    model no better than the naive baseline (skill about 0), so the dataset's first model is not promoted, and
    ``landfall status`` and the result say why."""
    import numpy as np

    from landfall.arrival import converter
    from landfall.arrival.config import ConverterConfig
    from landfall.core.contracts import layout
    from landfall.core.contracts.layout import Layout
    from landfall.core.contracts.messages import TrainingRequest
    from tests.trainer.helpers import run_trainer

    storage = emulator_stack.storage
    name = "incoming/noise/part-1.npy"
    src = tmp_path / "noise.npy"
    np.save(src, np.random.default_rng(11).normal(3.0, 2.0, size=(2048, 36, 10)).astype(np.float32))
    aid = layout.arrival_id(name, 1)
    out = layout.gs(bucket, layout.shards_prefix(Layout(), "noise", aid))
    converter.convert(str(src), out, "noise", ConverterConfig.load({}), storage, arrival_id=aid)
    request = TrainingRequest(dataset="noise", manifest=out + "manifest.json",
                              request_id=layout.request_id(bucket, name, 1))
    state = tmp_path / "state"
    rt = runtime(emulator_stack, bucket, LocalBackend(state))
    assert handle_message(request.to_json(), {}, rt) == "submitted"
    job = jobmeta.name_of(rt.backend.list("noise")[0])
    job_dir = f"gs://{bucket}/runs/{job}"
    proc = run_trainer(["--inputs", f"{job_dir}/inputs.json", "--job-dir", job_dir, "--epochs", "6",
                        "--batch-size-per-worker", "128", "--units", "32,8", "--learning-rate", "0.01",
                        "--verbose", "0", "--select", "loss"], LANDFALL_RESULTS_TOPIC="")  # the model's own gate
    assert proc.returncode == 0, proc.stderr[-3000:]
    set_state(rt.backend, job, "Succeeded")
    metrics = json.loads(storage.read_bytes(f"{job_dir}/metrics.json"))
    assert metrics["verdict"] == "no_skill" and abs(metrics["skill"]) < 0.05 < 0.1 == metrics["min_skill"]
    assert metrics["champion"] is None and champion.read(storage, f"gs://{bucket}/models", "noise")[0] is None
    monkeypatch.setenv("LANDFALL_BUCKET", bucket)
    monkeypatch.setenv("LANDFALL_LOCAL_STATE", str(state))
    assert cli.main(["status", "--no-dead-letter", "--dataset", "noise"]) == 0
    text = capsys.readouterr().out
    assert "verdict=no_skill skill=" in text and "(below min_skill 0.1: not promoted)" in text
    assert f"epochs_run={metrics['epochs_run']}/6" in text
    assert "champion  " not in text  # no champion line: the dataset has none
    # The job's training and held-out counts, and the detectors to beat, in status --json (issue #38).
    assert cli.main(["status", "--no-dead-letter", "--dataset", "noise", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    found = [j for j in _jobs(shown) if j.get("metrics")]
    assert found, shown
    m = found[0]["metrics"]
    counts = metrics["instances"]
    assert m["instances"] == {"total": counts["total"], "train": counts["train"], "validation": counts["validation"],
                              "unused": counts["total"] - counts["train"] - counts["validation"]}
    assert m["instances"]["train"] > 0 and m["instances"]["validation"] > 0
    assert set(m["baselines"]) == set(baselines.NAMES)
    assert "beaten_by" in m
    # By detection (the default) the model is passed over and a baseline detects the surrogate's anomalies (spikes,
    # shifts... in noise: what a detector of noise data is for): it is the champion, and status says which and why.
    again = run_trainer(["--inputs", f"{job_dir}/inputs.json", "--job-dir", f"{job_dir}-d", "--epochs", "2",
                         "--batch-size-per-worker", "128", "--units", "32,8", "--verbose", "0"],
                        LANDFALL_RESULTS_TOPIC="")
    assert again.returncode == 0, again.stderr[-3000:]
    second = json.loads(storage.read_bytes(f"{job_dir}-d/metrics.json"))
    found = second["detection"]
    assert second["verdict"] == "promoted" and found["chosen"] != "model"
    assert "below min_skill 0.1" in found["passed_over"].get("model", "below min_skill 0.1")  # if it ranked first
    line = results.detection_line(second)
    kind = second["baselines"][found["chosen"]]["description"]
    assert line.startswith(f"detects best: {found['chosen']} [{kind}; rows scored: ") and (
        "] (surrogate average precision over kinds: " in line), line
    # The champion it made says what it serves in words: the detector, what it is, how its rows are scored.
    current, _ = champion.read(storage, f"gs://{bucket}/models", "noise")
    assert current.run == f"{job_dir}-d".rsplit("/", 1)[-1], current
    assert current.serves.startswith(f"{found['chosen']} ({kind}; rows scored: "), current.serves
    capsys.readouterr()
    assert cli.main(["status", "--no-dead-letter", "--dataset", "noise"]) == 0
    assert f": {current.serves}" in capsys.readouterr().out


def _jobs(doc):
    """Every job entry of a status --json document, wherever the dataset lists it."""
    out = []

    def walk(x):
        if isinstance(x, dict):
            if "metrics" in x and "name" in x:
                out.append(x)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(doc)
    return out
