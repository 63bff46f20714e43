"""Series arrivals in snapshots (landfall.arrival.compaction, trainer.training.inputs, trainer.training.windows),
against fake-gcs-server: small series arrivals' shard files concatenated into compacted files, a large one named in
place, and a job reading the snapshot gets exactly the windows, the same training and held-out windows and the same
statistics as a job reading the arrivals' manifests; a retracted arrival is skipped, then rewritten out."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from landfall.arrival import compaction, converter
from landfall.arrival.config import ConverterConfig
from landfall.core.artifacts import retractions, snapshots
from landfall.core.contracts.messages import JobInputs
from landfall.core.rules import holdout
from tests.landfall.arrival.compact_helpers import LAYOUT, arrival_of, release
from trainer.training import windows
from trainer.training.inputs import load_manifests, plan_inputs, stage

LENGTH, STRIDE, CHANNELS = 4, 3, 2
SHAPE = (LENGTH, CHANNELS)
CFG = ConverterConfig(timesteps=LENGTH, features=CHANNELS, window_stride=STRIDE, series_time_column="t",
                      series_max_gap=5, shard_target_bytes=4 * CHANNELS * 100)  # shards of about 100 rows


def add_series(storage, bucket, tmp_path, k: int, rows: int, gap_at: int | None = None) -> None:
    """Series arrival ``k`` of ``rows`` rows: channel 0 is ``k``, channel 1 the row's number; a gap at ``gap_at``."""
    t = np.arange(rows, dtype=np.int64)
    if gap_at is not None:
        t[gap_at:] += 100
    src = tmp_path / f"s{k}.csv"
    pd.DataFrame({"t": t, "k": np.full(rows, float(k)), "row": np.arange(rows, dtype=float)}).to_csv(src, index=False)
    aid = arrival_of(bucket, "ds", k).arrival_id
    converter.convert(str(src), f"gs://{bucket}/tfrecords/ds/{aid}", "ds", dataclasses.replace(CFG), storage,
                      arrival_id=aid)


def read(storage, inputs_uri: str, work) -> tuple[dict, dict, object]:
    """The job's training and held-out windows, by (arrival, first row), as trainer.training.windows reads them."""
    inputs = load_manifests(storage, [inputs_uri], SHAPE)
    plan = plan_inputs(inputs, 1, 0, 1, 0.25, 3, holdout.BLOCKS)
    paths = [str(p) for p in stage(storage, plan, work)]
    out = []
    for split in (windows.TRAIN, windows.VALIDATION):
        got = {}
        for block in windows.read_windows(plan, paths, SHAPE, split, deterministic=True).as_numpy_iterator():
            for w in block:
                key = (int(w[0, 0]), int(w[0, 1]))
                assert key not in got, f"window {key} read twice"
                assert (w[:, 0] == key[0]).all()  # never across arrivals
                got[key] = w
        out.append(got)
    return out[0], out[1], inputs


def test_series_arrivals_compact_and_read_as_before(emulator_stack, bucket, tmp_path):
    storage = emulator_stack.storage
    sizes = {0: 30, 1: 57, 2: 250, 3: 41, 4: 90, 5: 1200}  # 2 (3 shards) and 5 (12): several shard files
    for k, n in sizes.items():
        add_series(storage, bucket, tmp_path, k, n, gap_at=n // 2 if k in (1, 2) else None)
    before_uri = release(storage, bucket, "ds", 1)
    train_a, val_a, before = read(storage, before_uri, tmp_path / "a")

    target = 4 * CHANNELS * 1800  # arrival 5 (about 9,600 bytes of rows) is named in place, the rest copied
    result = compaction.compact(storage, bucket, "ds", target)
    assert result.snapshot and result.arrivals == 6
    after_uri = release(storage, bucket, "ds", 2)
    doc = JobInputs.from_json(storage.read_bytes(after_uri))
    assert doc.snapshot == result.snapshot and doc.manifests == []
    snap = snapshots.read(storage, result.snapshot)
    held = snapshots.read_shards(storage, snap)
    assert all(s.series for s in held) and {r[0] for s in held for r in s.ranges} == {
        arrival_of(bucket, "ds", k).arrival_id for k in sizes}
    train_b, val_b, after = read(storage, after_uri, tmp_path / "b")

    # The same windows, split the same way, bit for bit, from fewer files.
    assert train_a.keys() == train_b.keys() and val_a.keys() == val_b.keys() and val_a
    assert all(np.array_equal(train_a[k], train_b[k]) for k in train_a)
    assert all(np.array_equal(val_a[k], val_b[k]) for k in val_a)
    assert sum(s.count for s in after.shards) == sum(s.count for s in before.shards)
    assert len({s.uri for s in after.shards}) < len({s.uri for s in before.shards})
    for x, y in zip(before.feature_stats(), after.feature_stats(), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-9)
    # Every window is the rows it says: consecutive rows of its arrival, none across the gap.
    for (k, row), w in {**train_b, **val_b}.items():
        np.testing.assert_array_equal(w[:, 1], row + np.arange(LENGTH))
        gap = sizes[k] // 2 if k in (1, 2) else None
        assert gap is None or not row < gap <= row + LENGTH - 1, (k, row)

    # Retract a copied arrival: skipped at once, then rewritten out of its compacted file.
    retractions.retract(storage, LAYOUT, arrival_of(bucket, "ds", 2), "deleted")
    skipped = read(storage, release(storage, bucket, "ds", 3), tmp_path / "c")
    result = compaction.compact(storage, bucket, "ds", target)
    assert result.snapshot and result.dropped == 1
    rewritten = read(storage, release(storage, bucket, "ds", 4), tmp_path / "d")
    expected = {k for k in train_a if k[0] != 2}
    assert skipped[0].keys() == rewritten[0].keys() == expected
    assert all(np.array_equal(rewritten[0][k], train_a[k]) for k in expected)
