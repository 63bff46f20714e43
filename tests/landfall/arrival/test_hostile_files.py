"""The second bad-input corpus (issue 21): each class refused with one clear reason, or converted exactly.

Inputs come from the real writers: pandas exports concatenated, Excel's ``#N/A``, U+2212 minus, a ZIP64 archive
written by zipfile with its declared sizes patched, gzip of one unbounded line, pyarrow files with thousands of
column chunks in the footer. The big cases run ``landfall convert`` in its own process (or the ranged tasks
as processes) and check its peak RSS stays under the converter's 512 MiB; their streams are generated lazily.
"""

from __future__ import annotations

import csv
import gzip
import io
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from landfall.arrival import converter, csvfile, formats, ranged_local
from landfall.arrival.config import ConverterConfig
from landfall.core.errors import BadInput
from landfall.core.services.storage import Storage
from landfall.local.synthetic import time_series
from landfall_bench.convert import convert_in_child
from tests.landfall.arrival.ranged_helpers import assert_same, committed, in_process, run_all
from tests.landfall.arrival.test_csv_writers import CFG, F, T, W, convert
from tests.support import read_back

PEAK_RSS_LIMIT_MIB = 512
SEED = ConverterConfig.load({})  # 36 x 10, what `landfall convert` uses by default


def instances(n: int, seed: int = 0) -> np.ndarray:
    return np.round(np.random.default_rng(seed).normal(size=(n, T, F)), 3).astype("<f4")


