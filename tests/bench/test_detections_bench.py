"""The detections benchmark's own arithmetic (``landfall_bench.detections``): labelled episodes, which of them a
detection's ranges cover, and the Cloud Run cost of the measured seconds."""

from __future__ import annotations

import numpy as np
import pytest

from landfall_bench import detections


def test_episodes_and_coverage():
    labels = np.zeros(30, np.uint8)
    labels[[3, 4, 5, 20, 29]] = 1
    truth = detections.episodes(labels)
    assert truth == [(3, 5), (20, 20), (29, 29)]
    message = {"ranges": [{"first_row": 5, "last_row": 9}, {"first_row": 25, "last_row": 28}]}
    assert detections.covered(message, truth) == 1  # touches the first episode only
    message["summary_ranges"] = [*message["ranges"], {"first_row": 29, "last_row": 29}]
    assert detections.covered(message, truth) == 2  # the summary's ranges win over the message's (at most 200)


def test_cost_per_1000_arrivals_from_the_warm_seconds():
    out = {"latency": [{"scoring_s": 9.0, "model_load_s": 4.0}, {"scoring_s": 0.2, "model_load_s": 0.0},
                       {"scoring_s": 0.4, "model_load_s": 0.0}]}
    doc = detections.cost(out)
    per_second = 2 * 0.000024 + 4 * 0.0000025  # 2 vCPU and 4 GiB
    assert doc["seconds_per_10000_rows"] == pytest.approx(0.3)  # the cold upload is left out
    assert doc["per_1000_arrivals_of_10000_rows_usd"] == pytest.approx(round(1000 * (0.3 * per_second + 0.4e-6), 4))


def test_the_series_csv_is_what_the_spec_reads():
    body = detections.csv_of(np.array([[1.5], [2.5]], np.float32), np.array([0, 1]), start=10).decode()
    assert body.splitlines() == ["t,value,is_anomaly", "10.0,1.5,0", "11.0,2.5,1"]
    assert detections.SPEC["arrival"]["series"] == {"time_column": "t", "drop_columns": ["is_anomaly"]}


def test_a_recording_of_the_multivariate_set_and_its_latency_phases(monkeypatch):
    """``--recording``: the shipped MSL recording (55 channels) as a series dataset at its period, every channel in
    the CSV; a latency split into phases that add up to it."""
    from landfall.core.artifacts.detections import Summary
    from landfall_bench import protocol

    monkeypatch.setenv("LANDFALL_MV_DEV", str(protocol.MV_DEV))
    spec, train, test, labels, source = detections.recording("002", beside_retrain=True)
    assert spec["name"] == detections.RECORDING and spec["shape"]["features"] == 55 == test.shape[1]
    assert spec["shape"]["window"] == {"length": 125, "stride": 31} and spec["retrain"]["max_jobs_per_day"] > 1
    assert len(train) == 500 and len(test) == len(labels) == 1827 and source.startswith("002_MSL")
    head = detections.csv_of(test[:2], labels[:2]).decode().splitlines()[0].split(",")
    assert head == ["t", *(f"c{j}" for j in range(55)), "is_anomaly"]
    summary = Summary({"scored_at": "2026-12-05T10:00:10Z"}, {}, {"total_s": 4.0, "model_load_s": 1.0,
                                                                "scoring_s": 2.5}, "gs://b/summary.json")
    upload = 1796464800.0  # 2026-12-05T10:00:00Z, the upload's start
    split = detections.phases(upload, "2026-12-05T10:00:03Z", summary, upload + 10.5)
    assert split == {"convert": 3.0, "request": 3.0, "load": 1.0, "score": 2.5, "write": 0.5, "publish": 0.5}
    assert sum(split.values()) == pytest.approx(10.5)
