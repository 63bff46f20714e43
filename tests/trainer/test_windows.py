"""Series datasets in the trainer (trainer.training.windows): windows cut in tf.data from the stored rows, balanced per
worker, an honest hold-out (no training window shares a row with a held-out one), and Daphnet's own CSV trained."""

from __future__ import annotations

import dataclasses
import json
import shutil

import numpy as np
import pandas as pd

from landfall.arrival import converter
from landfall.arrival.config import ConverterConfig
from landfall.core.artifacts import specs
from landfall.core.rules import holdout
from landfall.core.services.storage import Storage
from landfall_bench import realdata
from tests.trainer.helpers import run_trainer
from trainer.training import inputs, windows

LENGTH, STRIDE = 8, 3
CFG = ConverterConfig(timesteps=LENGTH, features=2, window_stride=STRIDE, series_time_column="t",
                      shard_target_bytes=4 * 2 * 400)


def _series(tmp_path, n: int, name: str, seed: int) -> np.ndarray:
    values = np.random.default_rng(seed).normal(size=(n, 2)).astype(np.float32)
    t = np.arange(n, dtype=np.int64)
    t[n // 2:] += 1000  # one gap: two segments
    pd.DataFrame({"t": t, "a": values[:, 0], "b": values[:, 1]}).to_csv(tmp_path / f"{name}.csv", index=False)
    converter.convert(str(tmp_path / f"{name}.csv"), str(tmp_path / "out" / name), "d", CFG, Storage("t"))
    return values


def test_windows_per_worker_are_exact_and_the_holdout_never_overlaps(tmp_path):
    values = {name: _series(tmp_path, n, name, i) for i, (name, n) in enumerate([("a1", 3000), ("a2", 1700)])}
    storage = Storage("t")
    loaded = inputs.load_manifests(storage, [str(tmp_path / "out")], (LENGTH, 2))
    seen: dict[str, dict[str, list[int]]] = {}
    for worker in range(2):
        plan = inputs.plan_inputs(loaded, 2, worker, 16, 0.2, 42, holdout.RANDOM)
        assert plan.split.mode == holdout.SEGMENT  # series are always held out apart by a window (segment)
        paths = inputs.stage(storage, plan, tmp_path / f"stage{worker}")
        for split, counts in ((windows.TRAIN, plan.train_counts), (windows.VALIDATION, plan.val_counts)):
            got = np.concatenate(list(windows.read_windows(plan, paths, (LENGTH, 2), split,
                                                                      deterministic=True).as_numpy_iterator()))
            assert len(got) == counts[worker]  # exact, and balanced to within one window
            assert max(counts) - min(counts) <= 1
            # Every window is the rows it names, found by its start in its arrival.
            for (i, starts), got_part in zip(windows.window_starts(plan, split),
                                             np.split(got, np.cumsum([len(s) for _, s in
                                                                      windows.window_starts(plan, split)])[:-1]),
                                             strict=True):
                shard = plan.shards[i]
                first = int(shard.series.starts([shard.arrival_start])[0])
                arrival = shard.manifest.rsplit("/", 2)[-2]
                rows = values[arrival]  # both segments are kept: the stored rows are the series' rows
                expected = np.stack([rows[first + s:first + s + LENGTH] for s in starts]) if len(starts) else got_part
                np.testing.assert_array_equal(got_part, expected)
                seen.setdefault(arrival, {}).setdefault(split, []).extend((first + starts).tolist())
    for arrival, sides in seen.items():
        train, held = np.array(sorted(sides[windows.TRAIN])), np.array(sorted(sides[windows.VALIDATION]))
        assert len(held) and len(train)
        # No training window [s, s + LENGTH) overlaps a held-out one: starts at least LENGTH rows apart.
        nearest = np.abs(train[:, None] - held[None, :]).min()
        assert nearest >= LENGTH, (arrival, nearest)


def test_daphnet_uploaded_unchanged_converts_and_trains(tmp_path):
    src = tmp_path / "S06R02E0.csv"
    shutil.copyfile(realdata.DATA / "S06R02E0.csv", src)
    doc = {"apiVersion": specs.API_VERSION, "name": "daphnet", "shape": {"window": {"length": 16, "stride": 4}},
           "arrival": {"series": {"time_column": "timestamp", "channels": list(realdata.DAPHNET_CHANNELS)}}}
    spec = specs.DatasetSpec.from_document(specs.validate(doc, "daphnet.yaml"), 1)
    cfg = dataclasses.replace(ConverterConfig(), **spec.converter_fields())
    manifest = converter.convert(str(src), str(tmp_path / "out" / "a"), "daphnet", cfg, Storage("t"))
    assert manifest.shape == [16, 9] and manifest.count == (7040 - 16) // 4 + 1
    assert manifest.series["segments"][0][3] == 280.0  # 1970-01-01 00:04:40, in seconds
    job = tmp_path / "job"
    proc = run_trainer(["--manifest", str(tmp_path / "out" / "a" / "manifest.json"), "--job-dir", str(job),
                        "--epochs", "2", "--batch-size-per-worker", "64", "--units", "8,4", "--verbose", "0",
                        *spec.trainer_args()], timeout=240, LANDFALL_RESULTS_TOPIC="")
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((job / "metrics.json").read_text())
    arrival = metrics["instances"]["arrivals"][0]
    assert arrival["instances"] == manifest.count and arrival["validation"] > 0
    assert arrival["train"] + arrival["validation"] < manifest.count  # the gap windows are in neither split
    # A follow-up job on the same series warm-starts from the first one's model and carries on from where it ended.
    again = tmp_path / "job-2"
    proc = run_trainer(["--manifest", str(tmp_path / "out" / "a" / "manifest.json"), "--job-dir", str(again),
                        "--epochs", "1", "--batch-size-per-worker", "64", "--units", "8,4", "--verbose", "0",
                        "--warm-start", str(job), *spec.trainer_args()], timeout=240, LANDFALL_RESULTS_TOPIC="")
    assert proc.returncode == 0, proc.stderr[-3000:]
    follow = json.loads((again / "metrics.json").read_text())
    assert follow["warm_start_from"] == str(job / "model") and follow["warm_start"]["mode"] == "uri"
    assert follow["epochs"][0]["val_loss"] < metrics["epochs"][0]["val_loss"]
    assert follow["instances"]["arrivals"][0]["validation"] == arrival["validation"]  # the same hold-out