def frame(data: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(data.reshape(len(data), -1).astype(np.float64))


def refused(tmp_path: Path, name: str, payload: bytes, **cfg) -> BadInput:
    with pytest.raises(BadInput) as err:
        convert(tmp_path, name, payload, **cfg)
    return err.value


def ranged_manifest(tmp_path: Path, name: str, payload: bytes, tasks: int = 2, **cfg):
    src = tmp_path / name
    src.write_bytes(payload)
    config = ConverterConfig(**{**CFG.__dict__, **cfg})
    storage = Storage("landfall-test")
    got = committed(run_all(storage, config, str(src), str(tmp_path / f"{name}.ranged"), tasks))
    return storage, got, in_process(storage, config, str(src), str(tmp_path / f"{name}.one"))


# -- wrong data that used to pass with exit 0 -------------------------------------------------------------
def test_concatenated_pandas_exports_skip_the_repeated_header(tmp_path):
    a, b = instances(30, 1), instances(20, 2)
    payload = (frame(a).to_csv(index=False) + frame(b).to_csv(index=False)).encode()
    assert payload.count(b"0,1,2,3") == 2  # two headers "0,1,...,W-1"
    manifest, got = convert(tmp_path, "cat.csv", payload)
    np.testing.assert_array_equal(got, np.concatenate([a, b]))
    assert manifest.csv["header"] == "present" and manifest.csv["repeated_headers"] == 1
    storage, ranged, one = ranged_manifest(tmp_path, "cat2.csv", payload)  # --tasks 2: the same
    assert_same(storage, ranged, one)
    assert ranged.count == 50 and ranged.csv["repeated_headers"] == 1


def test_excel_na_in_the_first_data_row_is_a_missing_value_not_a_header(tmp_path):
    data = instances(12)
    df = frame(data)
    df.iloc[0, 3] = np.nan
    payload = df.to_csv(index=False, header=False, na_rep="#N/A").encode()  # Excel's spelling of a missing cell
    assert payload.split(b"\n", 1)[0].split(b",")[3] == b"#N/A"
    err = refused(tmp_path, "na.csv", payload)
    assert err.reason == "non_finite" and "instance 0" in err.detail
    manifest, got = convert(tmp_path, "na-drop.csv", payload, drop_nonfinite=True)
    assert manifest.csv["header"] == "absent" and manifest.count == 11 and manifest.dropped_nonfinite == 1
    np.testing.assert_array_equal(got, data[1:])
    storage, ranged, one = ranged_manifest(tmp_path, "na2.csv", payload, drop_nonfinite=True)
    assert_same(storage, ranged, one)


def test_a_unicode_minus_in_the_first_row_is_read_as_minus(tmp_path):
    data = -np.abs(instances(8)) - 0.5
    text = frame(data).to_csv(index=False, header=False)
    first, rest = text.split("\n", 1)
    payload = (first.replace("-", "\u2212") + "\n" + rest.replace("-", "\u2212", 40)).encode()
    manifest, got = convert(tmp_path, "minus.csv", payload)
    assert manifest.csv["header"] == "absent" and manifest.count == 8
    np.testing.assert_array_equal(got, data)
    storage, ranged, one = ranged_manifest(tmp_path, "minus2.csv", payload)
    assert_same(storage, ranged, one)


def test_a_first_row_mixing_numbers_and_text_is_refused_not_dropped(tmp_path):
    rows = instances(4).reshape(4, -1).astype(float).tolist()
    rows[0][5] = "1.2.3"  # a typo, not a header
    buf = io.StringIO(newline="")
    csv.writer(buf).writerows(rows)
    err = refused(tmp_path, "mixed.csv", buf.getvalue().encode())
    assert err.reason == "ambiguous_header" and "'1.2.3'" in err.detail and "LANDFALL_CSV_HEADER" in err.detail
    manifest, _ = convert(tmp_path, "mixed-present.csv", buf.getvalue().encode(), csv_header="present")
    assert manifest.count == 3  # said so: the row is the header


def test_leading_blank_lines_are_skipped_and_counted(tmp_path):
    data = instances(5)
    payload = ("\n\r\n\n" + frame(data).to_csv(index=False)).encode()
    manifest, got = convert(tmp_path, "blank.csv", payload)
    np.testing.assert_array_equal(got, data)
    assert manifest.csv["leading_blank_lines"] == 3 and manifest.csv["header"] == "present"
    assert refused(tmp_path, "only-blank.csv", b"\n\n\n").reason == "empty_file"


# -- clear messages ------------------------------------------------------------------------------------------
def test_a_value_past_float32_is_out_of_range_even_when_dropping_nonfinite(tmp_path):
    rows = instances(6).reshape(6, -1).astype(float).tolist()
    rows[2][7] = 1e39
    buf = io.StringIO(newline="")
    csv.writer(buf).writerows(rows)
    for drop in (False, True):
        err = refused(tmp_path, f"big-{drop}.csv", buf.getvalue().encode(), drop_nonfinite=drop)
        assert err.reason == "out_of_range" and "1e+39" in err.detail and "float32" in err.detail
    wide = instances(6).astype("<f8")
    wide[4, 1, 2] = -1e39
    npy = io.BytesIO()
    np.save(npy, wide)
    err = refused(tmp_path, "big.npy", npy.getvalue(), drop_nonfinite=True)
    assert err.reason == "out_of_range" and "-1e+39" in err.detail
    table = pa.table({f"c{i}": wide.reshape(6, -1)[:, i] for i in range(W)})
    pq_buf = io.BytesIO()
    pq.write_table(table, pq_buf)
    assert refused(tmp_path, "big.parquet", pq_buf.getvalue()).reason == "out_of_range"


def test_inf_written_as_text_is_still_non_finite(tmp_path):
    rows = instances(3).reshape(3, -1).astype(float).tolist()
    rows[1][0] = float("inf")
    buf = io.StringIO(newline="")
    csv.writer(buf).writerows(rows)
    assert refused(tmp_path, "inf.csv", buf.getvalue().encode()).reason == "non_finite"


def test_rows_longer_than_pyarrows_block_convert_exactly(tmp_path):
    data = instances(3)
    # Each cell padded with leading zeros: a valid 1.1 MB row (pyarrow's block is 1 MiB).
    pad = "0" * (2**20 // W + 1000)
    flat = data.reshape(3, -1).astype(float)
    cells = [[f"-{pad}{-v:.3f}" if v < 0 else f"{pad}{v:.3f}" for v in row] for row in flat]
    payload = "\n".join(",".join(r) for r in cells).encode() + b"\n"
    assert len(payload) // 3 > 2**20
    _, got = convert(tmp_path, "long-rows.csv", payload)
    np.testing.assert_array_equal(got, data)


# -- unbounded lines, in bounded memory ---------------------------------------------------------------------
def _seed_row() -> bytes:
    return ",".join(f"{v:.3f}" for v in time_series(1, seed=3).reshape(-1)).encode() + b"\n"


def _long_line_chunks(total: int) -> list[bytes]:
    chunk = b"1" * (8 << 20)
    return [chunk] * (total // len(chunk))


def test_an_unbounded_line_is_refused_in_bounded_memory_plain_and_ranged(tmp_path):
    src = tmp_path / "long.csv"
    with open(src, "wb") as fh:
        fh.write(_seed_row())
        for chunk in _long_line_chunks(200 << 20):  # a 200 MB second line, no line break
            fh.write(chunk)
    rc, err, peak = convert_in_child(src, tmp_path / "out")
    assert rc == 2 and "line_too_long: line 2 is longer than 16 MiB" in err, err
    assert peak < PEAK_RSS_LIMIT_MIB, peak
    run = ranged_local.run_local(str(src), str(tmp_path / "out2"), tasks=2, storage=Storage("landfall-test"))
    assert run.manifest is None and run.rejection["reason"] == "line_too_long", run.rejection
    assert max(t.peak_rss_mib for t in run.tasks) < PEAK_RSS_LIMIT_MIB, [t.peak_rss_mib for t in run.tasks]


def test_an_unbounded_line_in_a_csv_gz_is_refused_in_bounded_memory(tmp_path):
    src = tmp_path / "long.csv.gz"
    with gzip.open(src, "wb", compresslevel=1) as fh:
        fh.write(_seed_row())
        for chunk in _long_line_chunks(400 << 20):
            fh.write(chunk)
    assert src.stat().st_size < 8 << 20
    rc, err, peak = convert_in_child(src, tmp_path / "out")
    assert rc == 2 and "line_too_long" in err, err
    assert peak < PEAK_RSS_LIMIT_MIB, peak


# -- bombs -----------------------------------------------------------------------------------------------
def test_a_csv_gz_that_expands_too_much_is_a_compression_bomb(tmp_path):
    src = tmp_path / "bomb.csv.gz"
    row = b",".join([b"0"] * 360) + b"\n"  # 720 bytes of valid data, compressing about 1000x
    with gzip.open(src, "wb", compresslevel=6) as fh:
        for _ in range((100 << 20) // (len(row) * 4096)):
            fh.write(row * 4096)
    rc, err, peak = convert_in_child(src, tmp_path / "out")
    assert rc == 2 and "compression_bomb" in err and "LANDFALL_MAX_GZIP_RATIO" in err, err
    assert peak < PEAK_RSS_LIMIT_MIB, peak
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_the_expansion_limits_are_settings(tmp_path, monkeypatch):
    monkeypatch.setattr(formats, "FREE_EXPANSION_BYTES", 0)  # small inputs: every byte counts
    data = np.zeros((500, T, F), dtype="<f4")
    payload = gzip.compress(frame(data).to_csv(index=False, header=False).encode(), 9)
    assert refused(tmp_path, "z.csv.gz", payload).reason == "compression_bomb"
    manifest, _ = convert(tmp_path, "z2.csv.gz", payload, max_gzip_ratio=10_000)
    assert manifest.count == 500
    err = refused(tmp_path, "z3.csv.gz", payload, max_gzip_ratio=10_000, max_expanded_bytes=1000)
    assert err.reason == "compression_bomb" and "LANDFALL_MAX_EXPANDED_BYTES" in err.detail


def _zip64_npz_lying(path: Path, n: int, declared_compressed: int) -> None:
    """``np.savez``'s layout (one ``x.npy``) written by zipfile, deflated and streamed; then its central directory
    entry rewritten as ZIP64 (32-bit sizes 0xFFFFFFFF, the sizes in the ZIP64 extra field, APPNOTE 4.5.3), the
    compressed size declared ``declared_compressed``: what a hostile writer can put there."""
    header = io.BytesIO()
    np.lib.format.write_array_header_2_0(header, {"descr": "<f4", "fortran_order": False, "shape": (n, 36, 10)})
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf, \
            zf.open("x.npy", "w", force_zip64=True) as member:
        member.write(header.getvalue())
        block = bytes(36 * 10 * 4 * 4096)
        for _ in range(n // 4096):
            member.write(block)
    file_size = zipfile.ZipFile(path).getinfo("x.npy").file_size  # (past 2 GiB zipfile writes ZIP64 itself)
    data = bytearray(path.read_bytes())
    central = data.rindex(b"PK\x01\x02")
    end = data.rindex(b"PK\x05\x06")
    name_len, extra_len = struct.unpack_from("<HH", data, central + 28)
    struct.pack_into("<II", data, central + 20, 0xFFFFFFFF, 0xFFFFFFFF)
    extra = struct.pack("<HHQQ", 0x0001, 16, file_size, declared_compressed)
    struct.pack_into("<H", data, central + 30, len(extra))
    at = central + 46 + name_len
    data[at : at + extra_len] = extra
    end += len(extra) - extra_len
    size = struct.unpack_from("<I", data, end + 12)[0]
    struct.pack_into("<I", data, end + 12, size + len(extra) - extra_len)
    path.write_bytes(bytes(data))


def test_a_zip64_npz_that_lies_about_its_size_is_stopped_by_what_it_expands(tmp_path):
    src = tmp_path / "bomb.npz"
    n = 4096 * 80  # 470 MB of zeros in a few hundred KB
    _zip64_npz_lying(src, n, declared_compressed=2**40)  # "1 TiB compressed": the declared ratio looks harmless
    info = zipfile.ZipFile(src).getinfo("x.npy")
    assert info.compress_size == 2**40 and info.file_size > 400 << 20
    assert info.file_size / info.compress_size < SEED.max_npz_ratio
    rc, err, peak = convert_in_child(src, tmp_path / "out")
    assert rc == 2 and "compression_bomb" in err and "read so far" in err, err
    assert peak < PEAK_RSS_LIMIT_MIB, peak
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.tfrecord"))


def test_an_honest_npz_of_real_data_still_converts(tmp_path):
    data = time_series(2000, seed=5)
    for i, save in enumerate((np.savez_compressed, np.savez)):  # deflated (inflated by zlib here), stored
        save(tmp_path / f"ok{i}.npz", x=data)
        storage = Storage("landfall-test")
        manifest = converter.convert(str(tmp_path / f"ok{i}.npz"), str(tmp_path / f"o{i}"), "d", SEED, storage)
        assert manifest.count == 2000
        np.testing.assert_array_equal(read_back(storage, manifest), data)
    damaged = bytearray((tmp_path / "ok0.npz").read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF  # inside the deflate stream
    err = refused(tmp_path, "bad.npz", bytes(damaged), timesteps=36, features=10)
    assert err.reason == "corrupt_npz"


# -- Parquet: the footer counts ----------------------------------------------------------------------------
def _many_row_groups(path: Path, groups: int) -> None:
    table = pa.table({f"c{i}": np.zeros(groups, dtype=np.float32) for i in range(360)})
    pq.write_table(table, path, row_group_size=1)


_FOOTER_COST = """
import sys, pyarrow.parquet as pq
def rss():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS:")) * 1024
before = rss()
meta = pq.read_metadata(sys.argv[1])
print(rss() - before, meta.serialized_size)
"""


def test_a_footer_too_big_to_parse_is_refused_before_it_is_parsed(tmp_path):
    src = tmp_path / "groups.parquet"
    _many_row_groups(src, 250)  # 90,000 column chunks: a 8 MB footer
    cost, footer = map(int, subprocess.run([sys.executable, "-c", _FOOTER_COST, str(src)], capture_output=True,
                                           text=True, check=True).stdout.split())
    # The estimate is an upper bound of what parsing it costs, and not a wild one.
    assert formats.FOOTER_FACTOR / 3 * footer < cost < formats.FOOTER_FACTOR * footer, (cost, footer)
    rc, err, peak = convert_in_child(src, tmp_path / "out", env={"LANDFALL_MEMORY_LIMIT_MIB": "128"})
    assert rc == 2 and "parquet_metadata_too_large" in err and "row groups" in err, err
    assert peak < PEAK_RSS_LIMIT_MIB and peak * 2**20 < cost + 200 * 2**20, peak
    rc, err, _ = convert_in_child(src, tmp_path / "out")  # 2 GiB: it fits, and converts
    assert rc == 0, err


def test_the_csv_header_rule_and_the_data_parser_agree_on_what_a_number_is():
    """A first row of one cell is a header exactly when the data parser refuses that cell as a number."""
    cells = ["1.5", "#N/A", "", "NaN", "\u2212 3", "1e5", " 2", "abc", "1,5", "0x10", "inf"]
    one = ConverterConfig(timesteps=1, features=1)
    for cell in cells:
        header = csvfile.decide([cell], 1, "auto").header  # the header rule: text, not a number or missing
        row = ('"' + cell.replace('"', '""') + '"\n').encode()  # the cell quoted, as a data row
        parsed = True
        try:
            list(csvfile.parse_blocks(iter([row]), one, csvfile.CsvLayout(header=False, index_column=False),
                                      csvfile.RowIndex(0)))
        except BadInput:
            parsed = False
        assert header != parsed, (cell, header)


def test_ranged_manifests_read_back_like_in_process(tmp_path):
    a, b = instances(40, 7), instances(41, 8)
    payload = (frame(a).to_csv(index=False) + frame(b).to_csv(index=False)).encode()
    storage, ranged, _ = ranged_manifest(tmp_path, "r.csv", payload, tasks=3)
    np.testing.assert_array_equal(read_back(storage, ranged), np.concatenate([a, b]))
