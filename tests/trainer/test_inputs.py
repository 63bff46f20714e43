"""Manifests, the per-worker plan and the tf.data pipeline, against the storage emulator.

The cross-stage test uses the real converter: the trainer must read back exactly what it wrote.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from landfall.arrival.config import ConverterConfig
from landfall.arrival.converter import convert
from landfall.core.errors import Invalid, NotFound
from landfall.core.services.storage import Storage
from tests.trainer.helpers import SHAPE, make_array, write_dataset
from trainer.training.cluster import Cluster
from trainer.training.inputs import load_manifests, plan_inputs, stage

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")


def _row_bytes(x: np.ndarray) -> list[bytes]:
    flat = np.ascontiguousarray(x, dtype="<f4").reshape(len(x), -1)
    return sorted(row.tobytes() for row in flat)


def _read(plan, paths, split: str) -> np.ndarray:
    from trainer.training import pipeline

    parts = [b.numpy() for b in pipeline.read_instances(plan, [str(p) for p in paths], SHAPE, split)]
    return np.concatenate(parts) if parts else np.zeros((0, *SHAPE), np.float32)


def test_the_trainer_reads_exactly_what_the_converter_wrote(emulator_stack, bucket, tmp_path):
    storage: Storage = emulator_stack.storage
    array = make_array(3001, seed=7)
    array[5, 3, 2] = np.float32(-0.0)  # bit patterns survive, not just values
    array[6, 0, 0] = np.float32(1e-45)  # a subnormal
    source = tmp_path / "arrival.npy"
    np.save(source, array)
    cfg = ConverterConfig.load({}, shard_target_bytes=1_000_000)
    prefix = f"gs://{bucket}/tfrecords/demo/arrival-1/"
    manifest = convert(str(source), prefix, "demo", cfg, storage)
    assert len(manifest.shards) >= 3

    inputs = load_manifests(storage, [f"gs://{bucket}/tfrecords/demo"], SHAPE)  # a dataset prefix
    assert inputs.count == 3001
    plan = plan_inputs(inputs, 1, 0, batch_size=64, validation_fraction=0.0, seed=1)
    paths = stage(storage, plan, tmp_path / "stage")
    back = _read(plan, paths, "all")
    assert back.shape == array.shape
    assert _row_bytes(back) == _row_bytes(array)  # bit-identical, same count

    # The training split with a hold-out, as two workers see it, still covers every instance once.
    seen = []
    for worker in range(2):
        plan = plan_inputs(inputs, 2, worker, batch_size=64, validation_fraction=0.2, seed=1)
        paths = stage(storage, plan, tmp_path / f"stage-{worker}")
        train, val = _read(plan, paths, "train"), _read(plan, paths, "validation")
        assert (len(train), len(val)) == (plan.train_counts[worker], plan.val_counts[worker])
        seen += [train, val]
    assert _row_bytes(np.concatenate(seen)) == _row_bytes(array)


@pytest.mark.parametrize(("shards", "workers"), [(4, 2), (1, 2), (2, 3)])
def test_plan_partitions_the_data_over_workers_and_splits(tmp_path, shards, workers):
    storage = Storage()
    array = make_array(1000, seed=shards)
    uri = write_dataset(storage, str(tmp_path / "data"), array, shards=shards)
    inputs = load_manifests(storage, [uri], SHAPE)
    plans = [plan_inputs(inputs, workers, w, batch_size=32, validation_fraction=0.25, seed=3)
             for w in range(workers)]
    assert len({p.steps_per_epoch for p in plans}) == 1  # every worker runs the same steps
    assert max(plans[0].train_counts) - min(plans[0].train_counts) <= 1  # balanced to one record
    assert max(plans[0].val_counts) - min(plans[0].val_counts) <= 1
    assert plans[0].steps_per_epoch == min(plans[0].train_counts) // 32
    assert sum(plans[0].train_counts) + sum(plans[0].val_counts) == 1000
    assert 0.15 < sum(plans[0].val_counts) / 1000 < 0.35
    seen = []
    for plan in plans:
        paths = stage(storage, plan, tmp_path / f"stage-{plan.worker_index}")
        train, val = _read(plan, paths, "train"), _read(plan, paths, "validation")
        assert len(train) == plan.train_counts[plan.worker_index]
        assert len(val) == plan.val_counts[plan.worker_index]
        seen += [train, val]
    assert _row_bytes(np.concatenate(seen)) == _row_bytes(array)
    # Deterministic: the same seed gives the same hold-out.
    again = plan_inputs(inputs, workers, 0, batch_size=32, validation_fraction=0.25, seed=3)
    assert again.val_counts == plans[0].val_counts


def test_uneven_arrivals_read_exactly_the_planned_records(tmp_path):
    """Arrivals of 1,500 (three shards) and 40 instances on three workers: record ranges cross shard
    boundaries, and each worker's pipeline yields exactly its planned share, an epoch one pass of it."""
    from trainer.training import pipeline

    storage = Storage()
    big, small = make_array(1500, seed=21), make_array(40, seed=22)
    uris = [write_dataset(storage, str(tmp_path / "big"), big, shards=3, arrival_id="a1"),
            write_dataset(storage, str(tmp_path / "small"), small, shards=1, arrival_id="a2")]
    inputs = load_manifests(storage, uris, SHAPE)
    batch, workers = 32, 3
    plans = [plan_inputs(inputs, workers, w, batch_size=batch, validation_fraction=0.2, seed=4)
             for w in range(workers)]
    assert max(plans[0].train_counts) - min(plans[0].train_counts) <= 1
    assert any(s.start > 0 for p in plans for s in p.train_slices)  # a range starts inside a shard
    seen = []
    for plan in plans:
        paths = [str(p) for p in stage(storage, plan, tmp_path / f"stage-{plan.worker_index}")]
        train, val = _read(plan, paths, "train"), _read(plan, paths, "validation")
        assert (len(train), len(val)) == (plan.train_counts[plan.worker_index], plan.val_counts[plan.worker_index])
        seen += [train, val]
        # Each epoch of the training dataset is one pass: distinct instances, this worker's training ones.
        ds = pipeline.train_dataset(plan, paths, SHAPE, batch_size=batch, shuffle_buffer=64, seed=1)
        steps = plan.steps_per_epoch
        batches = [x.numpy() for x, _ in ds.take(2 * steps)]
        for epoch in (np.concatenate(batches[:steps]), np.concatenate(batches[steps:])):
            rows = _row_bytes(epoch)
            assert len(rows) == steps * batch
            assert len(set(rows)) == len(rows) and set(rows) <= set(_row_bytes(train))
    assert _row_bytes(np.concatenate(seen)) == _row_bytes(np.concatenate([big, small]))
    examples = plans[0].steps_per_epoch * batch * workers
    assert examples > sum(plans[0].train_counts) - batch * workers


