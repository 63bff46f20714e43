"""Series arrivals (landfall.arrival.series): a timestamped multichannel export stored once as its rows, its
windows counted in the manifest, gaps splitting it, and every bad series refused with its reason."""

from __future__ import annotations

import csv
import dataclasses
import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from landfall.arrival import converter
from landfall.arrival.config import ConverterConfig
from landfall.core.contracts import records
from landfall.core.contracts.messages import Manifest
from landfall.core.errors import BadInput
from landfall.core.rules import series_windows as windows
from landfall.core.services.storage import Storage

CFG = ConverterConfig(timesteps=8, features=3, window_stride=2, series_time_column="time",
                      series_drop_columns=("label",), chunk_instances=64)


def _frame(n: int = 300, start: str = "2024-01-01", step: str = "1s") -> pd.DataFrame:
    rng = np.random.default_rng(0)
    times = pd.date_range(start, periods=n, freq=step)
    df = pd.DataFrame(rng.normal(size=(n, 3)).astype(np.float32), columns=["a", "b", "c"])
    df.insert(0, "time", times)
    df["label"] = 0
    return df


def _convert(path: Path, tmp_path: Path, cfg: ConverterConfig = CFG) -> Manifest:
    return converter.convert(str(path), str(tmp_path / "out"), "d", cfg, Storage("landfall-test"))


def _stored_rows(manifest: Manifest, shard: int) -> np.ndarray:
    with open(manifest.shards[shard].uri, "rb") as fh:
        raw = b"".join(records.decode_example(r, (-1,)).tobytes() for r in records.iter_records(fh))
    return np.frombuffer(raw, dtype=np.float32).reshape(-1, manifest.shape[1])


def _windows(manifest: Manifest) -> np.ndarray:
    """Every window of the arrival, cut from its shards as the trainer does."""
    layout = windows.Layout.of(manifest.series, manifest.shape[0])
    out, first = [], 0
    for i, shard in enumerate(manifest.shards):
        rows = _stored_rows(manifest, i)
        starts = layout.starts(np.arange(first, first + shard.count))
        starts -= starts[0]
        out.append(np.stack([rows[s:s + layout.length] for s in starts]))
        first += shard.count
    return np.concatenate(out)


def _expected(values: np.ndarray, length: int, stride: int) -> np.ndarray:
    return np.stack([values[s:s + length] for s in range(0, len(values) - length + 1, stride)])


@pytest.mark.parametrize("writer", ["pandas_csv", "csv_module_gz", "parquet"])
def test_a_series_converts_into_its_windows(tmp_path, writer):
    df = _frame()
    if writer == "pandas_csv":
        path = tmp_path / "s.csv"
        df.to_csv(path, index=False)
    elif writer == "csv_module_gz":
        path = tmp_path / "s.csv.gz"
        with gzip.open(path, "wt", newline="") as fh:
            w = csv.writer(fh, quoting=csv.QUOTE_NONNUMERIC)
            w.writerow(df.columns)
            for row in df.itertuples(index=False):
                w.writerow([row.time.isoformat() + "Z", *map(float, row[1:4]), row.label])
    else:
        path = tmp_path / "s.parquet"
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), path, row_group_size=50)
    cfg = dataclasses.replace(CFG, shard_target_bytes=1)  # shards of the minimum, 16 windows' rows
    manifest = _convert(path, tmp_path, cfg)
    values = df[["a", "b", "c"]].to_numpy(np.float32)
    assert manifest.count == (300 - 8) // 2 + 1 and manifest.shape == [8, 3]
    assert len(manifest.shards) > 1 and manifest.series["segments"] == [[0, 300, manifest.count,
                                                                        1704067200.0, 1704067499.0]]
    np.testing.assert_array_equal(_windows(manifest), _expected(values, 8, 2))
    np.testing.assert_allclose(manifest.stats.mean, values.mean(axis=0), rtol=1e-5, atol=1e-6)
    # Stored once: the shards hold the series' rows and at most length - 1 of them again per shard boundary.
    stored = sum(len(_stored_rows(manifest, i)) for i in range(len(manifest.shards)))
    assert 300 - 8 < stored <= 300 + 7 * (len(manifest.shards) - 1)
    assert Manifest.from_json(manifest.to_json()).series == json.loads(manifest.to_json())["series"]


