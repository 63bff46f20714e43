"""Ranged conversion (``landfall.arrival.ranged``): N tasks give what the in-process converter gives, a
retried task changes nothing, bad data in one task's range rejects the arrival once."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import logging
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from landfall.arrival import ranged
from landfall.arrival.config import ConverterConfig
from landfall.core.contracts import layout
from landfall.core.errors import TemporaryError
from landfall.core.services.storage import Storage
from landfall.local.synthetic import time_series
from tests.landfall.arrival.ranged_helpers import assert_same, committed, comparable, in_process, run_all

N = 500
CFG = ConverterConfig.load({}, shard_target_bytes=60_000, chunk_instances=40)  # ~41 instances a shard


@pytest.fixture(scope="module")
def data() -> np.ndarray:
    return time_series(N, seed=5)


@pytest.fixture(scope="module")
def files(tmp_path_factory, data) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("ranged-in")
    flat = data.reshape(N, -1)
    paths = {fmt: str(folder / f"x.{fmt}") for fmt in ("npy", "csv", "parquet", "npz", "csv.gz")}
    np.save(paths["npy"], data)
    pd.DataFrame(flat).to_csv(paths["csv"], index=False)
    table = pa.table({f"c{i}": flat[:, i] for i in range(flat.shape[1])})
    pq.write_table(table, paths["parquet"], row_group_size=70)  # 8 row groups, the last one short
    np.savez_compressed(paths["npz"], data)
    with gzip.open(paths["csv.gz"], "wb") as fh:
        pd.DataFrame(flat).to_csv(fh, index=False)
    return paths


@pytest.mark.parametrize("fmt", ["npy", "csv", "parquet"])
def test_any_task_count_gives_the_in_process_result(fmt, files, tmp_path):
    storage = Storage()
    ref = in_process(storage, CFG, files[fmt], str(tmp_path / "ref"))
    if fmt == "parquet":
        assert pq.ParquetFile(files[fmt]).metadata.num_row_groups == 8
    for count in (1, 2, 3, 7):
        out = str(tmp_path / f"n{count}")
        results = run_all(storage, CFG, files[fmt], out, count)
        assert [r.outcome for r in results] == ["part_written"] * (count - 1) + ["committed"]
        assert all(r.instances > 0 for r in results)  # every task had a share
        assert_same(storage, committed(results), ref)
        assert not (tmp_path / f"n{count}" / f"_tmp-ranged-{count}").exists()  # parts removed after the commit


@pytest.mark.parametrize("fmt", ["npz", "csv.gz"])
def test_unsplittable_formats_are_converted_by_task_zero(fmt, files, tmp_path):
    storage = Storage()
    ref = in_process(storage, CFG, files[fmt], str(tmp_path / "ref"))
    results = run_all(storage, CFG, files[fmt], str(tmp_path / "out"), 3, order=[1, 2, 0])
    assert [r.instances for r in results] == [0, 0, N]
    assert_same(storage, committed(results), ref)


class Failing(Storage):
    """Fails once, like a task killed there: after ``after`` shards of the tmp folder ``where`` were written,
    or when the manifest is written."""

    def __init__(self, where: str, after: int = 1):
        super().__init__()
        self.where, self.left = where, after
        self.armed = True

    @contextlib.contextmanager
    def open_write(self, uri: str):
        with super().open_write(uri) as writer:
            yield writer
        if self.armed and self.where in uri:
            self.left -= 1
            if self.left == 0:
                self.armed = False
                raise TemporaryError("injected: the task dies after writing a shard")

    def write_bytes(self, uri: str, data: bytes, **kw) -> None:
        if self.armed and self.where == "manifest" and uri.endswith("manifest.json"):
            self.armed = False
            raise TemporaryError("injected: the committer dies before the manifest")
        super().write_bytes(uri, data, **kw)


@pytest.mark.parametrize("where", ["/t00001/", "manifest"])
def test_a_task_that_dies_and_is_retried_gives_the_same_manifest(where, files, tmp_path):
    clean_out = str(tmp_path / "clean" / "o")  # the out folder's name is the arrival id
    clean = committed(run_all(Storage(), CFG, files["csv"], clean_out, 3))
    out = str(tmp_path / "retried" / "o")
    storage = Failing(where)
    gen = storage.stat(files["csv"]).generation
    task = dict(bucket="", name=files["csv"], generation=gen, count=3, out=out, dataset="d")
    ranged.run_task(storage, CFG, index=0, **task)
    dies = 1 if where != "manifest" else 2  # the committer is the last task
    if dies == 2:
        ranged.run_task(storage, CFG, index=1, **task)
    with pytest.raises(TemporaryError, match="injected"):
        ranged.run_task(storage, CFG, index=dies, **task)
    assert not (tmp_path / "retried" / "o" / "manifest.json").exists()
    if dies == 1:
        assert ranged.run_task(storage, CFG, index=2, **task).outcome == "part_written"  # task 1's part is missing
    result = ranged.run_task(storage, CFG, index=dies, **task)  # the platform's retry
    assert result.committed
    assert comparable(result.manifest, out) == comparable(clean, clean_out)
    for got, want in zip(result.manifest.shards, clean.shards, strict=True):
        assert Path(got.uri).read_bytes() == Path(want.uri).read_bytes()
    # A retry after the commit (the committer died before publishing) publishes again: idempotent downstream.
    seen = []
    again = ranged.run_task(storage, CFG, index=dies, on_committed=seen.append, **task)
    assert again.outcome == "duplicate" and not again.committed and seen == [again.manifest]


def npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def test_ranged_arrival_on_the_emulator_commits_once_and_publishes_once(emulator_stack, bucket, data):
    """Five tasks at once against fake-gcs-server: real create-only races between the committers."""
    storage = emulator_stack.storage
    name = "incoming/ds/big.npy"
    storage.write_bytes(f"gs://{bucket}/{name}", npy_bytes(data))
    gen = storage.stat(f"gs://{bucket}/{name}").generation
    published = []

    def task(i: int) -> ranged.TaskResult:
        return ranged.run_task(storage, CFG, bucket=bucket, name=name, generation=gen, index=i, count=5,
                               on_committed=published.append)

    with ThreadPoolExecutor(5) as pool:
        results = list(pool.map(task, range(5)))
    manifest = committed(results)
    assert published == [manifest]
    aid = layout.arrival_id(name, gen)
    uri = f"gs://{bucket}/tfrecords/ds/{aid}/manifest.json"
    assert manifest.count == N and manifest.arrival_id == aid and manifest.dataset == "ds"
    assert json.loads(storage.read_bytes(uri))["count"] == N
    assert manifest.shards[0].uri == f"gs://{bucket}/tfrecords/ds/{aid}/part-00000-of-{len(manifest.shards):05d}.tfrecord"
    assert storage.list(f"gs://{bucket}/tmp/") == []  # parts and shards moved or removed
    assert all(s.crc32c == storage.stat(s.uri).crc32c for s in manifest.shards)


def test_bad_row_in_task_3_rejects_the_arrival_once(emulator_stack, bucket, data, caplog):
    storage = emulator_stack.storage
    bad = data.copy()
    bad[260, 0, 0] = np.inf  # 6 tasks of 500 instances: task 3 has instances 250..332
    bad[350, 3, 2] = np.nan  # and task 4 (333..415) finds one too: both may record, one record is kept
    name = "incoming/ds/bad.npy"
    storage.write_bytes(f"gs://{bucket}/{name}", npy_bytes(bad))
    gen = storage.stat(f"gs://{bucket}/{name}").generation
    published = []

    def task(i: int) -> ranged.TaskResult:
        return ranged.run_task(storage, CFG, bucket=bucket, name=name, generation=gen, index=i, count=6,
                               on_committed=published.append)

    with caplog.at_level(logging.INFO, logger="landfall"), ThreadPoolExecutor(6) as pool:
        results = list(pool.map(task, range(6)))
    results += [task(3), task(0)]  # retried tasks afterwards: the same verdict, nothing more recorded
    outcomes = [r.outcome for r in results]
    assert "committed" not in outcomes and published == []
    assert outcomes[3] == "rejected" and results[3].rejection.reason == "non_finite"
    assert "instance 260" in results[3].rejection.detail and "task 3 of 6" in results[3].rejection.detail
    assert results[-2].outcome == "stopped" and results[-1].outcome == "stopped"
    records = storage.list(f"gs://{bucket}/rejected/")
    assert records == [f"gs://{bucket}/rejected/ds/{layout.arrival_id(name, gen)}.json"]
    assert json.loads(storage.read_bytes(records[0]))["reason"] == "non_finite"
    assert len([r for r in caplog.records if r.levelno == logging.ERROR and "rejected" in r.getMessage()]) == 1
    assert storage.list(f"gs://{bucket}/tfrecords/") == []


@pytest.fixture
def restored_logging():
    """``task.main`` routes the ``landfall`` logger to JSON lines; put it back for the other tests."""
    logger = logging.getLogger("landfall")
    saved = logger.handlers[:], logger.level, logger.propagate
    yield
    logger.handlers[:], logger.level, logger.propagate = saved


def test_the_task_entry_point_reads_cloud_run_variables(files, tmp_path, monkeypatch, restored_logging):
    from landfall.arrival import task

    env = {"CLOUD_RUN_TASK_COUNT": "2", "LANDFALL_SOURCE_BUCKET": "", "LANDFALL_SOURCE_NAME": files["npy"],
           "LANDFALL_SOURCE_GENERATION": str(Storage().stat(files["npy"]).generation),
           "LANDFALL_TASK_OUT": str(tmp_path / "o"), "LANDFALL_SHARD_TARGET_BYTES": "60000"}
    assert [task.main({**env, "CLOUD_RUN_TASK_INDEX": str(i)}) for i in (1, 0)] == [0, 0]
    manifest = (tmp_path / "o" / "manifest.json").read_text()
    assert json.loads(manifest)["count"] == N and len(json.loads(manifest)["shards"]) == 14
    bad = tmp_path / "bad.npy"
    bad.write_bytes(b"\x93NUMPY garbage")
    rejected = {**env, "LANDFALL_SOURCE_NAME": str(bad), "LANDFALL_SOURCE_GENERATION": str(Storage().stat(
        str(bad)).generation), "LANDFALL_TASK_OUT": str(tmp_path / "bad"), "CLOUD_RUN_TASK_INDEX": "0"}
    assert task.main(rejected) == 0  # recorded for good: a retry would not help
    marker = json.loads((tmp_path / "bad" / "_tmp-ranged-2" / "rejected.json").read_text())
    assert marker["rejection"]["reason"] == "corrupt_npy"
    # Under another configuration the verdict is not taken for granted: the task converts (and rejects) again.
    assert task.main({**rejected, "LANDFALL_SHARD_TARGET_BYTES": "70000"}) == 0
    marker = json.loads((tmp_path / "bad" / "_tmp-ranged-2" / "rejected.json").read_text())
    assert marker["config"]["shard_target_bytes"] == 70000

    def unavailable(*args, **kwargs):
        raise TemporaryError("storage is unavailable")

    monkeypatch.setattr(ranged, "run_task", unavailable)
    assert task.main({**env, "CLOUD_RUN_TASK_INDEX": "0"}) == task.EX_TEMPFAIL  # Cloud Run retries the task


KILLED_AFTER_ONE_SHARD = """
import contextlib, os, signal, sys
from landfall.core.services import storage

