"""``landfall demo`` end to end (small data): both jobs succeed, outputs are written, failures name the stage."""

from __future__ import annotations

import json
import subprocess
import sys

from landfall.core.contracts.messages import METRICS_SCHEMA


def _demo(folder, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "landfall.cli", "demo", "--instances", "768", "--epochs", "2", "--units", "8,4",
         "--batch-size-per-worker", "64", "--out", str(folder / "out"),
         # The first upload (1.1 MB) takes the large-file path in 3 tasks; the second (0.55 MB) stays inline.
         "--inline-max-bytes", "800000", "--task-bytes", "400000",
         # Two epochs of a toy model check the flow, not learning: the verdict's floor is off (the default demo's
         # model clears it; tests/trainer/test_verdict.py and the noise dataset test the floor itself).
         "--min-skill", "-1", *extra],
        capture_output=True, text=True, timeout=480)


def test_demo_runs_the_whole_flow_with_a_coalesced_follow_up_then_again_on_vertex_ai(memory_dir):
    proc = _demo(memory_dir)  # its stack's data in memory (tests/conftest.py)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = memory_dir / "out"
    for stage in ("incoming/demo/part-1.npy is over the function's inline limit: Cloud Run job landfall-convert "
                  "converts it with 3 task(s)", "converted incoming/demo/part-1.npy", "training request published",
                  "TFJob", "epoch 1",
                  "second arrival while training", "as the follow-up of", "Succeeded"):
        assert stage in proc.stdout, stage
    metrics = [json.loads(p.read_text()) for p in sorted((out / "metrics").glob("*.json"))]
    assert len(metrics) == 2
    for m in metrics:
        assert m["schema"] == METRICS_SCHEMA and m["status"] == "succeeded" and len(m["epochs"]) == 2
    assert sorted(len(m["manifests"]) for m in metrics) == [1, 2]  # the follow-up trains on both arrivals
    first, follow_up = sorted(metrics, key=lambda m: len(m["manifests"]))
    assert first["warm_start_from"] is None and follow_up["warm_start_from"] == first["model"]  # a warm start
    assert f"{follow_up['job']} starts from {first['model']}" in proc.stdout
    # One line per epoch per job (not per worker), with what every worker did and the slowest one's time.
    epoch_lines = [line for line in proc.stdout.splitlines() if " epoch " in line and "slowest worker" in line]
    assert len(epoch_lines) == 4, epoch_lines
    assert all("on 2 workers" in line for line in epoch_lines)
    assert (out / "training.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (out / "report.html").read_text()  # landfall report of the demo's bucket, its path printed
    assert f"report:  {out / 'report.html'}" in proc.stdout
    assert 'data-dataset="demo"' in page and all(f'data-job="{m["job"]}"' in page for m in metrics)
    summary = (out / "summary.txt").read_text()
    assert "2 job(s)" in summary and "follow-up of" in summary
    assert f"warm start: {follow_up['job']} began from {first['job']}'s model: first-epoch val_loss" in summary
    # Every job ends in a verdict; the demo names the champion and scores a spiked file with it.
    assert first["verdict"] == "promoted" and follow_up["verdict"] in ("promoted", "kept_champion")
    champion = follow_up["champion_run"]
    assert champion == (follow_up["job"] if follow_up["verdict"] == "promoted" else first["job"])
    assert f"champion of demo: {champion}" in proc.stdout and f"champion: {champion}" in summary
    assert "scored 512 new instances, 8 of them spiked" in proc.stdout
    assert (out / "scores" / "injected.scores.parquet").exists()
    # It ends with the scorer's detection message for that file, uploaded as an arrival.
    [detected] = [line for line in summary.splitlines() if line.startswith("detection on demo/injected.npy-g")]
    assert f"by champion {champion}:" in detected and "of 512 instances above" in detected, detected
    caught = int(detected.split("; ")[-1].split(" of the 8 injected")[0])
    # The same file, the same champion: the scorer flags what the demo's own scoring flagged.
    assert f"scoring: {caught} of 8 injected anomalies flagged" in summary, (detected, summary)
    assert detected in proc.stdout
    assert not (out / "stack" / "stack.json").exists()  # the stack was stopped
    # Again into the same folder (a second `make demo`), on the other kind of engine: a story of its own, from an
    # empty bucket, and the same flow with no cluster, each job a Vertex AI CustomJob created through Google's client
    # on the stand-in JobService, its replicas run with ``TF_CONFIG`` as Vertex AI sets it (issue #57). One run for
    # both claims, and one job (issue #67: each demo run is a stack, its jobs and their TensorFlow processes): the
    # follow-up's coalescing is the submit stage's whatever the engine (tests/landfall/submit/
    # test_vertex_interleavings.py: one CustomJob per release), its warm start the trainer's, both shown above.
    again = _demo(memory_dir, "--engine", "vertex", "--no-follow-up")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "starts from fresh weights (the first job of dataset demo" in again.stdout
    assert "CustomJob" in again.stdout and "TFJob" not in again.stdout
    [m] = [json.loads(p.read_text()) for p in sorted((out / "metrics").glob("*.json"))]  # this run's job only
    assert m["status"] == "succeeded" and m["num_workers"] == 2 and len(m["manifests"]) == 1
    assert m["verdict"] == "promoted"
    summary = (out / "summary.txt").read_text()
    assert "1 job(s)" in summary and f"champion: {m['job']}" in summary
    assert any(line.startswith("detection on demo/injected.npy-g") for line in summary.splitlines())


def test_demo_names_the_stage_that_failed(memory_dir):
    proc = _demo(memory_dir, "--no-follow-up", "--units", "0,0")  # the trainer rejects zero units
    assert proc.returncode == 1
    assert "stage 'training' failed" in proc.stderr and "TFJob" in proc.stderr


def test_the_demo_commands_help_states_the_defaults_the_demo_uses():
    """Unset options take ``DemoOptions``' defaults; the help that names them says the same numbers."""
    import argparse

    from landfall.cli.local import add_arguments
    from landfall.local.demo import DemoOptions

    parser = argparse.ArgumentParser()
    add_arguments("demo", parser)
    helps = {a.dest: a.help or "" for a in parser._actions}
    opts = DemoOptions()
    for field in ("instances", "workers", "epochs", "batch_size_per_worker", "inline_max_bytes", "task_bytes"):
        assert parser.get_default(field) is None  # so DemoOptions decides
        assert f"default {getattr(opts, field)}" in helps[field], (field, helps[field])
    assert f"default {opts.stage_timeout:g}" in helps["stage_timeout"]
