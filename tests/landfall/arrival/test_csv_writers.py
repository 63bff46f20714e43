"""CSV files as the common writers produce them read back exactly: the same instances, none added or dropped.

Every file here is written by the real tool (pandas, the csv module in every quoting mode, numpy.savetxt,
pyarrow.csv, an Excel-style BOM + CRLF export), never by hand, and converted by the same code the function
runs (``converter.convert`` on local paths).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from landfall.arrival import converter, csvfile
from landfall.arrival.config import ConverterConfig
from landfall.core.contracts import records
from landfall.core.contracts.messages import Manifest
from landfall.core.errors import BadInput
from landfall.core.services.storage import Storage

T, F = 4, 3  # small instances keep the files small; W = 12 columns
W = T * F
CFG = ConverterConfig(timesteps=T, features=F, project="landfall-test")


def instances(n: int = 257, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(n, T, F)) * 10.0 ** rng.integers(-3, 4, size=(n, 1, 1))).astype("<f4")


def convert(tmp_path: Path, name: str, payload: bytes, **cfg) -> tuple[Manifest, np.ndarray]:
    src = tmp_path / name
    src.write_bytes(payload)
    out = tmp_path / (name + ".out")
    config = ConverterConfig(**{**CFG.__dict__, **cfg})
    manifest = converter.convert(str(src), str(out), "d", config, Storage("landfall-test"))
    got = [records.decode_example(r, (T, F)) for shard in manifest.shards
           for r in records.iter_records(io.BytesIO(Path(shard.uri).read_bytes()))]
    return manifest, np.stack(got)


def rows(data: np.ndarray) -> list[list[float]]:
    return data.reshape(len(data), -1).astype(float).tolist()


def frame(data: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(data.reshape(len(data), -1))


def csv_module(data: np.ndarray, quoting: int, header: list[str] | None, **kw) -> bytes:
    buf = io.StringIO(newline="")
    writer = csv.writer(buf, quoting=quoting, **kw)
    if header is not None:
        writer.writerow(header)
    writer.writerows(rows(data))
    return buf.getvalue().encode()


def pyarrow_csv(data: np.ndarray, header: bool) -> bytes:
    table = pa.table({f"c{i}": data.reshape(len(data), -1)[:, i] for i in range(W)})
    sink = io.BytesIO()
    pacsv.write_csv(table, sink, write_options=pacsv.WriteOptions(include_header=header))
    return sink.getvalue()


def savetxt(data: np.ndarray, **kw) -> bytes:
    buf = io.BytesIO()
    np.savetxt(buf, data.reshape(len(data), -1), delimiter=",", **kw)
    return buf.getvalue()


def excel(data: np.ndarray) -> bytes:
    """What Excel's "CSV UTF-8" export writes: a BOM, CRLF line ends, a header row of names."""
    text = pd.DataFrame(data.reshape(len(data), -1), columns=[f"sensor {i}" for i in range(W)]).to_csv(
        index=False, lineterminator="\r\n")
    return b"\xef\xbb\xbf" + text.encode()


QUOTING = {name: getattr(csv, name) for name in dir(csv) if name.startswith("QUOTE_")}
NAMES = [f"v{i}" for i in range(W)]

