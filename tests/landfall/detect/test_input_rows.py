"""A score for every row the user sent (issue #55, part 7): ``landfall.detect.score.score_series`` writes one row per
data row of the file, in the file's order, whatever the file repeats, drops or leaves unsorted.

The scorer reconstructs every window as zeros (a window's error is the mean of its squared values; no TensorFlow), so
a spike makes the windows over it anomalous. Every expected score comes from scoring the series as it is once its
rows are merged, sorted or dropped by pandas (``groupby(t).mean()``, ``drop_duplicates``, ``sort_values``,
``dropna``): a file with every time once, in order, whose scores are its rows' (the code path before issue #55),
mapped back to the user's rows with a pandas left join on the time."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from landfall.core.artifacts import specs
from landfall.core.services.storage import Storage
from landfall.detect.located import Locator
from landfall.detect.score import SeriesOptions, score_series

THRESHOLD = 0.4


def _spec(duplicate_times: str = "mean", max_gap: float | None = 5) -> specs.DatasetSpec:
    series = {"time_column": "t", "drop_columns": ["label"], "duplicate_times": duplicate_times}
    if max_gap is not None:
        series["max_gap"] = max_gap
    doc = {"apiVersion": "landfall.dataset/v1", "name": "pump",
           "shape": {"window": {"length": 4, "stride": 1}, "features": 1}, "arrival": {"series": series}}
    return specs.DatasetSpec.from_document(specs.validate(doc, "test"), None)


@dataclasses.dataclass
class Zero:
    """Reconstructs every window as zeros."""

    shape: tuple[int, int] = (4, 1)

    def errors(self, windows: np.ndarray) -> np.ndarray:
        return (np.asarray(windows, np.float64) ** 2).mean(axis=(1, 2))


def _score(src, spec, out) -> tuple[dict, pd.DataFrame]:
    doc = score_series(Storage(), str(src), spec, "zero", Zero(), THRESHOLD, out, SeriesOptions())
    return doc, pq.read_table(out).to_pandas()


def _series(rows: int = 30, spikes: tuple[int, ...] = (10,)) -> pd.DataFrame:
    """Numeric times one apart, small values, a spike of 2.0 (labelled) at each of ``spikes``."""
    rng = np.random.default_rng(0)
    v = rng.normal(0, 0.05, rows)
    label = np.zeros(rows, np.int64)
    for at in spikes:
        v[at], label[at] = 2.0, 1
    return pd.DataFrame({"t": np.arange(rows, dtype=float), "v": v, "label": label})


def _expected(tmp_path, user: pd.DataFrame, series: pd.DataFrame, spec) -> pd.DataFrame:
    """The user's rows with the scores of ``series`` (every time once, in order) joined on their time."""
    src = tmp_path / "reference.csv"
    series.to_csv(src, index=False)
    doc, by_time = _score(src, spec, tmp_path / "reference.scores.parquet")
    assert doc["rows"] == len(series) and doc["merged_rows"] == 0 and doc["sorted"]  # every time once, in order
    joined = user[["t", "label"]].merge(by_time[["time", "score"]], left_on="t", right_on="time", how="left")
    assert len(joined) == len(user)  # a left join on unique times keeps the user's rows and their order
    return joined


def _check(doc: dict, got: pd.DataFrame, user: pd.DataFrame, expected: pd.DataFrame) -> None:
    """One row per user row, in their order; each with its time's score; the labels the user's; the ranges and
    counts in the user's rows."""
    assert doc["rows"] == len(got) == len(user)
    assert got["row"].tolist() == list(range(len(user)))
    np.testing.assert_array_equal(got["time"].to_numpy(), user["t"].to_numpy(np.float64))
    # NaN where NaN; a mean of float32 readings may differ from pandas' float64 one in its last bit
    np.testing.assert_allclose(got["score"].to_numpy(), expected["score"].to_numpy(), rtol=1e-5, equal_nan=True)
    flags = got["score"].to_numpy() > THRESHOLD
    np.testing.assert_array_equal(got["anomaly"].to_numpy(), flags)
    assert got["label"].tolist() == user["label"].tolist()  # the user's labels, row for row
    assert doc["anomalies"] == int(flags.sum()) == sum(r["rows"] for r in doc["ranges"])
    for r in doc["ranges"]:
        inside = (got["time"] >= r["start"]) & (got["time"] <= r["end"]) & got["anomaly"]
        rows = got.loc[inside, "row"]
        assert (r["first_row"], r["last_row"], r["rows"]) == (rows.min(), rows.max(), len(rows))
        assert r["peak_row"] == got.loc[got["time"] == r["peak"], "row"].min()
        if doc["sorted"]:  # a sorted file's range is its rows first_row..last_row (those dropped left out)
            assert got["time"][r["first_row"]] == r["start"] and got["time"][r["last_row"]] == r["end"]
            assert set(rows) == set(range(r["first_row"], r["last_row"] + 1)) - set(np.flatnonzero(
                got["score"].isna()))


