"""CSV in byte ranges: line ends, headers, BOM, index columns and quoting give what the in-process converter
gives, whatever the task count and wherever a range boundary falls; ``landfall convert --tasks`` as processes."""

from __future__ import annotations

import csv
import io

import numpy as np
import pandas as pd
import pytest

from landfall.arrival import ranged
from landfall.arrival.config import ConverterConfig
from landfall.arrival.ranges import after_newline, split
from landfall.cli import main
from landfall.core.contracts.messages import Manifest
from landfall.core.errors import BadInput
from landfall.core.services.storage import Storage
from tests.landfall.arrival.ranged_helpers import assert_same, committed, in_process, run_all

T, F = 2, 3
CFG = ConverterConfig.load({}, timesteps=T, features=F, shard_target_bytes=2_000, chunk_instances=16)


def rows(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, T * F)).astype("<f4").astype(float)


def write_csv(path, flat: np.ndarray, *, header: bool = True, crlf: bool = False, final_newline: bool = True,
              quoting: int = csv.QUOTE_MINIMAL) -> bytes:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\r\n" if crlf else "\n", quoting=quoting)
    if header:
        writer.writerow([f"v{i}" for i in range(flat.shape[1])])
    writer.writerows(flat.tolist())
    data = buf.getvalue().encode()
    if not final_newline:
        data = data.rstrip(b"\r\n")
    path.write_bytes(data)
    return data


def check_counts(tmp_path, src, counts=(1, 2, 3, 7)) -> None:
    storage = Storage()
    ref = in_process(storage, CFG, str(src), str(tmp_path / "ref"))
    for count in counts:
        results = run_all(storage, CFG, str(src), str(tmp_path / f"n{count}"), count)
        assert_same(storage, committed(results), ref)


def test_crlf_header_and_no_final_newline(tmp_path):
    src = tmp_path / "x.csv"
    data = write_csv(src, rows(300), crlf=True, final_newline=False)
    assert data.count(b"\r\n") == 300 and not data.endswith(b"\n")
    check_counts(tmp_path, src)
    manifest = Manifest.from_json((tmp_path / "n7" / "manifest.json").read_text())
    assert manifest.csv["header"] == "present" and manifest.csv["dialect"]["lineterminator"] == "\r\n"


def test_more_tasks_than_lines_and_a_single_line(tmp_path):
    """Tasks whose nominal ranges hold no line start convert nothing; the file is still converted whole."""
    two = tmp_path / "two.csv"
    write_csv(two, rows(2, seed=6), header=False)
    check_counts(tmp_path / "two", two, (3, 7))
    one = tmp_path / "one.csv"
    write_csv(one, rows(1, seed=6), header=False, final_newline=False)
    check_counts(tmp_path / "one", one, (2, 7))


def padded_until_boundary(path, flat: np.ndarray, count: int, task: int, on_newline: bool) -> bytes:
    """Writes the CSV, lengthening the last value (trailing zeros) until the nominal start of ``task``
    falls exactly on a ``\\n`` (``on_newline``) or just after one (the first byte of a line)."""
    for pad in range(400):
        last = flat[-1].tolist()
        body = write_csv(path, flat, crlf=False).rstrip(b"\n")
        cells = body.rsplit(b"\n", 1)[1].split(b",")
        cells[-1] = f"{last[-1]!r}".encode() + (b"0" * pad if b"." in cells[-1] else b"")
        data = body.rsplit(b"\n", 1)[0] + b"\n" + b",".join(cells) + b"\n"
        at = split(len(data), task, count)[0]
        if (data[at] == ord("\n")) if on_newline else (data[at - 1] == ord("\n")):
            path.write_bytes(data)
            return data
    raise AssertionError("no padding puts the boundary there")


@pytest.mark.parametrize("on_newline", [True, False], ids=["on-newline", "line-starts-at-boundary"])
def test_a_range_boundary_exactly_on_a_line_end(tmp_path, on_newline):
    src = tmp_path / "x.csv"
    padded_until_boundary(src, rows(200, seed=1), count=3, task=1, on_newline=on_newline)
    storage = Storage()
    ref = in_process(storage, CFG, str(src), str(tmp_path / "ref"))
    results = run_all(storage, CFG, str(src), str(tmp_path / "out"), 3)
    assert_same(storage, committed(results), ref)
    assert all(r.instances > 0 for r in results)


def test_bom_headerless_index_column_and_quoting(tmp_path):
    flat = rows(250, seed=2)
    src = tmp_path / "x.csv"
    pd.DataFrame(flat).to_csv(src, index=True, header=False, encoding="utf-8-sig")
    assert src.read_bytes().startswith(b"\xef\xbb\xbf0,")
    check_counts(tmp_path / "indexed", src, (1, 3, 7))
    quoted = tmp_path / "q.csv"
    write_csv(quoted, flat, quoting=csv.QUOTE_ALL)
    check_counts(tmp_path / "quoted", quoted, (1, 4))