WRITERS = {
    "pandas": (lambda d: frame(d).to_csv(index=False).encode(), "present", False),
    "pandas-index": (lambda d: frame(d).to_csv().encode(), "present", True),
    "pandas-named-index": (lambda d: frame(d).rename_axis("t").to_csv().encode(), "present", True),
    "pandas-no-header": (lambda d: frame(d).to_csv(index=False, header=False).encode(), "absent", False),
    "pandas-index-no-header": (lambda d: frame(d).to_csv(header=False).encode(), "absent", True),
    "pandas-quote-all": (lambda d: frame(d).to_csv(index=False, quoting=csv.QUOTE_ALL).encode(), "present", False),
    "pandas-gzip-crlf": (lambda d: frame(d).to_csv(index=False, lineterminator="\r\n").encode(), "present", False),
    "numpy-savetxt": (lambda d: savetxt(d), "absent", False),
    "numpy-savetxt-short": (lambda d: savetxt(d, fmt="%.9g"), "absent", False),
    "pyarrow": (lambda d: pyarrow_csv(d, True), "present", False),
    "pyarrow-no-header": (lambda d: pyarrow_csv(d, False), "absent", False),
    "excel-bom-crlf": (excel, "present", False),
    **{f"csv-{q.lower()}": (lambda d, q=q: csv_module(d, QUOTING[q], None, escapechar="\\"), "absent", False)
       for q in QUOTING if q not in ("QUOTE_STRINGS", "QUOTE_NOTNULL")},
    **{f"csv-{q.lower()}-header": (lambda d, q=q: csv_module(d, QUOTING[q], NAMES, escapechar="\\"), "present", False)
       for q in QUOTING},
    **{f"csv-{q.lower()}-index-names": (lambda d, q=q: csv_module(d, QUOTING[q], [str(i) for i in range(W)],
                                                                   escapechar="\\"), "present", False)
       for q in QUOTING},
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_real_writers_read_back_exactly(tmp_path, writer):
    write, header, indexed = WRITERS[writer]
    data = instances()
    payload = write(data)
    name = f"{writer}.csv.gz" if "gzip" in writer else f"{writer}.csv"
    manifest, got = convert(tmp_path, name, gzip.compress(payload) if name.endswith(".gz") else payload)
    assert manifest.count == len(data) == len(got)
    np.testing.assert_array_equal(got, data)
    assert manifest.csv is not None
    assert (manifest.csv["header"], manifest.csv["index_column"]) == (header, indexed)
    assert manifest.csv["dialect"]["bom"] == payload.startswith(b"\xef\xbb\xbf")
    assert manifest.csv["dialect"]["lineterminator"] == ("\r\n" if b"\r\n" in payload else "\n")


def test_all_quoted_headerless_file_keeps_its_first_row(tmp_path):
    data = instances(257)
    manifest, got = convert(tmp_path, "q.csv", csv_module(data, csv.QUOTE_ALL, None))
    assert manifest.count == 257 and manifest.csv["header"] == "absent"
    np.testing.assert_array_equal(got, data)


def test_missing_final_newline_and_trailing_blank_lines(tmp_path):
    data = instances(40)
    text = frame(data).to_csv(index=False, header=False, lineterminator="\r\n")
    for i, variant in enumerate((text.rstrip("\r\n"), text + "\r\n\r\n", text + "\n\n\n")):
        _, got = convert(tmp_path, f"t{i}.csv", variant.encode())
        np.testing.assert_array_equal(got, data)


def test_header_setting_overrides_the_guess(tmp_path):
    buf = io.StringIO(newline="")
    # Rows 1 and 3 read 0..W-1, like pandas' header; row 2 is other data.
    csv.writer(buf).writerows([list(range(W)), [i + 0.5 for i in range(W)], list(range(W))])
    payload = buf.getvalue().encode()
    manifest, _ = convert(tmp_path, "n.csv", payload, csv_header="absent")
    assert manifest.count == 3 and manifest.csv["header"] == "absent"
    auto, _ = convert(tmp_path, "n-auto.csv", payload)
    # The documented ambiguity of `auto`: such rows are headers (the repeat is counted, as for concatenated exports).
    assert auto.count == 1 and auto.csv["header"] == "present" and auto.csv["repeated_headers"] == 1
    named = csv_module(instances(5), csv.QUOTE_MINIMAL, NAMES)
    forced, _ = convert(tmp_path, "p-present.csv", named, csv_header="present")
    assert forced.count == 5
    with pytest.raises(BadInput) as err:
        convert(tmp_path, "p.csv", named, csv_header="absent")
    assert err.value.reason == "non_numeric"


def test_a_config_rejects_an_unknown_header_mode():
    with pytest.raises(ValueError, match="csv_header"):
        ConverterConfig.load({"LANDFALL_CSV_HEADER": "maybe"})


@pytest.mark.parametrize("payload,reason", [
    (b'1,2,3,4,5,6,7,8,9,10,11,"1\n2"\n', "quoted_newline"),
    (b"1,2,3,4,5,6,7,8,9,10,11,12\n" + b'1,2,3,4,5,6,7,8,9,10,11,"1\n2"\n' * 3, "quoted_newline"),
    (b"1;2;3;4;5;6;7;8;9;10;11;12\n", "wrong_column_count"),
    (b"5,1,2,3,4,5,6,7,8,9,10,11,12\n", "wrong_column_count"),  # W+1 columns, the first not an index
    (b"0,1,2,3,4,5,6,7,8,9,10,11,12\n1,1,2,3,4,5,6,7,8,9,10,11,12\n7,1,2,3,4,5,6,7,8,9,10,11,12\n",
     "wrong_column_count"),  # counts rows, then stops counting
    (b"\xff\xfe1,2\n", "bad_encoding"),
])
def test_refused_with_a_clear_reason(tmp_path, payload, reason):
    with pytest.raises(BadInput) as err:
        convert(tmp_path, "bad.csv", payload)
    assert err.value.reason == reason, err.value
    assert not (tmp_path / "bad.csv.out").exists() or not any((tmp_path / "bad.csv.out").iterdir())


def test_a_quoted_newline_is_refused_in_a_later_block(tmp_path, monkeypatch):
    monkeypatch.setattr(csvfile, "BLOCK_BYTES", 64)
    data = instances(30)
    good = csv_module(data, csv.QUOTE_ALL, None)
    with pytest.raises(BadInput) as err:
        convert(tmp_path, "late.csv", good + b'"1\n2"' + b',"1"' * (W - 1) + b"\n")
    assert err.value.reason == "quoted_newline"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2), min_size=1, max_size=40), st.integers(0, 3))
