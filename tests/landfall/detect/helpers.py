"""A dataset with a champion on the emulators, for the scorer's tests: its spec stored, a SavedModel uploaded under
``runs/<job>/model`` and made the champion (``landfall.core.artifacts.champion.force``), and arrivals committed by the
real
arrival stage (``landfall.arrival.handler``), whose training requests are what the scorer receives."""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np
import pandas as pd

from landfall.arrival import handler as arrival
from landfall.core.artifacts import champion, specs
from landfall.core.contracts.events import ObjectEvent
from landfall.core.contracts.layout import Layout
from landfall.core.contracts.messages import TrainingRequest
from landfall.core.runtime import Runtime
from landfall.detect.config import DetectConfig

# A series dataset: 4-row windows every row, one channel; the "label" column is not a channel.
SERIES_SPEC = {"apiVersion": "landfall.dataset/v1", "name": "pump", "shape": {"window": {"length": 4, "stride": 1},
                                                                              "features": 1},
               "arrival": {"series": {"time_column": "t", "drop_columns": ["label"], "max_gap": 5}}}


def zero_model(model_dir: Path, shape: tuple[int, int], threshold: float | None = 0.4,
               row: float | None = None) -> Path:
    """A SavedModel that reconstructs every window as zeros: a window's error is the mean of its squared values (a
    row's own error its squared values'); ``row`` the row threshold its ``threshold.json`` holds, if any."""
    import tensorflow as tf

    spec = tf.TensorSpec([None, *shape], tf.float32, name="x")
    module = tf.Module()
    module.serve = tf.function(lambda x: {"reconstruction": tf.zeros_like(x)}, input_signature=[spec])
    tf.saved_model.save(module, str(model_dir), signatures={"serving_default": module.serve})
    (model_dir / "normalization.json").write_text(json.dumps({"shape": list(shape), "dtype": "float32",
                                                              "normalized": False}))
    if threshold is not None:
        doc = {"value": threshold, "quantile": 0.99, **({"row": {"value": row}} if row is not None else {})}
        (model_dir / "threshold.json").write_text(json.dumps(doc))
    return model_dir


def crown(storage, bucket: str, dataset: str, local_model: Path, run: str = "job-1") -> str:
    """Uploads the model to ``runs/<run>/model`` and makes it the dataset's champion; returns its URI."""
    uri = f"gs://{bucket}/runs/{run}/model"
    for path in sorted(local_model.rglob("*")):
        if path.is_file():
            storage.upload(path, f"{uri}/{path.relative_to(local_model).as_posix()}")
    champion.force(storage, champion.bucket_root(bucket), dataset, run=run, model=uri, evaluation={}, by="test")
    return uri


def series_frame(rows: int = 40, spike_at: int = 20, seed: int = 0) -> pd.DataFrame:
    """Small noise around zero, one spike of 3.0 (with its label), numeric times one apart."""
    rng = np.random.default_rng(seed)
    v = rng.normal(0, 0.05, rows)
    label = np.zeros(rows, np.int64)
    if spike_at is not None:
        v[spike_at] = 3.0
        label[spike_at] = 1
    return pd.DataFrame({"t": np.arange(rows, dtype=float), "v": v, "label": label})


def commit(storage, arrival_runtime, bucket: str, name: str, payload: bytes, pubsub, topic: str,
           **cfg) -> TrainingRequest:
    """Uploads ``payload`` as ``incoming/...`` and runs the real arrival stage on it; returns the training request it
    published (pulled from the test's topic)."""
    from tests.conftest import pull_all

    uri = f"gs://{bucket}/{name}"
    storage.write_bytes(uri, payload)
    info = storage.stat(uri)
    rt = arrival_runtime(**cfg)
    assert arrival.handle(ObjectEvent(bucket, name, info.generation, info.size, info.crc32c), rt) in (
        "converted", "duplicate")
    msgs = pull_all(pubsub, topic, expect=1)
    return TrainingRequest.from_message(msgs[-1].data)


def store_spec(storage, bucket: str, doc: dict) -> None:
    specs.apply(storage, bucket, doc)


def scorer_runtime(emulator_stack, bucket: str, detections_topic: str, **cfg) -> Runtime:
    config = DetectConfig.load({}, project=emulator_stack.project, bucket=bucket,
                               detections_topic=detections_topic, **cfg)
    return Runtime(config, Layout(), emulator_stack.storage, emulator_stack.pubsub)