@pytest.mark.parametrize("where", ["inside-a-range", "at-a-range-start"])
def test_an_index_that_stops_counting_in_a_later_range_is_refused(tmp_path, where):
    """Inside a range the task sees the jump; at a range's start only the committer can (the ranges' first
    indexes must join up)."""
    src = tmp_path / "x.csv"
    frame = pd.DataFrame(rows(250, seed=3))
    frame.to_csv(src, index=True, header=False)
    data = src.read_bytes()
    start = after_newline(io.BytesIO(data), split(len(data), 2, 3)[0], len(data))  # task 2 of 3 starts here
    jump = data[:start].count(b"\n") + (0 if where == "at-a-range-start" else 5)
    frame.index = [*range(jump), *range(jump + 1, 251)]  # same digits: the same bytes up to the jump
    frame.to_csv(src, index=True, header=False)
    assert len(src.read_bytes()) == len(data)
    with pytest.raises(BadInput) as in_process_error:
        in_process(Storage(), CFG, str(src), str(tmp_path / "ref"))
    results = run_all(Storage(), CFG, str(src), str(tmp_path / "out"), 3)
    rejected = [r for r in results if r.outcome == "rejected"]
    assert [r.index for r in rejected] == [2]  # the last task: it finds the jump, or commits and finds it
    assert rejected[0].rejection.reason == in_process_error.value.reason == "wrong_column_count"
    found_by = "committer" if "but row" in rejected[0].rejection.detail else "task"
    assert found_by == ("committer" if where == "at-a-range-start" else "task"), rejected[0].rejection.detail
    assert not any(r.committed for r in results) and not (tmp_path / "out" / "manifest.json").exists()


@pytest.mark.parametrize("count", [1, 2, 3])
def test_a_quoted_line_break_is_refused_whatever_the_split(tmp_path, count):
    """As in-process: values are numbers, so a quoted line break means the file is not what it seems."""
    flat = rows(120, seed=4)
    text = write_csv(tmp_path / "plain.csv", flat).decode().splitlines(keepends=True)
    text[60] = '"1.5\n2",' + text[60].split(",", 1)[1]  # a quoted field holding a line break, mid-file
    src = tmp_path / "x.csv"
    src.write_text("".join(text))
    with pytest.raises(BadInput, match="quoted_newline"):
        in_process(Storage(), CFG, str(src), str(tmp_path / "ref"))
    results = run_all(Storage(), CFG, str(src), str(tmp_path / "out"), count)
    reasons = {r.rejection.reason for r in results if r.outcome == "rejected"}
    assert reasons == {"quoted_newline"} and not any(r.committed for r in results)


def test_convert_with_tasks_runs_processes(tmp_path, capsys):
    flat = rows(400, seed=5)
    src = tmp_path / "x.csv"
    write_csv(src, flat, crlf=True)
    args = ["--shape", f"{T},{F}", "--shard-target-bytes", "2000"]
    assert main(["convert", str(src), "--out", str(tmp_path / "one"), *args]) == 0
    one = capsys.readouterr().out
    assert main(["convert", str(src), "--out", str(tmp_path / "three"), "--tasks", "3", *args]) == 0
    three = capsys.readouterr().out
    got = Manifest.from_json((tmp_path / "three" / "manifest.json").read_text())
    # The same summary as in-process: the count line, one line per shard, the manifest.
    assert three.splitlines()[0] == f"400 instances of shape [2, 3] in {len(got.shards)} shards"
    assert one.splitlines()[0].startswith("400 instances of shape [2, 3] in ")
    assert len(three.splitlines()) == len(got.shards) + 2 and three.splitlines()[-1].endswith("manifest.json")
    storage = Storage()
    assert_same(storage, got, Manifest.from_json((tmp_path / "one" / "manifest.json").read_text()))
    assert sorted(p.name for p in (tmp_path / "three").iterdir()) == sorted(
        ["manifest.json", "profile.json", *(s.uri.rsplit("/", 1)[-1] for s in got.shards)])
    lines = src.read_bytes().split(b"\r\n")
    lines[300] += b",1.0"  # one value too many, in task 1's range
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"\r\n".join(lines))
    assert main(["convert", str(bad), "--out", str(tmp_path / "bad"), "--tasks", "2", *args]) == 2
    assert "bad.csv: ragged_rows" in capsys.readouterr().err


def test_task_indexes_out_of_range_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"not in 0\.\.1"):
        ranged.run_task(Storage(), CFG, bucket="", name="x.csv", generation=1, index=2, count=2, out=str(tmp_path))
