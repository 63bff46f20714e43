"""``landfall score``, ``landfall promote`` and ``landfall rollback`` on local folders, and the demo's scoring panel.

One tiny model (GRU 8 -> 4 on 8 x 3 instances) trained on synthetic series, with its threshold (p99 of its
held-out errors) beside it. Scoring data: fresh instances of the same series with a few spiked (8 standard
deviations at 3 timesteps). Stated tolerance: every spiked instance is flagged, and at most 4 % of the normal
ones are (the threshold is their p99, so about 1 % are expected above it)."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np
import pyarrow.parquet as pq
import pytest

from landfall import cli
from landfall.core.artifacts import champion
from landfall.local.anomalies import inject, score_injected
from landfall.local.synthetic import time_series

SHAPE = (8, 3)
FALSE_ALARMS = 0.04


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    import tensorflow as tf
    import tf_keras as keras

    from landfall.core import scoring
    from trainer.training.model import build_model

    root = tmp_path_factory.mktemp("score")
    x = time_series(1000, *SHAPE, seed=1, anomaly_fraction=0.0)
    train, held, fresh = x[:450], x[450:600], x[600:]
    flat = train.reshape(-1, SHAPE[1])
    mean, std = flat.mean(0).tolist(), flat.std(0).tolist()
    keras.utils.set_random_seed(0)
    model = build_model(*SHAPE, (8, 4), 0.0, 1e-2)
    z = ((train - np.array(mean)) / np.array(std)).astype(np.float32)
    model.fit(z, z, epochs=10, batch_size=64, verbose=0)
    local = root / "runs" / "job-1" / "model"
    spec = tf.TensorSpec([None, *SHAPE], tf.float32, name="x")
    serve = tf.function(lambda v: {"reconstruction": model(v, training=False)}, input_signature=[spec])
    model.save(str(local), include_optimizer=False, save_traces=False, signatures={"serving_default": serve})
    (local / "normalization.json").write_text(json.dumps(
        {"shape": list(SHAPE), "dtype": "float32", "normalized": True, "mean": mean, "std": std}))
    errors = scoring.Scorer.from_model(model, mean, std, SHAPE).errors(held)
    threshold = scoring.threshold_doc(errors, 0.99)
    (local / "threshold.json").write_text(json.dumps(threshold))
    for job in ("job-1", "job-2"):
        (root / "runs" / job).mkdir(parents=True, exist_ok=True)
        (root / "runs" / job / "metrics.json").write_text(json.dumps(
            {"job": job, "dataset": "d", "status": "succeeded", "model": str(local),
             "challenger_loss": float(errors.mean()), "threshold": threshold}))
    return {"root": root, "model": str(local), "fresh": fresh, "threshold": threshold["value"]}


def test_score_flags_the_injected_anomalies_in_npy_and_csv(trained, tmp_path, capsys):
    x, injected = inject(trained["fresh"], 6, magnitude=8.0)
    npy = tmp_path / "new.npy"
    np.save(npy, x)
    with open(tmp_path / "new.csv", "w", newline="") as fh:
        csv.writer(fh).writerows(x.reshape(len(x), -1).tolist())
    for src in (npy, tmp_path / "new.csv"):
        out = tmp_path / f"{src.suffix[1:]}.parquet"
        assert cli.main(["score", str(src), "--dataset", "d", "--model", trained["model"], "--out", str(out),
                         "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)
        table = pq.read_table(out).to_pydict()
        assert table["index"] == list(range(len(x))) and summary["count"] == len(x)
        flagged = {i for i, a in zip(table["index"], table["anomaly"], strict=True) if a}
        assert set(injected) <= flagged
        assert len(flagged - set(injected)) <= FALSE_ALARMS * (len(x) - len(injected))
        assert summary["anomalies"] == len(flagged) and summary["threshold"] == pytest.approx(trained["threshold"])
        assert set(summary["quantiles"]) == {"p50", "p95", "p99", "p99.9"}
        errors = np.array(table["error"])
        assert summary["quantiles"]["p50"] == pytest.approx(np.quantile(errors, 0.5), rel=0.03)


def test_promote_rollback_and_score_with_the_champion(trained, tmp_path, capsys):
    root, models = trained["root"], str(tmp_path / "models")
    common = ["--dataset", "d", "--models", models]
    assert cli.main(["score", str(tmp_path / "x.npy"), *common]) == 2  # no champion yet
    assert "has no champion" in capsys.readouterr().err
    for job in ("job-1", "job-2"):
        assert cli.main(["promote", *common, "--run", job, "--runs", str(root / "runs"), "--by", "alice"]) == 0
    current, _ = champion.read(champion.Storage(), models, "d")
    assert (current.run, current.reason, current.promoted_by, current.previous) == ("job-2", "forced", "alice", 1)
    assert cli.main(["rollback", *common, "--by", "bob"]) == 0
    current, _ = champion.read(champion.Storage(), models, "d")
    assert (current.run, current.reason, current.promoted_by, current.seq) == ("job-1", "rollback", "bob", 3)
    assert "rolled back: champion of d is job-1" in capsys.readouterr().out
    x, injected = inject(trained["fresh"][:100], 3)
    np.save(tmp_path / "x.npy", x)
    assert cli.main(["score", str(tmp_path / "x.npy"), *common, "--out", str(tmp_path / "s.parquet")]) == 0
    assert "100 instances scored" in capsys.readouterr().out
    flagged = {i for i, a in enumerate(pq.read_table(tmp_path / "s.parquet").column("anomaly").to_pylist()) if a}
    assert set(injected) <= flagged


def test_the_demo_panel_finds_the_injected_instances(trained, tmp_path):
    result = score_injected(trained["model"], tmp_path, normal=trained["fresh"], injected=8)
    assert result.caught == 8 and len(result.injected) == 8
    assert result.false_alarms <= FALSE_ALARMS * (len(trained["fresh"]) - 8)
    assert sum(result.histogram["counts"]) == len(trained["fresh"]) == len(result.errors)
    assert result.threshold == pytest.approx(trained["threshold"]) and result.quantile == 0.99
    assert Path(result.out).exists()
    from landfall.local import plots

    assert plots.anomaly_scores(result, tmp_path / "scores.png").stat().st_size > 10_000


def test_score_reads_a_manifest_with_a_model_in_the_bucket(trained, emulator_stack, bucket, tmp_path, capsys):
    from landfall.arrival import converter
    from landfall.arrival.config import ConverterConfig

    storage = emulator_stack.storage
    model = f"gs://{bucket}/runs/job-1/model"
    for path in Path(trained["model"]).rglob("*"):
        if path.is_file():
            storage.upload(path, f"{model}/{path.relative_to(trained['model'])}")
    x, injected = inject(trained["fresh"][:120], 4)
    np.save(tmp_path / "x.npy", x)
    out = f"gs://{bucket}/tfrecords/d/x/"
    converter.convert(str(tmp_path / "x.npy"), out, "d", ConverterConfig.load({}, timesteps=8, features=3), storage)
    assert cli.main(["score", out + "manifest.json", "--dataset", "d", "--model", model, "--out",
                     str(tmp_path / "m.parquet"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["count"] == 120 and summary["model"] == model
    flagged = {i for i, a in enumerate(pq.read_table(tmp_path / "m.parquet").column("anomaly").to_pylist()) if a}
    assert set(injected) <= flagged and len(flagged - set(injected)) <= FALSE_ALARMS * 116 + 1


def test_score_streams_peak_memory_does_not_grow_with_the_input(trained, tmp_path):
    """Peak RSS of ``landfall score`` on 20,000 and on 400,000 instances (a 38 MiB file): it writes a row group
    per chunk and keeps a fixed-size histogram, so the peaks differ by far less than the input's size."""
    import subprocess
    import sys

    peaks = []
    for n in (20_000, 400_000):
        src = tmp_path / f"big-{n}.npy"
        np.save(src, np.resize(trained["fresh"], (n, *SHAPE)))
        # VmHWM: this process image's peak (ru_maxrss would count the forked copy of this test process too).
        code = ("import re, sys; from landfall import cli; "
                f"rc = cli.main(['score', {str(src)!r}, '--dataset', 'd', '--model', {trained['model']!r}, "
                f"'--out', {str(tmp_path / 'big.parquet')!r}, '--json']); "
                "print('PEAK', re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1]); sys.exit(rc)")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"})
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert json.loads(proc.stdout[:proc.stdout.rindex("PEAK")])["count"] == n
        peaks.append(int(proc.stdout.rsplit("PEAK", 1)[1]) / 1024)  # MiB
    assert peaks[1] - peaks[0] < 16, peaks  # the larger input alone is 37 MiB, its scores 5 MiB
