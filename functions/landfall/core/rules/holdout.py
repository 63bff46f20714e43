"""The hold-out split: which records of an arrival train, which are held out (validation), which neither.

One module, numpy only, imported by the trainer (``trainer.training.inputs`` plans with it,
``trainer.training.pipeline`` does the same integer arithmetic in TensorFlow) and by the submit stage
(``landfall.submit.sufficient`` counts what a job would train on before releasing it), so the two can never disagree.

Every record is named by its arrival and its index in that arrival (never by the file it is in: compaction moves
records without moving them across the split). With the arrival's base salt ``base = crc32("<seed>/<arrival>")``
and the golden-ratio hash ``h(k) = (k * HASH_MULTIPLIER + base) mod 2**32`` (a Weyl sequence, evenly spread):

``random`` (the default)
    record ``i`` is held out when ``h(i) < threshold`` (``threshold = round(fraction * 2**32)``): each record on
    its own. Right for independent instances (separate windows, separate machines, separate days).
``blocks``
    the arrival is cut into blocks of ``block_length(timesteps)`` = ``BLOCK_WINDOWS`` x ``timesteps`` records; block
    ``b = i // L`` is held out when ``h(b) < threshold``, all its records together. A record that is not held out
    but lies within ``timesteps`` records of a held-out one (``timesteps`` records each side of a held-out block)
    is a *gap* record: neither trained nor validated on. With stride-1 sliding windows of ``timesteps`` steps (one
    record per step), record ``i`` covers steps ``[i, i + timesteps)``, so no training window shares a step with a
    held-out one: the held-out loss is measured on series the model never saw. Kept for jobs pinned to it; a short
    arrival (a few blocks) often holds out nothing, and a held-out block with its two gaps takes 1.5 blocks.
``segment`` (series datasets' default)
    each arrival of ``n`` records holds out one contiguous run of ``v = max(1, round(fraction * n))`` records, its
    first ``v`` or its last ``v`` (bit 0 of the arrival's salt), and the ``timesteps`` records beside the run are
    the gap: one window per arrival is lost, whatever its length. An arrival too short for that (``n - v <
    SEGMENT_ROOM x timesteps``) is held out or trained on whole (held out when its salt is below the threshold:
    over many short arrivals, ``fraction`` of them), losing nothing. So every arrival of at least about
    ``2.2 x timesteps`` records gets a hold-out (a dataset with one such arrival never goes without), and the
    submit stage holds a job until the hold-out has a record per worker (``landfall.submit.sufficient``). Right for
    overlapping windows; the proof that no training window shares a row with a held-out one is in
    docs/trainer.md#the-hold-out.

    *The rescue* (issue #47): when the per-arrival rule leaves a job's arrivals without a single held-out record, or
    without a single training record (a dataset of one or a few short arrivals, each on one side whole), every
    arrival that can be split at all (``count - 1 - gap >= 1``: a held-out record, its gap and a training record) is
    split (``Split.rescued``), its run shortened if it must be. The submit stage and the trainer see the same
    arrivals and apply the same rule, so a dataset is never held for want of a hold-out while its data allows one.
    The rescue ends as soon as the arrivals give both sides without it.

*The gap* (``Split.gap``) is in records. A series dataset's records are windows of ``length`` rows every ``stride``
rows: windows ``i < j`` share a row only when ``(j - i) x stride < length``, so ``ceil(length / stride) - 1`` windows
between the sides are enough (``series_gap``; 0 for windows that do not overlap, ``length - 1`` at stride 1). An
instance dataset's gap is its ``timesteps`` (instances cut at stride 1 by the exporter, the cautious reading).

Decisions:
- In ``random`` and ``blocks`` a record's side depends only on (seed, arrival, its index, fraction, mode, timesteps);
  ``segment`` also reads the arrival's record count, which never changes (an overwrite is a new arrival, and
  compaction moves records without renumbering them), never any other arrival: so the training records of a list of
  arrivals are counted per arrival, a prefix of an arrival is counted exactly (``training_at_least`` stops as soon
  as it has enough), and the gap after the last block of an arrival is kept even when the next block does not exist
  (at most ``timesteps`` records).
- Blocks are ``BLOCK_WINDOWS = 4`` windows long: the gap then costs at most half a held-out block on each side,
  so at fraction ``f`` at most about ``f / 2`` of the records go unused (5 % at the default 0.1), while a held-out
  block is still long enough to hold several non-overlapping windows. Blocks never span arrivals (an arrival is
  its own series), so nothing needs a gap across arrivals.
- ``SEED`` and ``VALIDATION_FRACTION`` are the trainer's defaults (``trainer.config.TrainerConfig``). The submit
  stage renders ``--seed``, ``--validation-fraction`` and ``--holdout`` (and ``--timesteps`` with ``blocks``)
  into every job it releases unless the deployment's ``LANDFALL_TRAINER_ARGS`` or the dataset's spec set them,
  so the count it holds a release on is the count the trainer plans with, whatever the trainer image's
  environment says.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Iterable

import numpy as np

HASH_MULTIPLIER = 2654435761  # floor(2**32 / golden ratio): a Weyl sequence, evenly spread
HASH_MODULUS = 2**32
SEED = 42  # the trainer's default --seed
VALIDATION_FRACTION = 0.1  # the trainer's default --validation-fraction
RANDOM, BLOCKS, SEGMENT = "random", "blocks", "segment"
MODES = (RANDOM, BLOCKS, SEGMENT)
OVERLAPPING = (BLOCKS, SEGMENT)  # the modes that keep a gap of a window between the sides (overlapping windows)
MODE = RANDOM  # the trainer's default --holdout
BLOCK_WINDOWS = 4  # a held-out block is this many windows (timesteps) of records long
COUNT_CHUNK = 1 << 20  # records counted at once (the memory of a count does not grow with an arrival)
SEGMENT_ROOM = 2  # segment: an arrival is split when at least this many windows of records are left beside its hold-out


def arrival_base(seed: int, arrival: str) -> int:
    """The hold-out salt of ``arrival``'s record 0."""
    return zlib.crc32(f"{seed}/{arrival}".encode())