def test_gaps_split_the_series_and_an_unsorted_arrival_is_sorted(tmp_path):
    df = pd.concat([_frame(40), _frame(5, start="2024-01-02"), _frame(30, start="2024-01-03")])
    df.sample(frac=1.0, random_state=1).to_csv(tmp_path / "s.csv", index=False)  # shuffled rows
    manifest = _convert(tmp_path / "s.csv", tmp_path)
    segs = manifest.series["segments"]
    assert [s[:3] for s in segs] == [[0, 40, 17], [40, 30, 12]]  # the 5-row run is shorter than a window
    assert manifest.series["dropped_rows"] == 5 and manifest.series["sorted"] is False
    assert manifest.series["max_gap"] == 3.0  # 3 x the median step
    values = pd.concat([_frame(40), _frame(30, start="2024-01-03")])[["a", "b", "c"]].to_numpy(np.float32)
    np.testing.assert_array_equal(_windows(manifest), np.concatenate(
        [_expected(values[:40], 8, 2), _expected(values[40:], 8, 2)]))


def test_epoch_numbers_and_integer_counters_are_times(tmp_path):
    for i, times in enumerate([np.arange(100) * 0.5 + 1.7e9, np.arange(100, dtype=np.int64)]):
        df = _frame(100)
        df["time"] = times
        df.to_csv(tmp_path / f"s{i}.csv", index=False)
        manifest = _convert(tmp_path / f"s{i}.csv", tmp_path / str(i))
        assert manifest.count == (100 - 8) // 2 + 1 and manifest.series["segments"][0][3] == float(times[0])


def _rejected(path: Path, tmp_path: Path, cfg: ConverterConfig = CFG) -> BadInput:
    with pytest.raises(BadInput) as info:
        _convert(path, tmp_path, cfg)
    assert not (tmp_path / "out" / "manifest.json").exists()
    assert not list((tmp_path / "out").glob("**/*.tfrecord")) if (tmp_path / "out").exists() else True
    return info.value


def test_bad_series_are_refused_with_their_reason(tmp_path):
    df = _frame(50)
    cases = {
        "missing_time_column": df.rename(columns={"time": "when"}),
        "unparseable_time": df.assign(time=["2024-01-01"] * 20 + ["yesterday"] + ["2024-01-02"] * 29),
        "duplicate_timestamps": df.assign(time=list(df.time[:25]) * 2),
        "wrong_channel_count": df.assign(d=1.0),
        "non_numeric": df.assign(b=["x"] * 50),
        "too_short": df.head(5),
        "all_gaps": df.assign(time=np.arange(50) ** 2),  # every step longer than the last: 3 x median < the rest
        "non_finite": df.assign(a=[np.nan] + [1.0] * 49),
    }
    for reason, frame in cases.items():
        path = tmp_path / f"{reason}.csv"
        frame.to_csv(path, index=False)
        cfg = dataclasses.replace(CFG, series_max_gap=1.5) if reason == "all_gaps" else CFG
        if reason == "duplicate_timestamps":
            cfg = dataclasses.replace(CFG, series_duplicate_times="reject")
        err = _rejected(path, tmp_path / reason, cfg)
        assert err.reason == reason, (reason, err)
        assert str(err) and "\n" not in str(err)


def test_a_refused_repeated_time_is_named_as_the_file_wrote_it(tmp_path):
    """A CloudWatch export written in local time repeats 03:00 at a daylight-saving change (NAB's
    ec2_cpu_utilization files); under ``reject`` the message names it as the file does, not as a NumPy repr."""
    df = _frame(60, start="2014-03-09 02:00:00", step="5min")
    df.loc[13:, "time"] = df.time[13:] - pd.Timedelta("5min")  # row 13 repeats row 12's time
    df["time"] = df.time.dt.strftime("%Y-%m-%d %H:%M:%S")
    df.to_csv(tmp_path / "s.csv", index=False)
    err = _rejected(tmp_path / "s.csv", tmp_path / "r", dataclasses.replace(CFG, series_duplicate_times="reject"))
    assert err.detail == ("time 2014-03-09 03:00:00 appears twice (row 14 of the sorted series); set the spec's "
                        "arrival.series.duplicate_times to mean, first or last to merge such rows"), str(err)
    numbers = _frame(40).assign(time=[1394334000 + 300 * min(i, 38) for i in range(40)])
    numbers.to_csv(tmp_path / "n.csv", index=False)
    err = _rejected(tmp_path / "n.csv", tmp_path / "n", dataclasses.replace(CFG, series_duplicate_times="reject"))
    assert err.detail.startswith(f"time {1394334000 + 300 * 38} appears twice (row 40 ")


