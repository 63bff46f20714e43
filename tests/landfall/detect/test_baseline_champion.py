"""On a real recording, a model that a baseline beats is not champion: the baseline is, and the scorer serves it on
arrival exactly as ``landfall score`` does (issue #47).

The data: NAB's ``realKnownCause``-style cloud metric ``exchange-3_cpm_results`` (TSB-AD-U series 014, from
``bench/data/nab-dev/``): its first 500 rows (TSB-AD's training prefix) arrive as the export wrote them,
through the real arrival stage as a series dataset with a 23-row window (one period, ``landfall.arrival.period``). The
real trainer (``python -m trainer.task`` on the emulators' bucket) trains a model that cannot learn anything (one
epoch at a learning rate of 1e-6): every baseline detects the surrogate's anomalies better, so the verdict saves the
best baseline as ``runs/<job>/detectors/<name>`` and makes it champion. The rest of the recording (with NAB's
labelled anomaly) then arrives, and the scorer scores it with that champion."""

from __future__ import annotations

import io
import json

import pandas as pd
import pyarrow.parquet as pq

from landfall import cli
from landfall.arrival import period
from landfall.core.artifacts import champion, detections, model_files
from landfall.core.contracts.layout import Layout
from landfall.detect import handler
from landfall_bench import protocol
from tests.conftest import pull_all
from tests.trainer.helpers import run_trainer

from .helpers import commit, scorer_runtime, store_spec

SERIES = "014_NAB_id_14_WebService_tr_500_1st_1045"


def test_a_baseline_that_detects_better_is_champion_and_is_served_on_arrival(
        emulator_stack, bucket, topic, arrival_runtime, detections_topic, tmp_path, monkeypatch, capsys):
    storage, pubsub = emulator_stack.storage, emulator_stack.pubsub
    doc = json.loads((protocol.dev_root() / "series.json").read_text())[SERIES]
    frame = pd.read_csv(protocol.dev_root() / doc["file"])
    window = period.length(frame["value"].to_numpy()[1:])
    assert window == 23  # one day of hourly readings
    store_spec(storage, bucket, {"apiVersion": "landfall.dataset/v1", "name": "cpm",
                                 "shape": {"window": {"length": window, "stride": 1}, "features": 1},
                                 "arrival": {"series": {"time_column": "timestamp", "channels": ["value"]}}})
    head, rest = frame.iloc[:doc["train_rows"] + 1], frame.iloc[doc["train_rows"] + 1:]
    request = commit(storage, arrival_runtime, bucket, "incoming/cpm/head.csv", head.to_csv(index=False).encode(),
                     pubsub, topic)
    job = f"gs://{bucket}/runs/job-weak"
    trained = run_trainer(["--manifest", request.manifest, "--job-dir", job, "--timesteps", str(window),
                           "--features", "1", "--holdout", "segment", "--epochs", "1", "--learning-rate", "1e-6",
                           "--model-kind", "dense", "--units", "8,2", "--dropout", "0", "--warm-start", "none"],
                          LANDFALL_RESULTS_TOPIC="")
    assert trained.returncode == 0, trained.stderr[-3000:]
    metrics = json.loads(storage.read_bytes(f"{job}/metrics.json"))
    found = metrics["detection"]
    scores = {n: f[found["key"]] for n, f in found["candidates"].items()}  # the basis the verdict ranked by
    assert found["chosen"] != "model" and scores["model"] < scores[found["chosen"]], found
    assert metrics["verdict"] == "promoted" and metrics["champion"] == f"{job}/detectors/{found['chosen']}"
    current, _ = champion.read(storage, champion.bucket_root(bucket), "cpm")
    assert current.model == metrics["champion"] and current.run == "job-weak"
    norm = json.loads(storage.read_bytes(f"{current.model}/normalization.json"))
    assert norm["kind"] == found["chosen"] and norm["shape"] == [window, 1]

    # The rest of the recording arrives: the scorer scores it with the baseline champion, as `landfall score` does.
    later = commit(storage, arrival_runtime, bucket, "incoming/cpm/rest.csv", rest.to_csv(index=False).encode(),
                   pubsub, topic)
    rt = scorer_runtime(emulator_stack, bucket, detections_topic)
    assert handler.handle(later.to_json(), {}, rt) == "published"
    [msg] = pull_all(pubsub, detections_topic, expect=1)
    message = json.loads(msg.data)
    assert message["champion"]["run"] == "job-weak" and message["count"] == len(rest)
    monkeypatch.setenv("LANDFALL_BUCKET", bucket)
    out = tmp_path / "rest.scores.parquet"
    assert cli.main(["score", f"gs://{bucket}/incoming/cpm/rest.csv", "--dataset", "cpm", "--bucket", bucket,
                     "--out", str(out), "--json"]) == 0
    assert pq.read_table(io.BytesIO(storage.read_bytes(message["scores"]))).equals(pq.read_table(out))
    aid = detections.arrival_of_manifest(later.manifest, Layout(), "cpm")
    summary = detections.read(storage, bucket, Layout(), "cpm", aid, "job-weak")
    assert summary is not None and summary.scoring["threshold"] == json.loads(
        storage.read_bytes(f"{current.model}/threshold.json"))["value"]

    # The record carries every file of the champion's folder by its digest (landfall.core.artifacts.model_files);
    # a file replaced after promotion is refused in one line, and nothing is scored with it.
    folder = current.model.rstrip("/") + "/"
    assert set(current.files) == {u[len(folder):] for u in storage.list(folder)}
    assert current.files == model_files.of_model(storage, current.model)  # taken locally: the bytes uploaded
    assert {"saved_model.pb", "normalization.json", "threshold.json"} <= set(current.files)
    norm["mean"] = [m + 1.0 for m in norm["mean"]]  # a shifted normalisation: every score would move
    storage.write_bytes(f"{current.model}/normalization.json", json.dumps(norm).encode())
    capsys.readouterr()
    tampered = tmp_path / "tampered.scores.parquet"
    assert cli.main(["score", f"gs://{bucket}/incoming/cpm/rest.csv", "--dataset", "cpm", "--bucket", bucket,
                     "--out", str(tampered)]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "normalization.json differs from the file promoted" in line and "not loaded" in line, line
    assert not tampered.exists()
