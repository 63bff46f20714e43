"""Test data for the trainer: shards and a manifest in the exact format the converter writes.

``write_dataset`` stands in for ``landfall.arrival.converter.convert`` where a test needs to control what it
writes (bad manifests, odd shard counts); the cross-stage test uses the real converter.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from landfall.core.layout import shard_name
from landfall.core.messages import FeatureStats, Manifest, Shard, Source
from landfall.core.records import RecordFramer
from landfall.core.storage import Storage, join

REPO = Path(__file__).resolve().parents[2]
SHAPE = (36, 10)


def make_array(n: int, seed: int = 0, shape: tuple[int, int] = SHAPE) -> np.ndarray:
    """Smooth, learnable sequences (sines of random phase and frequency) plus a little noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(shape[0], dtype=np.float32)[None, :, None]
    freq = rng.uniform(0.1, 0.5, size=(n, 1, shape[1])).astype(np.float32)
    phase = rng.uniform(0, 2 * np.pi, size=(n, 1, shape[1])).astype(np.float32)
    x = 3.0 * np.sin(freq * t + phase) + 1.5 + 0.05 * rng.standard_normal((n, *shape)).astype(np.float32)
    return x.astype("<f4")


def write_dataset(storage: Storage, prefix: str, array: np.ndarray, shards: int = 2, dataset: str = "demo",
                  arrival_id: str = "arrival-1", **manifest_overrides) -> str:
    """Writes ``part-*.tfrecord`` shards and ``manifest.json`` under ``prefix``; returns the manifest URI."""
    framer = RecordFramer(tuple(array.shape[1:]))
    refs = []
    for i, part in enumerate(np.array_split(array, shards)):
        uri = join(prefix, shard_name(i, shards))
        with storage.open_write(uri) as out:
            out.write(framer.frame(part))
        refs.append(Shard(uri=uri, count=len(part), bytes=out.size, crc32c=out.crc32c))
    flat = array.reshape(-1, array.shape[-1]).astype(np.float64)
    stats = FeatureStats(mean=flat.mean(0).tolist(), std=flat.std(0).tolist(), min=flat.min(0).tolist(),
                         max=flat.max(0).tolist())
    manifest = Manifest(dataset=dataset, arrival_id=arrival_id, source=Source("b", "incoming/x.npy", 1, 1),
                        shape=list(array.shape[1:]), count=len(array), shards=refs, stats=stats)
    if manifest_overrides:
        manifest = dataclasses.replace(manifest, **manifest_overrides)
    uri = join(prefix, "manifest.json")
    storage.write_bytes(uri, manifest.to_json().encode())
    return uri


def trainer_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1",
                "CUDA_VISIBLE_DEVICES": ""})
    env.pop("TF_CONFIG", None)
    env.update(extra)
    return env


def run_trainer(args: list[str], timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainer.task", *args], cwd=REPO, env=trainer_env(**env),
                          capture_output=True, text=True, timeout=timeout)
