"""The tf.data input pipeline over staged TFRecord shards (``landfall.records`` format).

Per worker: the shard files of its plan, read in parallel (``interleave``), the deterministic
hold-out applied per record by index (same integer hash as ``trainer.inputs``), shuffled as raw
serialized records, batched first, then parsed and ``decode_raw``-ed one whole batch at a time,
optionally normalised per feature, and prefetched with AUTOTUNE.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from collections.abc import Sequence

import tensorflow as tf
from landfall.records import FEATURE_KEY

from trainer.inputs import HASH_MODULUS, HASH_MULTIPLIER, Plan

TRAIN, VALIDATION, ALL = "train", "validation", "all"
READ_BUFFER = 4 * 1024 * 1024


def read_records(paths: Sequence[str], salts: Sequence[int], threshold: int, split: str, *,
                 num_workers: int = 1, worker_index: int = 0, by_file: bool = True,
                 deterministic: bool = False) -> tf.data.Dataset:
    """Serialized records of ``split`` from ``paths`` (this worker's files, ``salts`` aligned)."""
    if split not in (TRAIN, VALIDATION, ALL):
        raise ValueError(f"split must be {TRAIN}, {VALIDATION} or {ALL}, got {split!r}")
    files = tf.data.Dataset.from_tensor_slices(
        (tf.constant([str(p) for p in paths], tf.string), tf.constant(list(salts), tf.int64))
    )

    def keep(index: tf.Tensor, salt: tf.Tensor) -> tf.Tensor:
        ok = tf.constant(True)
        if split != ALL:
            hashed = tf.math.floormod(index * HASH_MULTIPLIER + salt, HASH_MODULUS)
            held_out = hashed < threshold
            ok = held_out if split == VALIDATION else tf.logical_not(held_out)
        if not by_file and num_workers > 1:
            ok = tf.logical_and(ok, tf.equal(tf.math.floormod(index, num_workers), worker_index))
        return ok

    def one_file(path: tf.Tensor, salt: tf.Tensor) -> tf.data.Dataset:
        ds = tf.data.TFRecordDataset(path, buffer_size=READ_BUFFER).enumerate()
        if split == ALL and (by_file or num_workers == 1):
            return ds.map(lambda i, rec: rec)
        return ds.filter(lambda i, rec: keep(i, salt)).map(lambda i, rec: rec)

    return files.interleave(
        one_file,
        cycle_length=max(1, min(len(paths), 8)),
        block_length=16,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=deterministic,
    )


def parser(shape: tuple[int, int], mean: Sequence[float] | None = None, std: Sequence[float] | None = None,
           targets: bool = True):
    """A function from a batch of serialized Examples to ``(x, x)`` (or ``x``), float32 [B, T, F]."""
    spec = {FEATURE_KEY: tf.io.FixedLenFeature([], tf.string)}
    t, f = shape
    offset = tf.constant(mean, tf.float32) if mean is not None else None
    scale = tf.constant([1.0 / s for s in std], tf.float32) if std is not None else None

    def parse(batch: tf.Tensor):
        raw = tf.io.parse_example(batch, spec)[FEATURE_KEY]
        x = tf.reshape(tf.io.decode_raw(raw, tf.float32, little_endian=True), [-1, t, f])
        if offset is not None:
            x = (x - offset) * scale
        return (x, x) if targets else x

    return parse


def _options() -> tf.data.Options:
    options = tf.data.Options()
    # Sharding is ours (by file or by record index); tf.distribute must not shard again.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    options.deterministic = False
    return options


def train_dataset(plan: Plan, paths: Sequence[str], shape: tuple[int, int], *, batch_size: int,
                  shuffle_buffer: int, seed: int, mean=None, std=None) -> tf.data.Dataset:
    """Endless shuffled batches of ``batch_size``; an epoch is ``plan.steps_per_epoch`` of them."""
    ds = read_records(paths, [plan.salts[i] for i in plan.mine], plan.threshold, TRAIN,
                      num_workers=plan.num_workers, worker_index=plan.worker_index, by_file=plan.by_file)
    if shuffle_buffer > 1:
        ds = ds.shuffle(shuffle_buffer, seed=seed + plan.worker_index, reshuffle_each_iteration=True)
    ds = ds.repeat().batch(batch_size, drop_remainder=True)
    ds = ds.map(parser(shape, mean, std), num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE).with_options(_options())


def validation_dataset(plan: Plan, paths: Sequence[str], shape: tuple[int, int], *, batch_size: int,
                       num_batches: int, mean=None, std=None) -> tf.data.Dataset:
    """Exactly ``num_batches`` batches of ``batch_size``, the same records every epoch."""
    ds = read_records(paths, [plan.salts[i] for i in plan.mine], plan.threshold, VALIDATION,
                      num_workers=plan.num_workers, worker_index=plan.worker_index, by_file=plan.by_file,
                      deterministic=True)
    ds = ds.take(num_batches * batch_size).batch(batch_size, drop_remainder=True)
    ds = ds.map(parser(shape, mean, std), num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE).with_options(_options())
