"""``landfall scaling --from-runs``: the seed's figure from finished runs' metrics.json."""

from __future__ import annotations

import json

import pytest

from landfall.cli import main


def _metrics(job: str, workers: int, rate: float, status: str = "succeeded") -> bytes:
    epochs = [{"epoch": 1, "loss": 1.0, "val_loss": 1.0, "wall_s": 99.0, "examples_per_s": 1.0}] + [
        {"epoch": e, "loss": 1.0 / e, "val_loss": 1.0 / e, "wall_s": 1000 / rate, "examples_per_s": rate}
        for e in (2, 3, 4)]
    return json.dumps({"schema": "landfall.metrics/v1", "job": job, "num_workers": workers, "status": status,
                       "global_batch_size": 1024 * workers, "epochs": epochs}).encode()


def test_from_runs_table_and_plot(emulator_stack, bucket, tmp_path, capsys):
    runs = f"gs://{bucket}/runs"
    storage = emulator_stack.storage
    storage.write_bytes(f"{runs}/a/metrics.json", _metrics("a", 2, 1000.0))
    storage.write_bytes(f"{runs}/b/metrics.json", _metrics("b", 4, 1800.0))
    storage.write_bytes(f"{runs}/c/metrics.json", _metrics("c", 8, 3000.0))
    storage.write_bytes(f"{runs}/d/metrics.json", _metrics("d", 6, 9999.0, status="failed"))  # not drawn
    assert main(["scaling", "--from-runs", runs, "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "scaling.json").read_text())
    assert [r["workers"] for r in rows] == [2, 4, 8]
    # The first (tracing) epoch is left out; speedup is against the smallest count.
    assert [r["epoch_s"] for r in rows] == [1.0, pytest.approx(1000 / 1800), pytest.approx(1000 / 3000)]
    assert [r["speedup"] for r in rows] == [1.0, 1.8, 3.0]
    assert [r["efficiency"] for r in rows] == [1.0, 0.9, 0.75]
    assert (tmp_path / "scaling.png").read_bytes()[:4] == b"\x89PNG"
