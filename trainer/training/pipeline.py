"""The tf.data input pipeline over staged TFRecord shards (``landfall.core.contracts.records`` format).

Per worker: the record ranges of its plan (``Plan.train_slices``/``val_slices``: ``skip``/``take`` of a staged shard
file), read in parallel (``interleave``) and batched first, in blocks of ``BLOCK`` serialized records (consecutive small
files that hold nothing but their arrival's records, as a dataset of many small arrivals has before compaction, are read
as one stream of up to ``JOIN_RECORDS``: ``joined_slices``); the deterministic hold-out
(``landfall.core.rules.holdout``'s integer arithmetic, the same as the plan's, vectorised: ``random``, a hash of the
record's index in its arrival; ``blocks``, a hash of its block, and the gap around held-out blocks left out of both
splits; ``segment``, its arrival's held-out range and gap, passed per segment) is applied to a whole block with one
mask, and the block is parsed with one ``parse_example`` + ``decode_raw`` and normalised per feature. Shuffling is
vectorised too: the range order is reshuffled on every pass, and the instances are permuted within windows of
``shuffle_buffer`` instances (one gather per window) before they are cut into training batches with ``rebatch`` and
prefetched with AUTOTUNE. A pass over the worker's records is one epoch. Every per-record step is a vectorised op on a
block: per-record ``filter``/``map`` functions cost tens of microseconds per instance in tf.data, more than reading and
parsing together."""

from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from landfall.core.contracts.records import FEATURE_KEY
from landfall.core.rules import holdout
from landfall.core.rules.holdout import HASH_MODULUS, HASH_MULTIPLIER
from trainer.training.inputs import Plan

TRAIN, VALIDATION, ALL = "train", "validation", "all"
READ_BUFFER = 4 * 1024 * 1024
BLOCK = 1024  # records read, filtered and parsed together


EXCLUDED_SPAN = 1 << 40  # exclusion keys: arrival number x this + the record's index in its arrival
JOIN_RECORDS = 16 * BLOCK  # consecutive small whole files are read as one stream of at most this many records

Path_ = str | Sequence[str]  # one staged file, or several read as the concatenation of their records


def _files(path: Path_) -> list[str]:
    return [str(path)] if isinstance(path, str | os.PathLike) else [str(p) for p in path]