@pytest.mark.parametrize("limit", [50, None])
def test_many_small_arrivals_are_read_as_joined_streams_with_the_same_records(tmp_path, limit):
    """Before compaction, consecutive small whole files are read as one stream (``pipeline.joined_slices``): each
    worker's training and validation records are exactly those it reads file by file, and the pipeline has a
    few streams, not one per file. ``limit`` 50 cuts streams between files and leaves ranges that start or end
    inside a file (two workers) at the edges of a stream."""
    from trainer.training import pipeline

    storage = Storage()
    rng = np.random.default_rng(5)
    sizes = [int(n) for n in rng.integers(1, 40, size=60)]
    uris = [write_dataset(storage, str(tmp_path / f"a{k}"), make_array(n, seed=100 + k), shards=1 + (k % 7 == 0),
                          arrival_id=f"a{k}") for k, n in enumerate(sizes)]
    inputs = load_manifests(storage, uris, SHAPE)
    assert all(s.whole for s in inputs.shards)
    for worker in range(2):
        plan = plan_inputs(inputs, 2, worker, batch_size=8, validation_fraction=0.25, seed=9)
        paths = [str(p) for p in stage(storage, plan, tmp_path / f"stage-{worker}")]
        files = {str(p): plan.shards[i].count for i, p in zip(plan.mine, paths, strict=True)}
        for split in (pipeline.TRAIN, pipeline.VALIDATION):
            slices = pipeline.file_slices(plan, paths, split)
            joined = pipeline.joined_slices(slices, files, **({"limit": limit} if limit else {}))
            records = sum(hi - lo for _, lo, hi, _ in slices)
            assert sum(hi - lo for _, lo, hi, _ in joined) == records
            assert len(joined) <= (2 * records // limit + 2 if limit else 2) < len(slices)  # files < limit
            assert any(len(j[0]) > 1 for j in joined)

            one_by_one, streams = (
                np.concatenate([b.numpy() for b in pipeline.read_blocks(
                    pieces, plan.threshold, split, deterministic=True).map(pipeline.parser(SHAPE))])
                for pieces in (slices, joined))
            expected = plan.train_counts[worker] if split == pipeline.TRAIN else plan.val_counts[worker]
            assert len(streams) == len(one_by_one) == expected
            assert _row_bytes(streams) == _row_bytes(one_by_one)
    # A file that holds other records too (a compacted one) is never joined: it has no entry in ``sizes``.
    assert pipeline.joined_slices([("a", 0, 5, [(0, 1)]), ("b", 0, 5, [(0, 2)])], {"b": 5}) == [
        (("a",), 0, 5, [(0, 1)]), (("b",), 0, 5, [(0, 2)])]


def test_training_batches_are_parsed_whole_and_normalised(tmp_path):
    from trainer.training import pipeline

    storage = Storage()
    array = make_array(600, seed=11)
    uri = write_dataset(storage, str(tmp_path / "data"), array, shards=2)
    inputs = load_manifests(storage, [uri], SHAPE)
    plan = plan_inputs(inputs, 1, 0, batch_size=50, validation_fraction=0.1, seed=0)
    paths = [str(p) for p in stage(storage, plan, tmp_path / "stage")]
    mean, std = inputs.feature_stats()
    ds = pipeline.train_dataset(plan, paths, SHAPE, batch_size=50, shuffle_buffer=256, seed=0, mean=mean, std=std)
    x, y = next(iter(ds))
    assert x.shape == (50, *SHAPE) and x.dtype.name == "float32"
    np.testing.assert_array_equal(x.numpy(), y.numpy())
    flat = np.concatenate([b[0].numpy() for b in ds.take(10)]).reshape(-1, SHAPE[1])
    assert np.all(np.abs(flat.mean(0)) < 0.2) and np.all(np.abs(flat.std(0) - 1) < 0.2)
    val = pipeline.validation_dataset(plan, paths, SHAPE, batch_size=plan.val_batch_size,
                                  num_batches=plan.val_steps, mean=mean, std=std)
    first = np.concatenate([b[0].numpy() for b in val])
    assert len(first) == plan.val_steps * plan.val_batch_size
    np.testing.assert_array_equal(first, np.concatenate([b[0].numpy() for b in val]))  # same every epoch


def test_manifest_checks(tmp_path):
    storage = Storage()
    array = make_array(100)
    good = write_dataset(storage, str(tmp_path / "good"), array)
    with pytest.raises(Invalid, match=r"instance shape is \[36, 10\], the model expects \[36, 12\]"):
        load_manifests(storage, [good], (36, 12))
    bad_dtype = write_dataset(storage, str(tmp_path / "f64"), array, dtype="float64")
    with pytest.raises(Invalid, match="dtype is 'float64'"):
        load_manifests(storage, [bad_dtype], SHAPE)
    with pytest.raises(NotFound, match=r"no manifest\.json under"):
        load_manifests(storage, [str(tmp_path / "nothing")], SHAPE)
    with pytest.raises(NotFound, match="does not exist"):
        load_manifests(storage, [str(tmp_path / "missing" / "manifest.json")], SHAPE)
    inputs = load_manifests(storage, [good], SHAPE)
    small = plan_inputs(inputs, 1, 0, batch_size=1024, validation_fraction=0.1, seed=0)  # less than one batch
    assert small.batch_size == small.train_counts[0] < 1024 and small.steps_per_epoch == 1
    with pytest.raises(Invalid, match="every worker needs one"):
        plan_inputs(inputs, 200, 0, batch_size=8, validation_fraction=0.1, seed=0)  # 90 training records, 200 workers
    Path(inputs.shards[0].uri).unlink()
    plan = plan_inputs(inputs, 1, 0, batch_size=8, validation_fraction=0.1, seed=0)
    with pytest.raises(NotFound, match=r"shard .*part-00000-of-00002.tfrecord listed in manifest .* does not exist"):
        stage(storage, plan, tmp_path / "stage")


def test_tf_config_as_the_kubeflow_operator_sets_it():
    spec = '{"cluster": {"worker": ["a:2222", "b:2222", "c:2222"]}, "task": {"type": "worker", "index": 2}}'
    cluster = Cluster.from_env({"TF_CONFIG": spec})
    assert (cluster.num_workers, cluster.worker_index, cluster.is_chief) == (3, 2, False)
    assert Cluster.from_env({}) == Cluster()
    with_chief = '{"cluster": {"chief": ["a:1"], "worker": ["b:1"]}, "task": {"type": "worker", "index": 0}}'
    assert Cluster.from_env({"TF_CONFIG": with_chief}).worker_index == 1
    with pytest.raises(Invalid):
        Cluster.from_env({"TF_CONFIG": '{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}'})
