"""Arrivals written straight into the bucket (shards framed by the record writer, a manifest with the
converter's statistics, created last), each instance marked with its arrival and index so a test can tell
which records a job reads; and a release as the submit stage makes it."""

from __future__ import annotations

import numpy as np

from landfall.core.contracts.layout import Arrival, Layout, arrival_id
from landfall.core.services.storage import Storage
from landfall_bench.arrivals import release, write_arrival

SHAPE = (4, 3)
LAYOUT = Layout()


def instances(k: int, n: int, seed: int = 0) -> np.ndarray:
    """``n`` instances of arrival ``k``: x[i, 0, 0] = k, x[i, 0, 1] = i, the rest random."""
    x = np.random.default_rng(seed * 7919 + k).normal(size=(n, *SHAPE)).astype("<f4")
    x[:, 0, 0] = k
    x[:, 0, 1] = np.arange(n)
    return x


def arrival_of(bucket: str, dataset: str, k: int) -> Arrival:
    name = f"incoming/{dataset}/file-{k:04d}.npy"
    return Arrival(bucket, name, 1000 + k, dataset, arrival_id(name, 1000 + k))


def add_arrival(storage: Storage, bucket: str, dataset: str, k: int, n: int, per_shard: int = 0) -> str:
    """Writes arrival ``k`` (``n`` instances, in shards of ``per_shard``) and returns its manifest URI."""
    a = arrival_of(bucket, dataset, k)
    return write_arrival(storage, bucket, dataset, a.name, a.generation, instances(k, n), per_shard)


__all__ = ["LAYOUT", "SHAPE", "add_arrival", "arrival_of", "instances", "release"]