@pytest.mark.parametrize("policy", ["mean", "first"])
def test_repeated_times_give_every_row_its_times_score(tmp_path, policy):
    """An export that repeats timestamps (a re-sent row, a doubled hour): each of the user's rows comes back, in
    order, carrying its time's score; before, the scores had one row per distinct time."""
    base = _series(30, spikes=(10,))
    # Time 5 three times (a re-sent row), time 10 twice (the repeat 4.0: mean 3.0, first 2.0) with the repeat
    # labelled normal, time 20 twice: 34 rows, 30 distinct times.
    user = pd.concat([base, base.iloc[[5, 5, 10, 20]]]).sort_values("t", kind="stable").reset_index(drop=True)
    second_10 = user.index[user["t"] == 10][1]
    user.loc[second_10, ["v", "label"]] = [4.0, 0]
    src = tmp_path / "user.csv"
    user.to_csv(src, index=False)
    spec = _spec(policy)
    doc, got = _score(src, spec, tmp_path / "user.scores.parquet")

    if policy == "mean":
        merged = user.groupby("t", as_index=False).agg({"v": "mean", "label": "max"})
    else:
        merged = user.drop_duplicates("t", keep="first")
    expected = _expected(tmp_path, user, merged, spec)
    _check(doc, got, user, expected)
    assert (doc["merged_rows"], doc["series_rows"], doc["dropped_nonfinite"]) == (4, 30, 0)
    assert doc["sorted"] and doc["duplicate_times"] == policy
    # Both rows of time 10 carry its score, each its own label; the range holds both.
    tens = got[got["time"] == 10]
    assert len(tens) == 2 and tens["score"].nunique() == 1 and tens["label"].tolist() == [1, 0]
    [r] = doc["ranges"]
    assert r["first_row"] <= tens["row"].min() and r["last_row"] >= tens["row"].max()
    assert r["peak_row"] == tens["row"].min()


def test_an_unsorted_file_keeps_its_rows_where_they_were(tmp_path):
    base = _series(40, spikes=(12, 30))
    user = pd.concat([base, base.iloc[[12, 3]]]).sample(frac=1.0, random_state=7).reset_index(drop=True)
    src = tmp_path / "shuffled.csv"
    user.to_csv(src, index=False)
    spec = _spec()
    doc, got = _score(src, spec, tmp_path / "shuffled.scores.parquet")
    expected = _expected(tmp_path, user, user.groupby("t", as_index=False).agg({"v": "mean", "label": "max"}), spec)
    _check(doc, got, user, expected)
    assert not doc["sorted"] and doc["merged_rows"] == 2 and len(doc["ranges"]) == 2
    # Read in time order, the rows' scores are the series'; in file order they are where the user put them.
    assert got["row"].tolist() == list(range(len(user))) and not got["time"].is_monotonic_increasing


