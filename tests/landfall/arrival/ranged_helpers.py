"""Shared by the ranged-conversion tests: run every task in-process, read shards back, compare manifests."""

from __future__ import annotations

import io
import json

import numpy as np

from landfall.arrival import converter, ranged
from landfall.arrival.config import ConverterConfig
from landfall.core.contracts import records
from landfall.core.contracts.messages import Manifest
from landfall.core.rules import series_windows as window_rules
from landfall.core.services.storage import Storage
from tests.support import read_back


def run_all(storage: Storage, cfg: ConverterConfig, src: str, out: str, count: int, order=None,
            **kw) -> list[ranged.TaskResult]:
    """Every task of ``count``, one after the other (``order``: task indexes), on a local path ``src``."""
    generation = storage.stat(src).generation
    return [ranged.run_task(storage, cfg, bucket="", name=src, generation=generation, index=i, count=count,
                            out=out, dataset="d", **kw) for i in (order or range(count))]


def committed(results: list[ranged.TaskResult]) -> Manifest:
    winners = [r for r in results if r.committed]
    assert len(winners) == 1, [r.outcome for r in results]
    assert winners[0].manifest is not None
    return winners[0].manifest


def series_windows(storage: Storage, manifest: Manifest) -> np.ndarray:
    """Every window of a series arrival, cut from its shards as the trainer cuts them (numpy only)."""
    cut = window_rules.Layout.of(manifest.series or {}, manifest.shape[0])
    out, first = [], 0
    for shard in manifest.shards:
        body = storage.read_bytes(shard.uri)
        rows = np.frombuffer(b"".join(records.decode_example(r, (-1,)).tobytes()
                                      for r in records.iter_records(io.BytesIO(body))), np.float32)
        rows = rows.reshape(-1, manifest.shape[1])
        starts = cut.starts(np.arange(first, first + shard.count))
        starts -= starts[0]
        out.append(np.stack([rows[s:s + cut.length] for s in starts]))
        first += shard.count
    return np.concatenate(out) if out else np.zeros((0, *manifest.shape), np.float32)


def in_process(storage: Storage, cfg: ConverterConfig, src: str, out: str) -> Manifest:
    return converter.convert(src, out, "d", cfg, storage)


def assert_same(storage: Storage, got: Manifest, ref: Manifest) -> None:
    """Same instances (in the same order, hence the same multiset), count, statistics, CSV decision, source."""
    assert got.count == ref.count and got.dropped_nonfinite == ref.dropped_nonfinite
    assert got.csv == ref.csv and got.source == ref.source and got.shape == ref.shape
    assert sum(s.count for s in got.shards) == got.count
    np.testing.assert_array_equal(read_back(storage, got), read_back(storage, ref))
    for field in ("mean", "std", "min", "max"):
        np.testing.assert_allclose(getattr(got.stats, field), getattr(ref.stats, field), rtol=1e-9, atol=1e-9)


def comparable(manifest: Manifest, out: str) -> dict:
    """The manifest's content without its timestamp, shard URIs relative to ``out``."""
    raw = json.loads(manifest.to_json())
    raw.pop("created_at")
    for shard in raw["shards"]:
        shard["uri"] = shard["uri"][len(out):]
    return raw
