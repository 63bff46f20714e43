"""Two datasets of different shapes in one ``landfall up`` stack, each with its own spec (docs/datasets.md): a
pump's 36 x 10 (.npy) and a fleet's 12 x 4 (a CSV with a header row, as its spec says), each converted with its
shape, trained by real trainer processes with its own model and settings, judged with its own verdict rules and
scored with its own champion. ``LANDFALL_DATASETS=registered``: a third dataset without a spec is rejected
(``unknown_dataset``). Small on purpose: 1 epoch, one worker each, a few units."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from landfall.core.services.pubsub import PubSub
from landfall.core.services.storage import Storage
from landfall.local.synthetic import time_series
from landfall.submit import engine, jobmeta, tfjob
from landfall.submit.backends.local import LocalBackend
from tests.support import stack_ready, wait_for

SPECS = {
    "pump": {"shape": {"timesteps": 36, "features": 10}, "model": {"units": [8, 4], "dropout": 0.0},
             "training": {"epochs": 1, "batch_size_per_worker": 64, "learning_rate": 0.005},
             "resources": {"workers": 1, "gpus_per_worker": 0, "cpu": "1", "memory": "1Gi"},
             # One epoch of a toy model checks the plumbing, not learning: the floor is lowered by the spec
             # (verdict.min_skill, which must reach the trainer), so each dataset gets its own champion.
             "verdict": {"threshold_quantile": 0.9, "min_skill": -1}},
    "fleet": {"shape": {"timesteps": 12, "features": 4}, "model": {"units": [4]},
              "training": {"epochs": 1, "batch_size_per_worker": 32},
              "resources": {"workers": 1, "gpus_per_worker": 0},
              "arrival": {"csv_header": "present"}, "verdict": {"threshold_quantile": 0.95, "min_skill": -1}},
}


def landfall(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "landfall.cli", *args], capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.fixture
def stack(memory_dir):
    state = memory_dir / "state"  # the emulators' data in memory (tests/conftest.py)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PUBSUB_EMULATOR_HOST", "STORAGE_EMULATOR_HOST", "GOOGLE_CLOUD_PROJECT")}
    env.update({"LANDFALL_DATASETS": "registered", "LANDFALL_TRAINER_ARGS": json.dumps(["--verbose", "0"]),
                "LANDFALL_STATE_DIR": str(state)})
    # The pump's .npy (553 KB) is over the inline limit: a Cloud Run task converts it (and reads its spec);
    # the fleet's CSV (365 KB) converts in the function.
    proc = subprocess.Popen([sys.executable, "-m", "landfall.cli", "up", "--state-dir", str(state),
                             "--inline-max-bytes", "450000"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    try:
        yield wait_for(lambda: stack_ready(state), 90, "landfall up"), env
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def test_two_datasets_of_different_shapes_each_run_with_their_own_spec(stack, tmp_path, monkeypatch):
    info, env = stack
    folder = tmp_path / "datasets"
    folder.mkdir()
    for name, sections in SPECS.items():
        (folder / f"{name}.json").write_text(json.dumps({"apiVersion": "landfall.dataset/v1", "name": name,
                                                         **sections}))
    applied = landfall("datasets", "apply", str(folder), "--json", env=env)
    assert applied.returncode == 0, applied.stderr
    generation = {a["dataset"]: a["generation"] for a in json.loads(applied.stdout)}

    pump = tmp_path / "pump.npy"
    np.save(pump, time_series(384, 36, 10, seed=1))
    fleet = tmp_path / "fleet.csv"
    rows = time_series(384, 12, 4, seed=2).reshape(384, -1)
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow([f"s{i}" for i in range(rows.shape[1])])
    writer.writerows(rows.tolist())
    fleet.write_text(text.getvalue())
    stranger = tmp_path / "stranger.npy"
    np.save(stranger, time_series(64, seed=3))
    for path, dataset in ((pump, "pump"), (fleet, "fleet"), (stranger, "stranger")):
        up = landfall("upload", str(path), "--dataset", dataset, env=env)
        assert up.returncode == 0, up.stderr

    for key, value in (("STORAGE_EMULATOR_HOST", info["storage_emulator_host"]),
                       ("PUBSUB_EMULATOR_HOST", info["pubsub_emulator_host"]),
                       ("GOOGLE_CLOUD_PROJECT", info["project"])):
        monkeypatch.setenv(key, value)
    storage, bucket, backend = Storage(info["project"]), info["bucket"], LocalBackend(info["local_state"])
    jobs = {d: wait_for(lambda d=d: [j for j in backend.list(d) if tfjob.is_finished(j)], 300, f"{d}'s job")[0]
            for d in SPECS}
    executions = sorted((Path(info["local_state"]) / "cloudrun" / "executions").glob("*[!s].json"))
    assert [json.loads(e.read_text())["env"]["LANDFALL_SOURCE_NAME"] for e in executions] == ["incoming/pump/pump.npy"]
    rejected = wait_for(lambda: storage.list(f"gs://{bucket}/rejected/stranger/"), 30, "the stranger's rejection")
    assert json.loads(storage.read_bytes(rejected[0]))["reason"] == "unknown_dataset"
    assert backend.list("stranger") == []

    results = {}
    pubsub = PubSub(info["project"])
    for _ in range(10):
        for m in pubsub.pull(info.get("results_topic", "landfall-training-results"), timeout_s=2):
            results[json.loads(m.data)["dataset"]] = json.loads(m.data)
        if set(results) >= set(SPECS):
            break
    for dataset, sections in SPECS.items():
        job = jobs[dataset]
        assert tfjob.state(job) == "Succeeded", dataset
        assert engine.workers_of(job) == 1
        run = jobmeta.job_dir(bucket, jobmeta.name_of(job))
        metrics = json.loads(storage.read_bytes(run + "/metrics.json"))
        shape = [sections["shape"]["timesteps"], sections["shape"]["features"]]
        (manifest_uri,) = metrics["manifests"]
        manifest = json.loads(storage.read_bytes(manifest_uri))
        inputs = json.loads(storage.read_bytes(run + "/inputs.json"))
        assert manifest["shape"] == shape and manifest["count"] == 384, dataset  # converted with its shape
        assert (manifest["spec_generation"], inputs["spec_generation"], metrics["spec_generation"],
                results[dataset]["spec_generation"]) == (generation[dataset],) * 4
        assert metrics["units"] == sections["model"]["units"] and len(metrics["epochs"]) == 1
        assert metrics["batch_size_per_worker"] == sections["training"]["batch_size_per_worker"]
        assert metrics["threshold"]["quantile"] == sections["verdict"]["threshold_quantile"]  # its verdict rules
        assert metrics["min_skill"] == sections["verdict"]["min_skill"] and metrics["skill"] is not None
        assert metrics["verdict"] == "promoted" and results[dataset]["verdict"] == "promoted"
        src = pump if dataset == "pump" else fleet
        scored = landfall("score", str(src), "--dataset", dataset, "--out", str(tmp_path / f"{dataset}.parquet"),
                          "--json", env=env)
        assert scored.returncode == 0, scored.stderr
        assert json.loads(scored.stdout)["count"] == 384  # its own champion, its own shape
        if dataset == "fleet":  # its arrival rules: the first row is a header, as its spec says (not guessed)
            assert manifest["csv"]["header"] == "present"