def salt_at(seed: int, arrival: str, first: int) -> int:
    """The salt of a run of ``arrival``'s records starting at its record ``first``: ``h(first + k) = (k *
    HASH_MULTIPLIER + salt) mod 2**32``."""
    return (arrival_base(seed, arrival) + first * HASH_MULTIPLIER) % HASH_MODULUS


def threshold(fraction: float) -> int:
    return round(fraction * HASH_MODULUS)


def series_gap(length: int, stride: int) -> int:
    """The records (windows) between the two sides that keep every training window apart from every held-out one."""
    return max(0, -(-int(length) // max(1, int(stride))) - 1)


def block_length(timesteps: int) -> int:
    return BLOCK_WINDOWS * max(1, int(timesteps))


def is_validation(index: np.ndarray, salt: int, threshold: int) -> np.ndarray:
    """``random``: the held-out records among ``index`` (relative to the run ``salt`` starts at). Same integer
    arithmetic as ``trainer.training.pipeline`` does in TensorFlow (int64, exact)."""
    return (index.astype(np.int64) * HASH_MULTIPLIER + salt) % HASH_MODULUS < threshold


def _held_blocks(blocks: np.ndarray, base: int, threshold: int) -> np.ndarray:
    return (blocks >= 0) & ((blocks * HASH_MULTIPLIER + base) % HASH_MODULUS < threshold)


def segment_ranges(base: int, count: int, fraction: float, gap: int, rescue: bool = False
                   ) -> tuple[int, int, int, int]:
    """``segment``: ``(held_lo, held_hi, out_lo, out_hi)``, indices in the arrival: its records ``[held_lo, held_hi)``
    are held out, ``[out_lo, out_hi)`` (which contains them) are not trained on; the rest trains.

    An arrival of ``count`` records, ``v = max(1, round(fraction * count))``:
    - with room (``count - v >= SEGMENT_ROOM x gap``): its first ``v`` records or its last ``v`` (bit 0 of ``base``
      says which) are held out, and the ``gap`` records beside them are in neither split: one window lost;
    - else (a short arrival) the whole arrival is on one side, held out when ``base < threshold(fraction)``: nothing
      lost, and over many short arrivals the held-out share is ``fraction``;
    - ``rescue`` (``Split.rescued``): split whenever a training record can be left beside the run and its gap (the
      run shortened to ``count - gap - 1`` records if it must be)."""
    if count <= 0 or fraction <= 0.0:
        return 0, 0, 0, 0
    held = max(1, round(fraction * count))
    if rescue and count - held < SEGMENT_ROOM * gap:  # as much as leaves one training record beside the gap
        held = max(1, min(held, count - gap - 1))
    if count - held >= SEGMENT_ROOM * gap or (rescue and count - held - gap >= 1):
        if base & 1:  # the tail
            return count - held, count, max(0, count - held - gap), count
        return 0, held, 0, min(count, held + gap)
    return (0, count, 0, count) if base < threshold(fraction) else (0, 0, 0, 0)


@dataclasses.dataclass(frozen=True)
class Split:
    """How a job splits its records: what the trainer's ``--seed``, ``--validation-fraction``, ``--holdout`` and
    ``--timesteps`` say."""

    seed: int = SEED
    fraction: float = VALIDATION_FRACTION
    mode: str = MODE
    timesteps: int = 1
    window_gap: int | None = None  # records between the sides; None: ``timesteps`` (a series: ``series_gap``)
    rescue: frozenset[str] = frozenset()  # segment: arrivals split by the rescue (``rescued``)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"holdout must be one of {', '.join(MODES)}, not {self.mode!r}")
        if not 0.0 <= self.fraction < 1.0:
            raise ValueError(f"validation fraction must be in [0, 1), got {self.fraction}")
        if self.timesteps < 1:
            raise ValueError(f"timesteps must be >= 1, got {self.timesteps}")
        if self.window_gap is not None and self.window_gap < 0:
            raise ValueError(f"the gap must be >= 0 records, got {self.window_gap}")

    @property
    def gap(self) -> int:
        return self.timesteps if self.window_gap is None else int(self.window_gap)

    @property
    def threshold(self) -> int:
        return threshold(self.fraction)

    @property
    def block(self) -> int:
        return block_length(self.timesteps)

    def describe(self) -> str:
        if self.mode == BLOCKS:
            return f"validation {self.fraction:g}, holdout blocks of {self.block} records with gaps of {self.gap}"
        if self.mode == SEGMENT:
            return f"validation {self.fraction:g}, holdout one segment per arrival with a gap of {self.gap}"
        return f"validation {self.fraction:g}"

    def ranges(self, arrival: str, count: int) -> tuple[int, int, int, int]:
        """``segment``: ``arrival``'s held-out and not-trained ranges (``segment_ranges``); ``(0, 0, 0, 0)`` in the
        other modes (they decide record by record)."""
        if self.mode != SEGMENT:
            return 0, 0, 0, 0
        return segment_ranges(arrival_base(self.seed, arrival), int(count), self.fraction, self.gap,
                              arrival in self.rescue)

    def rescued(self, arrivals: Iterable[tuple[str, int]]) -> Split:
        """This split, with the rescue (module doc) when ``segment`` holds out none of ``arrivals``' records, or trains
        on none (one short arrival held out whole): every arrival that can be split at all is; else this split
        unchanged."""
        if self.mode != SEGMENT or self.fraction <= 0.0:
            return self
        listed = [(a, int(n)) for a, n in arrivals]
        counted = [self.counts(a, n) for a, n in listed]
        if any(held for _, held in counted) and any(trained for trained, _ in counted):
            return self
        can = frozenset(a for a, n in listed if n - 1 - self.gap >= 1)
        return dataclasses.replace(self, rescue=can) if can else self

    def sides(self, arrival: str, index: np.ndarray, count: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(training, validation) masks of ``arrival``'s records ``index`` (indices in the arrival). With
        ``blocks`` or ``segment`` a record may be in neither (a gap). ``segment`` needs the arrival's ``count``
        (its manifest's: arrivals never change)."""
        index = np.asarray(index, dtype=np.int64)
        if self.mode == SEGMENT:
            if count is None:
                raise ValueError("the segment hold-out needs the arrival's record count")
            held_lo, held_hi, out_lo, out_hi = self.ranges(arrival, count)
            held = (index >= held_lo) & (index < held_hi)
            return ~((index >= out_lo) & (index < out_hi)), held
        return sides(self, arrival_base(self.seed, arrival), index)

    def counts(self, arrival: str, count: int, limit: int | None = None) -> tuple[int, int]:
        """(training, held-out) records among ``arrival``'s first ``min(count, limit)`` records (exact)."""
        n = count if limit is None else min(count, max(0, limit))
        if self.mode == SEGMENT:
            held_lo, held_hi, out_lo, out_hi = self.ranges(arrival, count)
            out = max(0, min(out_hi, n) - out_lo) if n > out_lo else 0
            held = max(0, min(held_hi, n) - held_lo) if n > held_lo else 0
            return n - out, held
        base = arrival_base(self.seed, arrival)
        trained = held = 0
        for lo in range(0, n, COUNT_CHUNK):
            train, val = sides(self, base, np.arange(lo, min(n, lo + COUNT_CHUNK), dtype=np.int64))
            trained += int(train.sum())
            held += int(val.sum())
        return trained, held

    def training_count(self, arrival: str, count: int, limit: int | None = None) -> int:
        """The training records among ``arrival``'s first ``min(count, limit)`` records (exact)."""
        return self.counts(arrival, count, limit)[0]

    def training_records(self, arrivals: Iterable[tuple[str, int]]) -> int:
        """The training records of these (arrival id, count): what ``trainer.training.inputs.plan_inputs`` splits among
        the workers (each gets ``training_records // workers`` or one more), with the rescue when it applies."""
        listed = list(arrivals)
        split = self.rescued(listed)
        return sum(split.training_count(a, n) for a, n in listed)

    def held_out_records(self, arrivals: Iterable[tuple[str, int]]) -> int:
        """The held-out records of these (arrival id, count), as the plan counts them (with the rescue)."""
        listed = list(arrivals)
        split = self.rescued(listed)
        return sum(split.counts(a, n)[1] for a, n in listed)

    def training_at_least(self, arrivals: Iterable[tuple[str, int]], need: int) -> tuple[bool, int]:
        """Whether these arrivals give at least ``need`` training records, and how many were counted (see
        ``enough``)."""
        ok, found, _ = self.enough(arrivals, need, 0)
        return ok, found

    def enough(self, arrivals: Iterable[tuple[str, int]], need: int, need_held: int = 0) -> tuple[bool, int, int]:
        """Whether these arrivals give at least ``need`` training records and ``need_held`` held-out ones, and how
        many of each were counted: stops once both are reached, counting an arrival only as far as it must (in
        ``random`` and ``blocks`` a record's side does not depend on the records after it; ``segment`` counts an
        arrival in constant time), so the cost is bounded by ``need`` however large the dataset. ``segment`` counts
        with the rescue (``rescued``) when all the arrivals hold nothing out (or train on nothing), as the trainer
        will: that is decided over every arrival first (O(1) each), never over those counted before an early stop."""
        if self.mode == SEGMENT and not self.rescue:
            # Whether the rescue applies is a question about every arrival (the trainer's plan asks it of all of
            # them): decided first, over all of them, so a count that stops early still counts as the trainer will.
            arrivals = list(arrivals)
            rescued = self.rescued(arrivals)
            if rescued.rescue:
                return rescued.enough(arrivals, need, need_held)
        found = held = 0
        for arrival, count in arrivals:
            if found >= need and held >= need_held:
                break
            if self.mode == SEGMENT or held < need_held:  # exact and O(1) / or the hold-out still short: all of it
                got, val = self.counts(arrival, count)
            else:
                # Enough records of this arrival to reach ``need`` if every one trained, plus what the hold-out takes.
                missing = need - found
                limit = missing + int(missing * self.fraction / max(1e-9, 1.0 - self.fraction)) + 2 * self.block + 64
                while True:
                    got, val = self.counts(arrival, count, limit)
                    if found + got >= need or limit >= count:
                        break
                    limit *= 2
            found += got
            held += val
        return found >= need and held >= need_held, found, held


def sides(split: Split, base: int, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(training, validation) masks of the records ``index`` of the arrival whose salt at record 0 is ``base``
    (``random`` and ``blocks``: a record's side depends on its index alone)."""
    thr = split.threshold
    if split.mode == RANDOM:
        held = (index * HASH_MULTIPLIER + base) % HASH_MODULUS < thr
        return ~held, held
    if split.mode == SEGMENT:
        raise ValueError("the segment hold-out needs the arrival's record count: use Split.sides")
    length, gap = split.block, split.gap
    held = _held_blocks(index // length, base, thr)
    near = _held_blocks((index - gap) // length, base, thr) | _held_blocks((index + gap) // length, base, thr)
    return ~held & ~near, held


def per_worker(training_records: int, workers: int) -> int:
    """The smallest worker's share of ``training_records`` (``plan_inputs`` cuts them to within one record)."""
    return training_records // max(1, workers)