def read_blocks(slices: Sequence[tuple[Path_, int, int, Sequence[tuple[int, ...]]]], threshold: int, split: str,
                *, deterministic: bool = False, shuffle_files: int | None = None,
                rule: holdout.Split | None = None, excluded: Sequence[int] = ()) -> tf.data.Dataset:
    """Vectors of serialized records of ``split`` from ``slices``: ``(path, start, stop, segments)``, the
    records ``[start, stop)`` of a staged file (or of several, ``path`` a sequence: their records in turn, as
    ``joined_slices`` makes), where ``segments`` are ``(first, salt[, delta])``: from record ``first`` on (ascending,
    the first at ``start``) the hold-out hash of record ``i`` is ``(i * HASH_MULTIPLIER + salt) mod 2**32`` (a
    compacted file holds many arrivals, each with its salt) and its index in its arrival ``i + delta``.
    ``rule``: the plan's split (``None``: ``random``); ``blocks`` needs every segment's ``delta``, ``segment`` also its
    arrival's ranges ``(first, salt, delta, arrival, held_lo, held_hi, out_lo, out_hi)`` (``holdout.Split.ranges``,
    indices in the arrival). ``ALL``: every record of them."""
    if split not in (TRAIN, VALIDATION, ALL):
        raise ValueError(f"split must be {TRAIN}, {VALIDATION} or {ALL}, got {split!r}")
    blocks_mode = rule is not None and rule.mode == holdout.BLOCKS
    segment_mode = rule is not None and rule.mode == holdout.SEGMENT
    if blocks_mode and any(len(seg) < 3 for s in slices for seg in s[3]):
        raise ValueError("the blocks hold-out needs each segment's (first, salt, delta)")
    if segment_mode and any(len(seg) < 8 for s in slices for seg in s[3]):
        raise ValueError("the segment hold-out needs each segment's arrival ranges")
    groups = [_files(s[0]) for s in slices]
    paths = [p for g in groups for p in g]
    path_ends = np.cumsum([len(g) for g in groups], dtype=np.int64)
    firsts = [int(seg[0]) for s in slices for seg in s[3]]
    salts = [int(seg[1]) for s in slices for seg in s[3]]
    deltas = [int(seg[2]) if len(seg) > 2 else 0 for s in slices for seg in s[3]]
    arrivals = [int(seg[3]) if len(seg) > 3 else -1 for s in slices for seg in s[3]]
    # segment: per segment, its arrival's held-out range and the range trained on by no one (gap included)
    bounds = [[int(x) for x in seg[4:8]] if len(seg) >= 8 else [0, 0, 0, 0] for s in slices for seg in s[3]]
    ends = np.cumsum([len(s[3]) for s in slices], dtype=np.int64)
    los = (ends - [len(s[3]) for s in slices]).tolist()
    n = len(slices)
    files = tf.data.Dataset.from_tensor_slices((
        tf.constant((path_ends - [len(g) for g in groups]).tolist(), tf.int64, shape=[n]),
        tf.constant(path_ends.tolist(), tf.int64, shape=[n]),
        tf.constant([s[1] for s in slices], tf.int64, shape=[n]),
        tf.constant([s[2] for s in slices], tf.int64, shape=[n]),
        tf.constant(los, tf.int64, shape=[n]),
        tf.constant(ends.tolist(), tf.int64, shape=[n]),
    ))
    all_paths = tf.constant(paths, tf.string, shape=[len(paths)])
    all_firsts = tf.constant(firsts, tf.int64, shape=[len(firsts)])
    all_salts = tf.constant(salts, tf.int64, shape=[len(salts)])
    all_deltas = tf.constant(deltas, tf.int64, shape=[len(deltas)])
    all_arrivals = tf.constant(arrivals, tf.int64, shape=[len(arrivals)])
    all_bounds = tf.constant(bounds, tf.int64, shape=[len(bounds), 4])
    keys = tf.constant(list(excluded), tf.int64, shape=[len(excluded)])
    excluding = len(excluded) > 0
    if shuffle_files is not None and n > 1:
        files = files.shuffle(n, seed=shuffle_files, reshuffle_each_iteration=True)
    # With no hold-out every record is a training record: training needs no mask then.
    filtered = split == VALIDATION or (split == TRAIN and threshold > 0) or (split != ALL and excluding)
    length = rule.block if rule is not None else 1
    gap = rule.gap if rule is not None else 0

    def held_block(blocks: tf.Tensor, base: tf.Tensor) -> tf.Tensor:
        hashed = tf.math.floormod(blocks * HASH_MULTIPLIER + base, HASH_MODULUS)
        return tf.logical_and(blocks >= 0, hashed < threshold)

    def keep(index: tf.Tensor, salt: tf.Tensor, delta: tf.Tensor, bound: tf.Tensor) -> tf.Tensor:
        if segment_mode:  # landfall.core.rules.holdout.Split.sides for segment: two ranges of the record's arrival
            at = index + delta
            if split == VALIDATION:
                return tf.logical_and(at >= bound[:, 0], at < bound[:, 1])
            return tf.logical_not(tf.logical_and(at >= bound[:, 2], at < bound[:, 3]))
        if blocks_mode:  # landfall.core.rules.holdout.sides, in TensorFlow: by block, the gap in neither split
            at = index + delta  # the record's index in its arrival
            base = tf.math.floormod(salt - delta * HASH_MULTIPLIER, HASH_MODULUS)  # the arrival's salt at record 0
            held_out = held_block(tf.math.floordiv(at, length), base)
            if split == VALIDATION:
                return held_out
            near = tf.logical_or(held_block(tf.math.floordiv(at - gap, length), base),
                                 held_block(tf.math.floordiv(at + gap, length), base))
            return tf.logical_not(tf.logical_or(held_out, near))
        hashed = tf.math.floormod(index * HASH_MULTIPLIER + salt, HASH_MODULUS)
        held_out = hashed < threshold
        return held_out if split == VALIDATION else tf.logical_not(held_out)

    def one_file(plo: tf.Tensor, phi: tf.Tensor, start: tf.Tensor, stop: tf.Tensor, lo: tf.Tensor, hi: tf.Tensor
                 ) -> tf.data.Dataset:
        # A list of TFRecord files reads as their records in turn: the positions ``joined_slices`` gave them.
        records = tf.data.TFRecordDataset(all_paths[plo:phi], buffer_size=READ_BUFFER).skip(start).take(stop - start)
        blocks = records.batch(BLOCK)
        if not filtered:
            return blocks
        seg_firsts, seg_salts, seg_deltas = all_firsts[lo:hi], all_salts[lo:hi], all_deltas[lo:hi]
        seg_arrivals = all_arrivals[lo:hi]
        seg_bounds = all_bounds[lo:hi]

        def select(block: tf.Tensor, records: tf.Tensor) -> tf.Tensor:
            index = start + block * BLOCK + tf.range(tf.shape(records, out_type=tf.int64)[0], dtype=tf.int64)
            which = tf.searchsorted(seg_firsts, index, side="right", out_type=tf.int64) - 1
            delta = tf.gather(seg_deltas, which)
            mask = keep(index, tf.gather(seg_salts, which), delta, tf.gather(seg_bounds, which))
            if excluding:  # the champion's flagged records: a sorted-key lookup, vectorised over the block
                key = tf.gather(seg_arrivals, which) * EXCLUDED_SPAN + index + delta
                at = tf.minimum(tf.searchsorted(keys, key, side="left", out_type=tf.int64), len(excluded) - 1)
                mask = tf.logical_and(mask, tf.not_equal(tf.gather(keys, at), key))
            return tf.boolean_mask(records, mask)

        return blocks.enumerate().map(select)

    return files.interleave(
        one_file,
        cycle_length=max(1, min(n, 8)),
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


def file_slices(plan: Plan, paths: Sequence[str], split: str) -> list[tuple[str, int, int, list[tuple[int, ...]]]]:
    """This worker's planned record ranges of ``split`` as ``(path, start, stop, segments)`` in file record
    positions (each segment ``(first, salt, delta, arrival, *ranges)``: ``read_blocks``; ``arrival`` the number of the
    segment's arrival among ``plan.excluded``, -1 when it has none; ``ranges`` its arrival's ``segment`` hold-out
    ranges), consecutive ranges of one file merged
    into one (a compacted file is opened once, not once per arrival in it); ``paths`` are the staged files, in
    the order of ``plan.mine`` (as ``trainer.training.inputs.stage`` returns them)."""
    if len(paths) != len(plan.mine):
        raise ValueError(f"{len(paths)} staged paths for the plan's {len(plan.mine)} shards")
    local = dict(zip(plan.mine, paths, strict=True))
    numbers = {name: k for k, name in enumerate(sorted(plan.excluded))}
    chosen = plan.train_slices if split == TRAIN else plan.val_slices
    out: list[tuple[str, int, int, list[tuple[int, ...]]]] = []
    for s in chosen:
        piece = plan.shards[s.shard]
        path, start, stop = str(local[s.shard]), piece.start + s.start, piece.start + s.stop
        salt = (plan.salts[s.shard] - piece.start * HASH_MULTIPLIER) % HASH_MODULUS  # in file positions
        # file position + delta: index in the arrival; then the arrival's number among the excluded (-1: none)
        segment = (start, salt, piece.arrival_start - piece.start, numbers.get(piece.manifest, -1),
                   *plan.ranges_of(s.shard))
        if out and out[-1][0] == path and out[-1][2] == start:
            out[-1] = (path, out[-1][1], stop, [*out[-1][3], segment])
        else:
            out.append((path, start, stop, [segment]))
    return out


def joined_slices(slices: Sequence[tuple[str, int, int, list[tuple[int, ...]]]], sizes: dict[str, int],
                  limit: int = JOIN_RECORDS) -> list[tuple[tuple[str, ...], int, int, list[tuple[int, ...]]]]:
    """Consecutive slices of small whole files (``sizes``: the records of each staged file that holds exactly
    its shard) as one slice over the files in turn, up to ``limit`` records: a slice that ends where its file
    ends is followed by the next one starting at that file's first record, with the next file's positions
    shifted by the records before it and each segment's salt shifted back by as many, so every record keeps its
    hold-out hash. Before compaction a dataset of many small arrivals is then read in blocks of ``BLOCK``
    records, as a compacted one is, instead of one pipeline (and one tiny block) per file."""
    out: list[tuple[tuple[str, ...], int, int, list[tuple[int, ...]]]] = []
    offset, open_end = 0, False  # records of the current group's files; its last slice ends at its file's end
    for path, start, stop, segments in slices:
        size = sizes.get(path)
        if out and open_end and start == 0 and size is not None and out[-1][2] - out[-1][1] + stop <= limit:
            files, lo, _, segs = out[-1]
            shifted = [(seg[0] + offset, (seg[1] - offset * HASH_MULTIPLIER) % HASH_MODULUS,
                        *(seg[2] - offset for _ in seg[2:3]), *seg[3:]) for seg in segments]
            out[-1] = ((*files, path), lo, offset + stop, [*segs, *shifted])
        else:
            out.append(((path,), start, stop, list(segments)))
            offset = 0
        offset += size or 0
        open_end = size is not None and stop == size
    return out


def read_instances(plan: Plan, paths: Sequence[str], shape: tuple[int, int], split: str, *, mean=None, std=None,
                   deterministic: bool = False, shuffle_files: int | None = None) -> tf.data.Dataset:
    """Blocks of parsed (and normalised) instances, float32 [n, T, F], of ``split`` for this worker: exactly
    ``plan.train_counts[w]`` (or ``val_counts[w]``) of them; ``ALL`` is its training then its validation ones."""
    if any(plan.shards[i].series is not None for i in plan.mine):  # a series: windows cut from its rows
        from trainer.training import windows

        return windows.read_windows(plan, paths, shape, split, mean=mean, std=std, deterministic=deterministic,
                                    shuffle_files=shuffle_files)
    if split == ALL:
        return read_instances(plan, paths, shape, TRAIN, mean=mean, std=std, deterministic=deterministic,
                              shuffle_files=shuffle_files).concatenate(
            read_instances(plan, paths, shape, VALIDATION, mean=mean, std=std, deterministic=deterministic,
                           shuffle_files=shuffle_files))
    sizes = {str(p): plan.shards[i].count for i, p in zip(plan.mine, paths, strict=True) if plan.shards[i].whole}
    blocks = read_blocks(joined_slices(file_slices(plan, paths, split), sizes), plan.threshold, split,
                         deterministic=deterministic, shuffle_files=shuffle_files, rule=plan.split,
                         excluded=exclusion_keys(plan))
    return blocks.map(parser(shape, mean, std), num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)


def exclusion_keys(plan: Plan) -> list[int]:
    """``plan.excluded`` as the sorted keys ``read_blocks`` looks records up in: the arrivals numbered in name order
    (as ``file_slices`` numbers their segments)."""
    keys = [k * EXCLUDED_SPAN + np.asarray(plan.excluded[name], np.int64)
            for k, name in enumerate(sorted(plan.excluded))]
    return np.sort(np.concatenate(keys)).tolist() if keys else []


def _pair(x: tf.Tensor):
    return x, x


def _options(deterministic: bool = False) -> tf.data.Options:
    options = tf.data.Options()
    # Sharding is ours (record ranges per worker); tf.distribute must not shard again.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    options.deterministic = deterministic
    return options


def train_dataset(plan: Plan, paths: Sequence[str], shape: tuple[int, int], *, batch_size: int,
                  shuffle_buffer: int, seed: int, mean=None, std=None, first_epoch: int | None = None
                  ) -> tf.data.Dataset:
    """Endless shuffled ``(x, x)`` batches of ``batch_size`` (per replica; ``plan.batch_size`` per worker);
    ``plan.steps_per_epoch`` steps take one pass over this worker's training records but the remainder.

    ``first_epoch`` (``--deterministic``): the order of every pass is a function of (seed, worker, epoch) only,
    and the stream starts at pass ``first_epoch`` (the epoch a restarted run resumes at), so a run that was
    killed and restarted sees exactly the batches an uninterrupted run sees (``_deterministic``)."""
    if first_epoch is not None:
        return _deterministic(plan, paths, shape, batch_size, shuffle_buffer, seed, mean, std, first_epoch)
    ds = read_instances(plan, paths, shape, TRAIN, mean=mean, std=std, shuffle_files=seed + plan.worker_index)
    if shuffle_buffer > 1:
        ds = ds.rebatch(shuffle_buffer).map(tf.random.shuffle, num_parallel_calls=tf.data.AUTOTUNE)
    # One pass over this worker's records is one epoch: exactly the batches of ``steps_per_epoch`` steps
    # (every worker the same), the few left over dropped, then the next pass reshuffled.
    per_pass = plan.steps_per_epoch * plan.batch_size // batch_size
    ds = ds.rebatch(batch_size, drop_remainder=True).take(per_pass).repeat().map(_pair)
    return ds.prefetch(tf.data.AUTOTUNE).with_options(_options())


def validation_dataset(plan: Plan, paths: Sequence[str], shape: tuple[int, int], *, batch_size: int,
                       num_batches: int, mean=None, std=None) -> tf.data.Dataset:
    """Exactly ``num_batches`` ``(x, x)`` batches of ``batch_size``, the same instances every epoch."""
    ds = read_instances(plan, paths, shape, VALIDATION, mean=mean, std=std, deterministic=True)
    ds = ds.rebatch(batch_size, drop_remainder=True).take(num_batches).map(_pair)
    return ds.prefetch(tf.data.AUTOTUNE).with_options(_options())


def _deterministic(plan: Plan, paths: Sequence[str], shape: tuple[int, int], batch_size: int, shuffle_buffer: int,
                   seed: int, mean, std, first_epoch: int) -> tf.data.Dataset:
    """Pass ``k`` reads the worker's training records in an order seeded by (seed, worker, k): the ranges
    shuffled with that seed, read in a deterministic interleave, each window of ``shuffle_buffer`` instances
    permuted by a stateless shuffle of (seed, worker, k, window). Nothing depends on what ran before, so pass
    ``k`` is the same whether the run started at 0 or resumed at ``k``. Costs some read parallelism (a
    deterministic interleave waits for the slowest file in turn): a mode for reproducible runs and for the
    tests that compare a killed run with an uninterrupted one, not the default."""
    per_pass = plan.steps_per_epoch * plan.batch_size // batch_size
    base = (int(seed) * 1_000_003 + plan.worker_index * 7_919) % (2**31)

    def one_pass(k: tf.Tensor) -> tf.data.Dataset:
        pass_seed = tf.constant(base, tf.int64) * 104_729 + k
        ds = read_instances(plan, paths, shape, TRAIN, mean=mean, std=std, deterministic=True,
                            shuffle_files=pass_seed)
        if shuffle_buffer > 1:
            def permute(i: tf.Tensor, x: tf.Tensor) -> tf.Tensor:
                return tf.random.experimental.stateless_shuffle(x, seed=tf.stack([pass_seed, i]))

            ds = ds.rebatch(shuffle_buffer).enumerate().map(permute, deterministic=True)
        return ds.rebatch(batch_size, drop_remainder=True).take(per_pass)

    ds = tf.data.Dataset.range(first_epoch, 2**62).flat_map(one_pass).map(_pair)
    return ds.prefetch(tf.data.AUTOTUNE).with_options(_options(deterministic=True))
