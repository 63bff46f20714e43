"""``landfall demo`` end to end (small data): both jobs succeed, outputs are written, failures name the stage."""

from __future__ import annotations

import json
import subprocess
import sys

from landfall.core.messages import METRICS_SCHEMA


def _demo(tmp_path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "landfall.cli", "demo", "--instances", "768", "--epochs", "2", "--units", "8,4",
         "--batch-size-per-worker", "64", "--out", str(tmp_path / "out"), *extra],
        capture_output=True, text=True, timeout=480)


def test_demo_runs_the_whole_flow_with_a_coalesced_follow_up(tmp_path):
    proc = _demo(tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = tmp_path / "out"
    for stage in ("converted incoming/demo/part-1.npy", "training request published", "TFJob", "epoch 1",
                  "second arrival while training", "as the follow-up of", "Succeeded"):
        assert stage in proc.stdout, stage
    metrics = [json.loads(p.read_text()) for p in sorted((out / "metrics").glob("*.json"))]
    assert len(metrics) == 2
    for m in metrics:
        assert m["schema"] == METRICS_SCHEMA and m["status"] == "succeeded" and len(m["epochs"]) == 2
    assert sorted(len(m["manifests"]) for m in metrics) == [1, 2]  # the follow-up trains on both arrivals
    assert (out / "training.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = (out / "summary.txt").read_text()
    assert "2 job(s)" in summary and "follow-up of" in summary
    assert not (out / "stack" / "stack.json").exists()  # the stack was stopped


def test_demo_names_the_stage_that_failed(tmp_path):
    proc = _demo(tmp_path, "--no-follow-up", "--units", "0,0")  # the trainer rejects zero units
    assert proc.returncode == 1
    assert "stage 'training' failed" in proc.stderr and "TFJob" in proc.stderr
