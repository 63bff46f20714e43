"""``landfall convert``: same code as the function, local paths and gs:// alike, bounded memory."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from landfall.cli import main
from landfall.core.contracts.messages import Manifest
from landfall.local.synthetic import time_series
from landfall_bench.convert import peak_rss_mib

PEAK_RSS_LIMIT_MIB = 512


@pytest.fixture
def bulky(tmp_path):
    """``tmp_path`` for a test that writes over a GiB (an input larger than the limit and its shards), emptied
    when the test ends: deleted within the kernel's dirty-page expiry (30 s), most of it is never written to the
    disk, where it competed with the rest of the suite for I/O (pytest keeps its temporary folders otherwise)."""
    yield tmp_path
    for path in tmp_path.iterdir():
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def test_local_to_local(tmp_path, capsys):
    data = time_series(300, seed=9)
    np.save(tmp_path / "in.npy", data)
    assert main(["convert", str(tmp_path / "in.npy"), "--out", str(tmp_path / "out"),
                 "--shard-target-bytes", "200000"]) == 0
    manifest = Manifest.from_json((tmp_path / "out" / "manifest.json").read_text())
    assert manifest.count == 300 and len(manifest.shards) == 3 and manifest.dataset == "in"
    assert "300 instances" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "manifest.json", "part-00000-of-00003.tfrecord", "part-00001-of-00003.tfrecord",
        "part-00002-of-00003.tfrecord", "profile.json"]  # the arrival's profile (landfall.core.quality.profile)


def test_gs_to_gs_with_custom_shape(emulator_stack, bucket):
    data = np.random.default_rng(0).normal(size=(50, 12, 3)).astype("<f4")
    buf = io.BytesIO()
    np.save(buf, data)
    emulator_stack.storage.write_bytes(f"gs://{bucket}/raw/x.npy", buf.getvalue())
    out = f"gs://{bucket}/tfrecords/custom/manual"
    assert main(["convert", f"gs://{bucket}/raw/x.npy", "--out", out, "--dataset", "custom", "--shape", "12,3"]) == 0
    manifest = Manifest.from_json(emulator_stack.storage.read_bytes(out + "/manifest.json"))
    assert manifest.shape == [12, 3] and manifest.count == 50 and manifest.source.bucket == bucket


def test_bad_input_is_one_line_naming_file_and_reason(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2,3\n")
    proc = subprocess.run([sys.executable, "-m", "landfall.cli", "convert", str(bad), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and "wrong_column_count" in lines[0]
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


@pytest.mark.parametrize("fmt", ["npy", "csv"])
def test_memory_stays_bounded_for_an_input_larger_than_the_limit(bulky, fmt):
    n = 160_000 if fmt == "csv" else 480_000  # ~620 MB of CSV text, ~690 MB of .npy
    src = bulky / f"big.{fmt}"
    # One block of seed-shaped series, written again and again: the converter's memory does not depend on the
    # values, and generating 480,000 distinct series took 20 s of the test.
    block = time_series(40_000, seed=0)
    if fmt == "npy":
        arr = np.lib.format.open_memmap(src, mode="w+", dtype="<f4", shape=(n, 36, 10))
        for start in range(0, n, 40_000):
            arr[start : start + 40_000] = block
        arr.flush()
        del arr
    else:
        schema = pa.schema([(f"c{i}", pa.float32()) for i in range(360)])
        flat = block.reshape(40_000, -1)
        table = pa.table({f"c{i}": flat[:, i] for i in range(360)}, schema=schema)
        with pacsv.CSVWriter(src, schema, write_options=pacsv.WriteOptions(include_header=False)) as w:
            for _ in range(0, n, 40_000):
                w.write_table(table)
    assert src.stat().st_size > PEAK_RSS_LIMIT_MIB * 2**20
    peak = peak_rss_mib(src, bulky / "out")
    assert peak < PEAK_RSS_LIMIT_MIB, f"peak RSS {peak:.0f} MiB for a {src.stat().st_size >> 20} MiB input"
    assert Manifest.from_json((bulky / "out" / "manifest.json").read_text()).count == n


@pytest.mark.parametrize("layout", ["columns", "list"])
def test_memory_stays_bounded_for_a_parquet_row_group_larger_than_the_limit(bulky, layout):
    """One row group of 420,000 x 360 float32 (605 MB decoded): it must be streamed by batches, not read whole.

    pyarrow's writer starts a row group on every write call, so the table is written in one call with a
    row-group size of all its rows. Random floats do not compress away. The reader holds one page per
    column at a time, so the 360-column file is written with 64 KiB pages (pandas' default is 1 MiB:
    360 MiB of pages before any row group); the one-column list file keeps the writer's defaults.
    """
    n = 420_000
    rng = np.random.default_rng(7)
    src = bulky / f"big-{layout}.parquet"
    if layout == "columns":
        table = pa.table({f"c{i}": rng.standard_normal(n, dtype=np.float32) for i in range(360)})
        pq.write_table(table, src, row_group_size=n, data_page_size=64 * 1024, use_dictionary=False)
    else:
        values = rng.standard_normal(n * 360, dtype=np.float32)
        table = pa.table({"x": pa.FixedSizeListArray.from_arrays(values, 360)})
        pq.write_table(table, src, row_group_size=n)
        del values
    del table
    meta = pq.read_metadata(src)
    assert meta.num_row_groups == 1 and meta.num_rows == n
    assert meta.row_group(0).total_byte_size > PEAK_RSS_LIMIT_MIB * 2**20
    assert src.stat().st_size > PEAK_RSS_LIMIT_MIB * 2**20
    peak = peak_rss_mib(src, bulky / "out")
    assert peak < PEAK_RSS_LIMIT_MIB, f"peak RSS {peak:.0f} MiB for one {src.stat().st_size >> 20} MiB row group"
    assert Manifest.from_json((bulky / "out" / "manifest.json").read_text()).count == n
