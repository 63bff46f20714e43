"""The tf.data input pipeline over staged TFRecord shards (``landfall.core.records`` format).

Per worker: the shard files of its plan, read in parallel (``interleave``) and batched first, in
blocks of ``BLOCK`` serialized records; the deterministic hold-out (same integer hash of the record
index as ``trainer.inputs``) is applied to a whole block with one mask, and the block is parsed with
one ``parse_example`` + ``decode_raw`` and normalised per feature. Shuffling is vectorised too: the
file order is reshuffled on every pass, and the instances are permuted within windows of
``shuffle_buffer`` instances (one gather per window) before they are cut into training batches with
``rebatch`` and prefetched with AUTOTUNE.
Every per-record step is a vectorised op on a block: per-record ``filter``/``map`` functions cost
tens of microseconds per instance in tf.data, more than reading and parsing together.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from collections.abc import Sequence

import tensorflow as tf

from landfall.core.records import FEATURE_KEY
from trainer.inputs import HASH_MODULUS, HASH_MULTIPLIER, Plan

TRAIN, VALIDATION, ALL = "train", "validation", "all"
READ_BUFFER = 4 * 1024 * 1024
BLOCK = 1024  # records read, filtered and parsed together


def read_blocks(paths: Sequence[str], salts: Sequence[int], threshold: int, split: str, *,
                num_workers: int = 1, worker_index: int = 0, by_file: bool = True,
                deterministic: bool = False, shuffle_files: int | None = None) -> tf.data.Dataset:
    """Vectors of serialized records of ``split`` from ``paths`` (this worker's files, ``salts`` aligned)."""
    if split not in (TRAIN, VALIDATION, ALL):
        raise ValueError(f"split must be {TRAIN}, {VALIDATION} or {ALL}, got {split!r}")
    files = tf.data.Dataset.from_tensor_slices(
        (tf.constant([str(p) for p in paths], tf.string), tf.constant(list(salts), tf.int64))
    )
    if shuffle_files is not None and len(paths) > 1:
        files = files.shuffle(len(paths), seed=shuffle_files, reshuffle_each_iteration=True)
    filtered = split != ALL or (not by_file and num_workers > 1)

    def keep(index: tf.Tensor, salt: tf.Tensor) -> tf.Tensor:
        ok = tf.ones_like(index, dtype=tf.bool)
        if split != ALL:
            hashed = tf.math.floormod(index * HASH_MULTIPLIER + salt, HASH_MODULUS)
            held_out = hashed < threshold
            ok = held_out if split == VALIDATION else tf.logical_not(held_out)
        if not by_file and num_workers > 1:
            ok = tf.logical_and(ok, tf.equal(tf.math.floormod(index, num_workers), worker_index))
        return ok

    def one_file(path: tf.Tensor, salt: tf.Tensor) -> tf.data.Dataset:
        blocks = tf.data.TFRecordDataset(path, buffer_size=READ_BUFFER).batch(BLOCK)
        if not filtered:
            return blocks

        def select(block: tf.Tensor, records: tf.Tensor) -> tf.Tensor:
            index = block * BLOCK + tf.range(tf.shape(records, out_type=tf.int64)[0], dtype=tf.int64)
            return tf.boolean_mask(records, keep(index, salt))

        return blocks.enumerate().map(select)

    return files.interleave(
        one_file,
        cycle_length=max(1, min(len(paths), 8)),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=deterministic,
    )


def parser(shape: tuple[int, int], mean: Sequence[float] | None = None, std: Sequence[float] | None = None,
           targets: bool = False):
    """A function from a batch of serialized Examples to float32 [B, T, F] (or ``(x, x)``)."""
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


def read_instances(plan: Plan, paths: Sequence[str], shape: tuple[int, int], split: str, *, mean=None, std=None,
                   deterministic: bool = False, shuffle_files: int | None = None) -> tf.data.Dataset:
    """Blocks of parsed (and normalised) instances, float32 [n, T, F], of ``split`` for this worker."""
    blocks = read_blocks(paths, [plan.salts[i] for i in plan.mine], plan.threshold, split,
                         num_workers=plan.num_workers, worker_index=plan.worker_index, by_file=plan.by_file,
                         deterministic=deterministic, shuffle_files=shuffle_files)
    return blocks.map(parser(shape, mean, std), num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)


def _pair(x: tf.Tensor):
    return x, x


def _options() -> tf.data.Options:
    options = tf.data.Options()
    # Sharding is ours (by file or by record index); tf.distribute must not shard again.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    options.deterministic = False
    return options


def train_dataset(plan: Plan, paths: Sequence[str], shape: tuple[int, int], *, batch_size: int,
                  shuffle_buffer: int, seed: int, mean=None, std=None) -> tf.data.Dataset:
    """Endless shuffled ``(x, x)`` batches of ``batch_size``; an epoch is ``plan.steps_per_epoch`` of them."""
    ds = read_instances(plan, paths, shape, TRAIN, mean=mean, std=std, shuffle_files=seed + plan.worker_index)
    if shuffle_buffer > 1:
        ds = ds.rebatch(shuffle_buffer).map(tf.random.shuffle, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.repeat().rebatch(batch_size, drop_remainder=True).map(_pair)
    return ds.prefetch(tf.data.AUTOTUNE).with_options(_options())


def validation_dataset(plan: Plan, paths: Sequence[str], shape: tuple[int, int], *, batch_size: int,
                       num_batches: int, mean=None, std=None) -> tf.data.Dataset:
    """Exactly ``num_batches`` ``(x, x)`` batches of ``batch_size``, the same instances every epoch."""
    ds = read_instances(plan, paths, shape, VALIDATION, mean=mean, std=std, deterministic=True)
    ds = ds.rebatch(batch_size, drop_remainder=True).take(num_batches).map(_pair)
    return ds.prefetch(tf.data.AUTOTUNE).with_options(_options())
