"""A worker that dies after ``fit`` costs nothing twice (#46): a real SIGSEGV at each crash point after training
(``trainer.faults``), then the restart the engine's ExitCode policy makes. Results complete (metrics.json
``succeeded``): the restart exits 0 without training and the result is announced exactly once. Not complete: the
restart resumes from the backup and trains no epoch again. The engines' side (a replica ended by SIGSEGV is
restarted, the TFJob or JobSet then succeeds) is ``tests/landfall/local/test_operator.py``'s."""

from __future__ import annotations

import json
import signal

import pytest

from landfall.core import logs
from tests.conftest import pull_all, unique
from tests.trainer.helpers import make_array, run_trainer, write_dataset
from trainer import faults

ARGS = ["--epochs", "2", "--batch-size-per-worker", "32", "--units", "4,2", "--warm-start", "none",
        "--min-skill", "-1", "--verbose", "0"]


@pytest.mark.parametrize("point", faults.POINTS)
def test_a_worker_killed_by_sigsegv_after_fit_is_restarted_without_training_again(emulator_stack, bucket, tmp_path,
                                                                                  point):
    storage, ps = emulator_stack.storage, emulator_stack.pubsub
    results = unique("results")
    ps.ensure_topic(results)
    ps.ensure_subscription(results, results)
    manifest = write_dataset(storage, f"gs://{bucket}/tfrecords/d/a1", make_array(256, seed=3), dataset="d")
    job = f"gs://{bucket}/runs/crash-{point}"
    args = ["--manifest", manifest, "--job-dir", job, *ARGS]
    env = {"LANDFALL_RESULTS_TOPIC": results, "GOOGLE_CLOUD_PROJECT": emulator_stack.project,
           faults.ENV: f"{point}:{tmp_path / 'crashed'}"}

    first = run_trainer(args, **env)
    assert first.returncode == -signal.SIGSEGV, first.stderr[-3000:]
    assert (tmp_path / "crashed").exists()
    before = json.loads(storage.read_bytes(f"{job}/metrics.json"))
    trained = [e["epoch"] for e in before["epochs"]]
    assert trained == [1, 2]

    again = run_trainer(args, **env)  # the restart: the marker exists, so it does not crash there again
    assert again.returncode == 0, again.stderr[-3000:]
    after = json.loads(storage.read_bytes(f"{job}/metrics.json"))
    messages = [m["message"] for m in logs.parse(again.stderr)]
    assert "epoch" not in messages  # not one epoch trained again
    assert [(e["epoch"], e.get("attempt")) for e in after["epochs"]] == [(1, 1), (2, 1)]
    assert after["status"] == "succeeded" and after["model"] == f"{job}/model"
    assert not storage.list(f"{job}/backup/")  # nothing half-finished left behind
    if point in (faults.FINISHED, faults.ANNOUNCED):  # the results were complete: nothing to do but exit 0
        assert "job dir already holds a finished run of this length; nothing to do" in messages
        assert after["restarts"] == 0 and after["ended_at"] == before["ended_at"]
    else:  # resumed from the backup of the last epoch: saved and judged again, trained no more
        assert after["restarts"] == 1 and after["attempt"] == 2
        assert "training finished" in messages
    got = pull_all(ps, results, timeout_s=6.0)
    assert len(got) == 1, [m.data[:200] for m in got]  # the result, announced once whatever the crash point
    result = json.loads(got[0].data)
    assert result["status"] == "succeeded" and result["job"] == f"crash-{point}"
