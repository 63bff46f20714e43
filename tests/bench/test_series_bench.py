"""``landfall bench series`` runs end to end on a small series (its figures are in docs/benchmarks.md; this checks
the bench, not the speed): both pipelines read the same windows, and the stored bytes follow from the design: the
series itself plus at most ``length - 1`` rows per shard boundary, whatever the stride, while pre-cut windows grow
with ``length / stride``."""

from __future__ import annotations

import json

from landfall_bench import cli


def test_the_series_bench_measures_both_pipelines_and_the_storage(tmp_path):
    out = tmp_path / "series.json"
    assert cli.main(["series", "--rows", "3000", "--channels", "3", "--length", "12", "--rounds", "1",
                     "--pipeline-batches", "2", "--warmup-batches", "1", "--batch-size", "64",
                     "--shuffle-buffer", "256", "--storage-rows", "20000", "--strides", "1,4",
                     "--shard-bytes", "40000", "--work-dir", str(tmp_path / "work"), "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    pipe = result["pipeline"]
    assert pipe["counts"]["series"]["windows"] == pipe["counts"]["precut"]["windows"] == 3000 - 12 + 1
    assert abs(pipe["counts"]["series"]["train"] - pipe["counts"]["precut"]["train"]) <= 12
    assert pipe["windows_per_s"]["series"] > 0 and pipe["windows_per_s"]["precut"] > 0
    st = result["storage"]
    assert st["series_float32_bytes"] == 20000 * 3 * 4
    for row in st["strides"]:
        assert row["windows"] == (20000 - 12) // row["stride"] + 1
        # Several shards (40 kB each): each boundary repeats at most length - 1 rows, plus TFRecord framing.
        assert row["shards"] > 3
        repeated = (row["shards"] - 1) * 11 * 3 * 4
        assert st["series_float32_bytes"] < row["stored_bytes"] <= st["series_float32_bytes"] + repeated + 4096
        assert row["precut_bytes"] > 12 / row["stride"] * 0.9 * row["stored_bytes"]
