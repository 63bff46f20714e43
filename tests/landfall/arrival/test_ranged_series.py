"""Ranged conversion of a series (landfall.arrival.ranged with landfall.arrival.series.convert_share): ``N`` tasks
each window their share of a CSV or Parquet file from its first row and look ``length - 1`` rows past its end, and
the committer numbers their segments one after another. At stride 1 the windows are exactly the in-process
conversion's; at another stride every window is rows of the series, none spans a gap, and each task boundary costs
at most one window. Time out of order across shares is refused."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from landfall.arrival import converter, ranges, route
from landfall.arrival.config import ConverterConfig
from landfall.core.services.storage import Storage
from tests.landfall.arrival.ranged_helpers import committed, run_all, series_windows
from trainer.training import inputs, windows

LENGTH = 6
CFG = ConverterConfig(timesteps=LENGTH, features=2, series_time_column="t", shard_target_bytes=4 * 2 * 150)


def series_frame(rows: int, gaps: tuple[int, ...] = ()) -> pd.DataFrame:
    t = np.arange(rows, dtype=np.int64) * 10
    for g in gaps:
        t[g:] += 1000  # a step of 1,010 > max_gap (3 x the median step, 30)
    return pd.DataFrame({"t": t, "row": np.arange(rows, dtype=float),
                         "v": np.random.default_rng(rows).normal(size=rows)})


def windows_of(storage: Storage, manifest_uri: str) -> dict[int, np.ndarray]:
    """Every window of the arrival, by the row (of the file) it starts at, as the trainer cuts them."""
    loaded = inputs.load_manifests(storage, [manifest_uri], (LENGTH, 2))
    plan = inputs.plan_inputs(loaded, 1, 0, 1, 0.0, 0)
    paths = inputs.stage(storage, plan, __import__("pathlib").Path(manifest_uri).parent / "stage")
    out: dict[int, np.ndarray] = {}
    for block in windows.read_windows(plan, paths, (LENGTH, 2), windows.ALL, deterministic=True).as_numpy_iterator():
        for w in block:
            assert int(w[0, 0]) not in out, "a window read twice"
            out[int(w[0, 0])] = w
    return out


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_ranged_series_has_the_in_process_windows(tmp_path, fmt):
    storage = Storage("t")
    frame = series_frame(2000, gaps=(700, 1337))
    src = tmp_path / f"s.{fmt}"
    if fmt == "csv":
        frame.to_csv(src, index=False)
    else:  # 8 row groups of 250 rows: tasks take whole groups
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), src, row_group_size=250)
    for stride in (1, 4):
        cfg = dataclasses.replace(CFG, window_stride=stride)
        ref = converter.convert(str(src), str(tmp_path / f"in-{stride}"), "d", cfg, storage)
        got = committed(run_all(storage, cfg, str(src), str(tmp_path / f"ranged-{stride}"), 3))
        assert got.series["tasks"] == 3 and got.series["rows"] == 2000 and got.series["max_gap"] == 30
        a = windows_of(storage, str(tmp_path / f"in-{stride}" / "manifest.json"))
        b = windows_of(storage, str(tmp_path / f"ranged-{stride}" / "manifest.json"))
        assert len(b) == got.count
        for start, w in b.items():  # rows of the series, in order, never across a gap
            np.testing.assert_array_equal(w[:, 0], start + np.arange(LENGTH))
            np.testing.assert_array_equal(w[:, 1], frame["v"].to_numpy(np.float32)[start:start + LENGTH])
            assert not any(start < g <= start + LENGTH - 1 for g in (700, 1337))
        if stride == 1:  # every window that fits: exactly the in-process conversion's
            assert a.keys() == b.keys() and got.count == ref.count
        else:  # the stride restarts at each of the 2 task boundaries: at most a window each
            assert abs(got.count - ref.count) <= 2
        # Stored: the rows once, plus at most length - 1 rows looked past each boundary.
        assert ref.series["stored_rows"] <= got.series["stored_rows"] <= ref.series["stored_rows"] + 2 * (LENGTH - 1)


def test_a_series_out_of_order_is_refused_within_a_share_or_across_shares(tmp_path):
    storage = Storage("t")
    frame = series_frame(900)
    frame.loc[450:, "t"] -= 7000  # half way: inside the middle task's bytes
    frame.to_csv(tmp_path / "s.csv", index=False)
    results = run_all(storage, CFG, str(tmp_path / "s.csv"), str(tmp_path / "out"), 3)
    [rejected] = [r for r in results if r.outcome == "rejected"]
    assert rejected.rejection.reason == "unsorted_too_large" and "must be sorted" in rejected.rejection.detail
    assert not (tmp_path / "out" / "manifest.json").exists()
    # Each share sorted, but the third (a row group of its own) starts before the second ends: the commit refuses it;
    # starting at the second's last time exactly is a duplicate timestamp.
    # Under the default policy (mean) a time repeated where two shares meet splits the series there, as a gap does.
    for shift, reason, policy in ((-5000, "unsorted_too_large", "mean"), (-10, "duplicate_timestamps", "reject"),
                                  (-10, None, "mean")):
        frame = series_frame(900)
        frame.loc[600:, "t"] += shift
        src = tmp_path / f"g{-shift}{policy}.parquet"
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), src, row_group_size=300)
        cfg = dataclasses.replace(CFG, series_duplicate_times=policy)
        results = run_all(storage, cfg, str(src), str(tmp_path / f"out{-shift}{policy}"), 3)
        if reason is None:
            assert not [r for r in results if r.outcome == "rejected"]
            manifest = committed(results)
            rows = [(s[0], s[1]) for s in manifest.series["segments"]]
            assert manifest.series["rows"] == 900 and sum(n for _, n in rows) >= 900 and len(rows) >= 2  # none lost
            continue
        [rejected] = [r for r in results if r.outcome == "rejected"]
        assert rejected.rejection.reason == reason and "task 2's share" in rejected.rejection.detail


def test_a_series_over_the_inline_limit_goes_to_ranged_tasks():
    cfg = dataclasses.replace(CFG, inline_max_bytes=1000)
    assert route.converts_inline("csv", 1000, cfg) and not route.converts_inline("csv", 1001, cfg)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_rows_dropped_or_merged_where_shares_meet_cost_no_window(tmp_path, fmt):
    """Issue #54's class on the Cloud Run path, with ``drop_nonfinite`` and ``max_gap`` derived: the file's first
    chunk drops to nothing (``max_gap`` is then taken from the next, in-process and in every task alike), the first
    rows of the second share are non-finite or repeat a time (the task before looks past its end at the rows as their
    share stores them: dropped, merged), and the third share drops to nothing. At stride 1 the 3 tasks store the
    in-process conversion's windows exactly."""
    storage = Storage("t")
    rows = 900
    t = np.arange(rows, dtype=np.int64) * 10
    t[450:] += 1000  # a gap, cut only when max_gap is derived from finite rows (30)
    values = np.random.default_rng(54).integers(1, 10, size=rows) / 4.0
    bad = np.zeros(rows, bool)
    bad[:50] = True  # the first chunk (chunk_instances=50) drops to nothing
    if fmt == "csv":  # fixed-width lines, so the non-finite cells (written -inf) move no share's first row
        body = lambda: "t,row,v\n" + "".join(  # noqa: E731
            f"{t[i]:06d},{i:04d},{'-inf' if bad[i] else f'{values[i]:.2f}'}\n" for i in range(rows))
        size = len(body())
        with open(tmp_path / "probe.csv", "w") as fh:
            fh.write(body())
        with open(tmp_path / "probe.csv", "rb") as fh:
            first = [(ranges.after_newline(fh, size * k // 3, size) - len("t,row,v\n")) // len("000000,0000,0.00\n")
                     for k in (1, 2)]
    else:  # three row groups of 300: one share each
        first = [300, 600]
    bad[first[0]:first[0] + 2] = True  # the second share's first rows: dropped, a step of 30 (<= max_gap) over them
    t[first[0] + 4] = t[first[0] + 3]  # and a repeated time among the rows the first task looks past its end at
    t[first[0] + 5:450] -= 10
    bad[first[1]:] = True  # the third share: nothing stored
    src = tmp_path / f"s.{fmt}"
    if fmt == "csv":
        src.write_text(body())
    else:
        frame = pd.DataFrame({"t": t, "row": np.arange(rows, dtype=float), "v": np.where(bad, np.nan, values)})
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), src, row_group_size=300)
    cfg = dataclasses.replace(CFG, drop_nonfinite=True, chunk_instances=50)
    ref = converter.convert(str(src), str(tmp_path / "in"), "d", cfg, storage)
    got = committed(run_all(storage, cfg, str(src), str(tmp_path / "ranged"), 3))
    assert ref.series["max_gap"] == got.series["max_gap"] == 30
    assert [s[1] for s in ref.series["segments"]] == [450 - 50 - 2 - 1, first[1] - 450]
    assert (got.count, got.dropped_nonfinite, got.series["merged_rows"]) == (
        ref.count, ref.dropped_nonfinite, ref.series["merged_rows"]) == (ref.count, 50 + 2 + rows - first[1], 1)
    np.testing.assert_array_equal(series_windows(storage, got), series_windows(storage, ref))
