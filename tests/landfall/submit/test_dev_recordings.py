"""Every NAB recording of the dev set (``bench/data/nab-dev/``), uploaded as its export wrote it under the
defaults (``window.length: auto``, the default ``max_gap``, ``duplicate_times`` and hold-out), converts and gets a
released job: none is held or rejected (issue #47). One of them also arrives with a repeated timestamp, as a
CloudWatch export in local time has at a daylight-saving change: merged, counted, released."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from landfall.core.artifacts import specs
from landfall.core.contracts.messages import Manifest
from landfall.submit.backends.local import LocalBackend
from landfall.submit.handler import handle_message
from landfall_bench import protocol
from tests.landfall.detect.helpers import commit
from tests.support import runtime


@pytest.fixture(autouse=True)
def _gate_on(monkeypatch):
    monkeypatch.setenv("LANDFALL_MIN_DATA", "record")  # the default gate (the suite turns it off elsewhere)


def test_every_dev_recording_gets_a_job_under_the_defaults(emulator_stack, bucket, topic, arrival_runtime,
                                                           tmp_path):
    storage, pubsub = emulator_stack.storage, emulator_stack.pubsub
    rt = runtime(emulator_stack, bucket, LocalBackend(tmp_path / "state"))  # the default JobConfig: batch 1024
    doc = json.loads((protocol.dev_root() / "series.json").read_text())
    for name, entry in doc.items():
        dataset = f"nab{name.split('_')[0]}"
        specs.apply(storage, bucket, {"apiVersion": "landfall.dataset/v1", "name": dataset,
                                      "shape": {"window": {"length": "auto"}, "features": 1},
                                      "arrival": {"series": {"time_column": "timestamp", "channels": ["value"]}}})
        frame = pd.read_csv(protocol.dev_root() / entry["file"]).iloc[: entry["train_rows"] + 1]
        if name.startswith("014"):  # a repeated hour: the row after 100 written with row 100's time
            frame.loc[101, "timestamp"] = frame.loc[100, "timestamp"]
        request = commit(storage, arrival_runtime, bucket, f"incoming/{dataset}/prefix.csv",
                         frame.to_csv(index=False).encode(), pubsub, topic)
        manifest = Manifest.from_json(storage.read_bytes(request.manifest), request.manifest)
        window = specs.for_dataset(storage, bucket, dataset).shape["window"]["length"]
        assert manifest.shape == [window, 1] and manifest.count > 0, (name, manifest.series)
        assert manifest.series["merged_rows"] == (1 if name.startswith("014") else 0)
        assert handle_message(request.to_json(), {}, rt) == "submitted", (name, window, manifest.count)