real = storage.Storage.open_write


@contextlib.contextmanager
def open_write(self, uri):
    with real(self, uri) as writer:
        yield writer
    if "/t00001/" in uri:  # its first shard is complete: the node goes away now, no cleanup, no exit code
        os.kill(os.getpid(), signal.SIGKILL)


storage.Storage.open_write = open_write
from landfall.arrival import task
sys.exit(task.main())
"""


def test_a_task_killed_by_sigkill_mid_way_and_rerun_gives_the_same_manifest(files, tmp_path):
    clean_out = str(tmp_path / "clean" / "o")
    clean = committed(run_all(Storage(), CFG, files["csv"], clean_out, 3))
    out = str(tmp_path / "killed" / "o")
    gen = Storage().stat(files["csv"]).generation
    env = {**os.environ, "CLOUD_RUN_TASK_INDEX": "1", "CLOUD_RUN_TASK_COUNT": "3", "LANDFALL_SOURCE_BUCKET": "",
           "LANDFALL_SOURCE_NAME": files["csv"], "LANDFALL_SOURCE_GENERATION": str(gen), "LANDFALL_TASK_OUT": out,
           "LANDFALL_TASK_DATASET": "d", "LANDFALL_SHARD_TARGET_BYTES": "60000", "LANDFALL_CHUNK_INSTANCES": "40"}
    killed = subprocess.run([sys.executable, "-c", KILLED_AFTER_ONE_SHARD], env=env, capture_output=True, text=True,
                            timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert list((tmp_path / "killed" / "o").rglob("*.tfrecord"))  # it got somewhere before it died
    task = dict(bucket="", name=files["csv"], generation=gen, count=3, out=out, dataset="d")
    for index in (0, 2):
        assert ranged.run_task(Storage(), CFG, index=index, **task).outcome == "part_written"  # 1 is missing
    retried = subprocess.run([sys.executable, "-m", "landfall.arrival.task"], env=env, capture_output=True,
                             text=True, timeout=120)  # Cloud Run's retry of task 1, the same variables
    assert retried.returncode == 0, retried.stderr[-2000:]
    manifest = json.loads((tmp_path / "killed" / "o" / "manifest.json").read_text())
    late = ranged.run_task(Storage(), CFG, index=1, **task)  # a late duplicate reads the committed manifest back
    assert late.outcome == "duplicate" and late.manifest is not None
    result = late.manifest
    assert comparable(result, out) == comparable(clean, clean_out)
    assert manifest["count"] == clean.count == N
    for got, want in zip(result.shards, clean.shards, strict=True):
        assert Path(got.uri).read_bytes() == Path(want.uri).read_bytes()
