"""Windows cut from stored series (``landfall.core.rules.series_windows``) in the tf.data pipeline.

A series arrival's shard holds rows (records of up to ``BLOCK_ROWS`` rows each) and its records, for the plan, are
the windows that start in it. ``trainer.training.pipeline.read_instances`` hands a series plan here; everything else
(the plan, balanced to within one window per worker, the hold-out, the batches, the verdict) is what instances get.

Per worker: for every planned slice (windows ``[start, stop)`` of a shard) the windows of the split are chosen in numpy,
with ``landfall.core.rules.holdout`` on their index in the arrival (the ``segment`` mode, or the older ``blocks``, with
a gap
of ``length`` windows beside the hold-out, so no training window shares a row with a held-out one), and turned into the
row each starts at in its file. TensorFlow then reads a file once (its records joined and decoded into a ``[rows,
channels]`` tensor, normalised once per row) and gathers windows ``rows[start : start + length]`` in blocks of
``GATHER`` windows: vectorised, so a window costs one gather, not a per-record ``map``."""

from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from landfall.core.contracts.records import FEATURE_KEY
from landfall.core.errors import Invalid
from trainer.training.inputs import Plan, arrival_key, excluded_mask

TRAIN, VALIDATION, ALL = "train", "validation", "all"
GATHER = 1024  # windows gathered at once


def window_starts(plan: Plan, split: str) -> list[tuple[int, np.ndarray]]:
    """This worker's windows of ``split``: ``(shard index, the row each starts at in that shard's file)`` per
    planned slice, in plan order (a compacted file holds several arrivals' rows: ``ShardRef.start`` is where this
    piece's begin)."""
    chosen = plan.train_slices if split == TRAIN else plan.val_slices
    out = []
    for s in chosen:
        shard = plan.shards[s.shard]
        layout = shard.series
        if layout is None:
            raise Invalid(f"shard {shard.uri} holds instances, not a series: a job reads one kind")
        index = shard.arrival_start + np.arange(s.start, s.stop, dtype=np.int64)
        train, held = plan.split.sides(arrival_key(shard), index, plan.total_of(s.shard))
        chosen = train if split == TRAIN else held
        gone = excluded_mask(plan.excluded, shard, index)  # training.exclude_flagged
        index = index[chosen if gone is None else chosen & ~gone]
        first_row = int(layout.starts([shard.arrival_start])[0])  # the piece's first row
        out.append((s.shard, layout.starts(index) - first_row + shard.start))  # start: where the piece is in its file
    return out


def read_windows(plan: Plan, paths: Sequence[str], shape: tuple[int, int], split: str, *, mean=None, std=None,
                 deterministic: bool = False, shuffle_files: int | None = None) -> tf.data.Dataset:
    """Blocks of windows, float32 ``[n, length, channels]`` (normalised with ``mean``/``std``), of ``split`` for this
    worker: exactly ``plan.train_counts[w]`` (or ``val_counts[w]``); ``ALL`` is training then validation."""
    if split == ALL:
        return read_windows(plan, paths, shape, TRAIN, mean=mean, std=std, deterministic=deterministic,
                            shuffle_files=shuffle_files).concatenate(
            read_windows(plan, paths, shape, VALIDATION, mean=mean, std=std, deterministic=deterministic,
                         shuffle_files=shuffle_files))
    length, channels = int(shape[0]), int(shape[1])
    local = dict(zip(plan.mine, (str(p) for p in paths), strict=True))
    pieces: list[tuple[str, np.ndarray]] = []
    for i, starts in window_starts(plan, split):
        if not len(starts):
            continue
        if pieces and pieces[-1][0] == local[i]:  # a compacted file's arrivals one after another: read it once
            pieces[-1] = (local[i], np.concatenate([pieces[-1][1], starts]))
        else:
            pieces.append((local[i], starts))
    ends = np.cumsum([len(p[1]) for p in pieces], dtype=np.int64)
    los = ends - [len(p[1]) for p in pieces]
    n = len(pieces)
    all_starts = tf.constant(np.concatenate([p[1] for p in pieces]) if n else np.zeros(0, np.int64), tf.int64)
    files = tf.data.Dataset.from_tensor_slices((
        tf.constant([p[0] for p in pieces], tf.string, shape=[n]),
        tf.constant(los.tolist(), tf.int64, shape=[n]), tf.constant(ends.tolist(), tf.int64, shape=[n])))
    if shuffle_files is not None and n > 1:
        files = files.shuffle(n, seed=shuffle_files, reshuffle_each_iteration=True)
    spec = {FEATURE_KEY: tf.io.FixedLenFeature([], tf.string)}
    offset = tf.constant(mean if mean is not None else [0.0] * channels, tf.float32)
    scale = tf.constant([1.0 / s for s in std] if std is not None else [1.0] * channels, tf.float32)
    steps = tf.range(length, dtype=tf.int64)

    def one_file(path: tf.Tensor, lo: tf.Tensor, hi: tf.Tensor) -> tf.data.Dataset:
        serialized = tf.data.TFRecordDataset(path).batch(1 << 30).get_single_element()
        raw = tf.strings.reduce_join(tf.io.parse_example(serialized, spec)[FEATURE_KEY])
        rows = (tf.reshape(tf.io.decode_raw(raw, tf.float32, little_endian=True), [-1, channels]) - offset) * scale

        def gather(a: tf.Tensor) -> tf.Tensor:
            starts = all_starts[a:tf.minimum(a + GATHER, hi)]
            return tf.gather(rows, starts[:, None] + steps[None, :])

        return tf.data.Dataset.range(lo, hi, GATHER).map(gather)

    return files.interleave(one_file, cycle_length=max(1, min(n, 4)), num_parallel_calls=tf.data.AUTOTUNE,
                            deterministic=deterministic)