def test_quoted_newline_detector_agrees_with_the_csv_module(kinds, seed):
    """Rows of quoted fields, some holding a line break: the detector says so exactly when one does."""
    rng = np.random.default_rng(seed)
    buf = io.StringIO(newline="")
    writer = csv.writer(buf, quoting=csv.QUOTE_ALL)
    for kind in kinds:
        cells = [f"{v:.3f}" for v in rng.normal(size=3)]
        if kind == 2:
            cells[int(rng.integers(3))] += "\n1"
        writer.writerow(cells if kind else [f'a""b{c}' for c in cells])
    assert csvfile.quoted_newline(buf.getvalue().encode()) == (2 in kinds)


@pytest.mark.parametrize("index", ["range", "filtered", "named"])
def test_pandas_parquet_reads_back_without_its_index(tmp_path, index):
    """As the CSV index column above is not data, neither is the index ``DataFrame.to_parquet`` stores as a column
    (any index but a plain range): the instances read back as ``pandas.read_parquet`` gives the values."""
    data = instances()
    df = frame(data)
    if index == "filtered":
        df = df.sample(frac=1.0, random_state=0).sort_index().iloc[2:]  # an Index, not a range: __index_level_0__
        data = data[2:]
    elif index == "named":
        df = df.set_axis(pd.Index(np.arange(len(df)) * 10, name="sample"))
    df.columns = [str(c) for c in df.columns]
    buf = io.BytesIO()
    df.to_parquet(buf)
    manifest, got = convert(tmp_path, "frame.parquet", buf.getvalue())
    assert manifest.count == len(data)
    np.testing.assert_array_equal(got, data)


@settings(max_examples=60, deadline=None)
@given(meta=st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                         lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                     max_size=4), max_leaves=12)
       | st.fixed_dictionaries({"index_columns": st.lists(st.sampled_from(["0", "1", "__index_level_0__"])
                                                          | st.integers() | st.none(), max_size=3)})
       | st.binary(max_size=16))
def test_any_pandas_metadata_reads_the_data_or_refuses_it_in_one_line(tmp_path_factory, meta):
    """A hostile writer's ``pandas`` metadata (any JSON, or bytes that are none) never crashes the reader: columns it
    names as an index are left out as pandas leaves them, anything else is no index, and what is left is read or
    refused with its reason."""
    data = instances(8)
    table = pa.Table.from_pandas(frame(data).rename(columns=str), preserve_index=False)
    raw = meta if isinstance(meta, bytes) else json.dumps(meta).encode()
    buf = io.BytesIO()
    pq.write_table(table.replace_schema_metadata({b"pandas": raw}), buf)
    named = meta.get("index_columns") if isinstance(meta, dict) else None
    dropped = {c for c in named if isinstance(c, str)} & set(table.column_names) if isinstance(named, list) else set()
    try:
        _, got = convert(tmp_path_factory.mktemp("m"), "frame.parquet", buf.getvalue())
    except BadInput as err:
        assert dropped and err.reason == "wrong_column_count" and "\n" not in str(err)
    else:
        assert not dropped
        np.testing.assert_array_equal(got, data)