def test_rows_dropped_as_non_finite_come_back_without_a_score(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDFALL_DROP_NONFINITE", "true")
    user = _series(30, spikes=(10,))
    user.loc[[4, 17], "v"] = np.nan  # empty cells in the CSV
    user.loc[22, "v"] = np.inf
    src = tmp_path / "holes.csv"
    user.to_csv(src, index=False)
    spec = _spec()
    doc, got = _score(src, spec, tmp_path / "holes.scores.parquet")
    expected = _expected(tmp_path, user, user[np.isfinite(user["v"])], spec)
    _check(doc, got, user, expected)
    assert (doc["rows"], doc["series_rows"], doc["dropped_nonfinite"], doc["merged_rows"]) == (30, 27, 3, 0)
    assert got.loc[[4, 17, 22], "score"].isna().all() and not got.loc[[4, 17, 22], "anomaly"].any()
    assert got.loc[[4, 17, 22], "time"].tolist() == [4.0, 17.0, 22.0]


def test_a_parquet_export_whose_repeats_cross_its_chunks(tmp_path, monkeypatch):
    """A Parquet export with ISO timestamps whose logger wrote every reading of one hour twice after a reconnect
    (and one reading three times), read 16 rows at a time so the repeats cross chunks; the labels line up."""
    monkeypatch.setenv("LANDFALL_CHUNK_INSTANCES", "16")
    times = pd.date_range("2014-03-09 00:00", periods=60, freq="5min").astype(str)
    repeats = np.ones(60, np.int64)
    repeats[24:36] = 2
    repeats[[5, 7, 11]] = 3
    repeats[20] = 2
    t = np.repeat(np.asarray(times), repeats)
    starts = np.r_[0, np.cumsum(repeats)[:-1]]
    crossing = [i for i, (a, n) in enumerate(zip(starts, repeats, strict=True)) if a // 16 != (a + n - 1) // 16]
    assert crossing == [11, 24, 32]  # time 11's rows 15-17, time 24's 31-32 and 32's 47-48 straddle two chunks
    rng = np.random.default_rng(1)
    user = pd.DataFrame({"t": t, "v": rng.normal(0, 0.05, len(t)), "label": np.zeros(len(t), np.int64)})
    first_230 = int(np.flatnonzero(t == "2014-03-09 02:30:00")[0])
    user.loc[first_230, ["v", "label"]] = [5.0, 1]  # a spike in the first of a time's two readings
    src = tmp_path / "ec2.parquet"
    pq.write_table(pa.Table.from_pandas(user, preserve_index=False), src, row_group_size=10)
    spec = _spec(max_gap=None)
    doc, got = _score(src, spec, tmp_path / "ec2.scores.parquet")
    by_seconds = user.assign(t=(pd.to_datetime(user["t"], utc=True) - pd.Timestamp(0, tz="UTC")).dt.total_seconds())
    expected = _expected(tmp_path, by_seconds,
                         by_seconds.groupby("t", as_index=False).agg({"v": "mean", "label": "max"}), spec)
    _check(doc, got, by_seconds, expected)
    assert (doc["rows"], doc["series_rows"], doc["merged_rows"]) == (len(t), 60, len(t) - 60)
    assert doc["time"] == "timestamp" and doc["sorted"] and doc["max_gap"] == pytest.approx(900.0)  # 3 x 5 min
    [r] = doc["ranges"]
    assert r["peak_at"] == "2014-03-09T02:30:00.000Z" and r["peak_row"] == first_230
    assert got["label"][first_230] == 1 and got["label"][first_230 + 1] == 0  # the second reading's own label


def test_max_gap_comes_from_the_first_rows_with_a_step():
    """A first chunk of one row has no step: max_gap is taken with the next chunk (the converter's rule since
    #54), not left at infinity, which never cut a gap."""
    t = np.r_[0.0, np.arange(1.0, 10.0), np.arange(50.0, 60.0)]  # a gap of 41 after nine steps of 1
    v = np.zeros((len(t), 1), np.float32)

    def errors(w: np.ndarray) -> np.ndarray:
        return np.zeros(len(w))

    for split in (1, 5, len(t)):
        loc = Locator(4, 1, THRESHOLD, errors)
        blocks = [*loc.feed(t[:split], v[:split]), *loc.feed(t[split:], v[split:]), *loc.finish()]
        assert loc.max_gap == 3.0, split
        assert loc.windows == (10 - 3) + (10 - 3)  # two segments of 10 rows, no window across the gap
        assert sum(len(b.times) for b in blocks) == len(t)
    loc = Locator(4, 1, THRESHOLD, errors)
    list(loc.feed(t[:1], v[:1]))
    assert loc.max_gap is None
    list(loc.finish())
    assert loc.max_gap == float("inf")  # one row, never a step: nothing was cut


def test_a_one_row_first_chunk_cuts_its_gaps_through_score_series(tmp_path, monkeypatch):
    """Read two rows at a time, a file whose second time repeats: the merger's first chunk is one row. The gap
    after row 12 is cut (no window spans it), as the converter cuts it."""
    monkeypatch.setenv("LANDFALL_CHUNK_INSTANCES", "2")
    t = np.r_[0.0, 1.0, 1.0, np.arange(2.0, 12.0), np.arange(60.0, 70.0)]
    user = pd.DataFrame({"t": t, "v": np.zeros(len(t)), "label": np.zeros(len(t), np.int64)})
    pq.write_table(pa.Table.from_pandas(user, preserve_index=False), tmp_path / "gap.parquet")
    doc, got = _score(tmp_path / "gap.parquet", _spec(max_gap=None), tmp_path / "gap.scores.parquet")
    assert doc["max_gap"] == 3.0 and doc["windows"] == (12 - 3) + (10 - 3)
    assert doc["rows"] == len(got) == 23 and doc["merged_rows"] == 1