@pytest.mark.parametrize("policy", ["mean", "first", "last"])
def test_repeated_times_are_merged_by_the_spec_policy_and_counted(tmp_path, policy):
    """The default (mean) and the other policies give what pandas gives for the same rows, whatever the chunking
    (a run of one time across the reader's chunks of 64 rows), and the manifest counts the merged rows."""
    df = _frame(300)
    df["time"] = df.time.where(~df.index.isin(range(60, 70)), df.time[60])  # 10 rows of one time, over a chunk edge
    df.loc[200, "time"] = df.time[199]
    df.to_csv(tmp_path / "s.csv", index=False)
    cfg = dataclasses.replace(CFG, series_duplicate_times=policy, window_stride=1, series_max_gap=1e9)
    manifest = _convert(tmp_path / "s.csv", tmp_path / policy, cfg)
    expected = getattr(df.groupby("time", sort=True)[["a", "b", "c"]], policy)().to_numpy(np.float32)
    assert manifest.series["merged_rows"] == 300 - len(expected) == 10
    assert manifest.series["duplicate_times"] == policy and manifest.series["rows"] == 300
    np.testing.assert_allclose(_windows(manifest), _expected(expected, 8, 1), rtol=1e-6)


def test_the_instance_converter_is_unchanged_for_instance_datasets(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((4, 36, 10), np.float32))
    manifest = converter.convert(str(tmp_path / "x.npy"), str(tmp_path / "o"), "d", ConverterConfig(),
                                 Storage("landfall-test"))
    assert manifest.series is None and manifest.count == 4


@pytest.mark.parametrize("length, stride", [(8, 1), (8, 8), (5, 11)])
def test_any_stride_reads_back_its_windows_and_stays_near_the_series_size(tmp_path, length, stride):
    df = _frame(2000)
    df.to_csv(tmp_path / "s.csv", index=False)
    cfg = dataclasses.replace(CFG, timesteps=length, window_stride=stride, shard_target_bytes=4 * 3 * 500)
    manifest = _convert(tmp_path / "s.csv", tmp_path, cfg)
    values = df[["a", "b", "c"]].to_numpy(np.float32)
    np.testing.assert_array_equal(_windows(manifest), _expected(values, length, stride))
    assert len(manifest.shards) >= 3
    stored = sum(len(_stored_rows(manifest, i)) for i in range(len(manifest.shards)))
    assert stored <= 2000 * 1.1


@pytest.mark.parametrize("index", ["filtered", "time"])
def test_pandas_parquet_with_its_index_reads_as_pandas_reads_it_back(tmp_path, index):
    """``DataFrame.to_parquet`` stores any index but a plain range as a column (``__index_level_0__`` when unnamed):
    pandas reads it back as the index, so it is no channel; a time index is the time column."""
    df = _frame()
    # Shuffled and sorted back, a frame's row labels are an index pandas stores; or the time is the index.
    df = df.sample(frac=1.0, random_state=0).sort_index().iloc[3:] if index == "filtered" else df.set_index("time")
    path = tmp_path / "s.parquet"
    df.to_parquet(path)
    assert any(n not in ("time", "a", "b", "c", "label") for n in pq.read_schema(path).names) == (index == "filtered")
    manifest = _convert(path, tmp_path)
    values = df[["a", "b", "c"]].to_numpy(np.float32)
    np.testing.assert_array_equal(_windows(manifest), _expected(values, 8, 2))
    # The same rows written without any index convert to the same windows.
    plain = tmp_path / "plain.parquet"
    df.reset_index(drop=index == "filtered").to_parquet(plain, index=False)
    np.testing.assert_array_equal(_windows(_convert(plain, tmp_path / "p")), _windows(manifest))
