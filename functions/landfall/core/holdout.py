"""The hold-out split: which records of an arrival train, which are held out (validation), which neither.

One module, numpy only, imported by the trainer (``trainer.inputs`` plans with it, ``trainer.data`` does the same
integer arithmetic in TensorFlow) and by the submit stage (``landfall.submit.sufficient`` counts what a job would
train on before releasing it), so the two can never disagree.

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
    held-out one: the held-out loss is measured on series the model never saw. Right for overlapping windows.

Decisions:
- A record's side depends only on (seed, arrival, its index, fraction, mode, timesteps), never on the arrival's
  length or on any other arrival: so the training records of a list of arrivals are counted per arrival, a prefix
  of an arrival is counted exactly (``training_at_least`` stops as soon as it has enough), and the gap after the
  last block of an arrival is kept even when the next block does not exist (at most ``timesteps`` records).
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
RANDOM, BLOCKS = "random", "blocks"
MODES = (RANDOM, BLOCKS)
MODE = RANDOM  # the trainer's default --holdout
BLOCK_WINDOWS = 4  # a held-out block is this many windows (timesteps) of records long
COUNT_CHUNK = 1 << 20  # records counted at once (the memory of a count does not grow with an arrival)


def arrival_base(seed: int, arrival: str) -> int:
    """The hold-out salt of ``arrival``'s record 0."""
    return zlib.crc32(f"{seed}/{arrival}".encode())


def salt_at(seed: int, arrival: str, first: int) -> int:
    """The salt of a run of ``arrival``'s records starting at its record ``first``: ``h(first + k) = (k *
    HASH_MULTIPLIER + salt) mod 2**32``."""
    return (arrival_base(seed, arrival) + first * HASH_MULTIPLIER) % HASH_MODULUS


def threshold(fraction: float) -> int:
    return round(fraction * HASH_MODULUS)


def block_length(timesteps: int) -> int:
    return BLOCK_WINDOWS * max(1, int(timesteps))


def is_validation(index: np.ndarray, salt: int, threshold: int) -> np.ndarray:
    """``random``: the held-out records among ``index`` (relative to the run ``salt`` starts at). Same integer
    arithmetic as ``trainer.data`` does in TensorFlow (int64, exact)."""
    return (index.astype(np.int64) * HASH_MULTIPLIER + salt) % HASH_MODULUS < threshold


def _held_blocks(blocks: np.ndarray, base: int, threshold: int) -> np.ndarray:
    return (blocks >= 0) & ((blocks * HASH_MULTIPLIER + base) % HASH_MODULUS < threshold)


@dataclasses.dataclass(frozen=True)
class Split:
    """How a job splits its records: what the trainer's ``--seed``, ``--validation-fraction``, ``--holdout`` and
    ``--timesteps`` say."""

    seed: int = SEED
    fraction: float = VALIDATION_FRACTION
    mode: str = MODE
    timesteps: int = 1

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"holdout must be one of {', '.join(MODES)}, not {self.mode!r}")
        if not 0.0 <= self.fraction < 1.0:
            raise ValueError(f"validation fraction must be in [0, 1), got {self.fraction}")
        if self.timesteps < 1:
            raise ValueError(f"timesteps must be >= 1, got {self.timesteps}")

    @property
    def threshold(self) -> int:
        return threshold(self.fraction)

    @property
    def block(self) -> int:
        return block_length(self.timesteps)

    def describe(self) -> str:
        more = f", holdout blocks of {self.block} records with gaps of {self.timesteps}" if self.mode == BLOCKS else ""
        return f"validation {self.fraction:g}{more}"

    def sides(self, arrival: str, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(training, validation) masks of ``arrival``'s records ``index`` (indices in the arrival). With
        ``blocks`` a record may be in neither (a gap)."""
        return sides(self, arrival_base(self.seed, arrival), np.asarray(index, dtype=np.int64))

    def training_count(self, arrival: str, count: int, limit: int | None = None) -> int:
        """The training records among ``arrival``'s first ``min(count, limit)`` records (exact)."""
        n = count if limit is None else min(count, max(0, limit))
        base = arrival_base(self.seed, arrival)
        total = 0
        for lo in range(0, n, COUNT_CHUNK):
            train, _ = sides(self, base, np.arange(lo, min(n, lo + COUNT_CHUNK), dtype=np.int64))
            total += int(train.sum())
        return total

    def training_records(self, arrivals: Iterable[tuple[str, int]]) -> int:
        """The training records of these (arrival id, count): what ``trainer.inputs.plan_inputs`` splits among the
        workers (each gets ``training_records // workers`` or one more)."""
        return sum(self.training_count(a, n) for a, n in arrivals)

    def training_at_least(self, arrivals: Iterable[tuple[str, int]], need: int) -> tuple[bool, int]:
        """Whether these arrivals give at least ``need`` training records, and how many were counted: stops once
        ``need`` is reached, counting an arrival only as far as it must (a record's side does not depend on the
        records after it), so the cost is bounded by ``need`` however large the dataset."""
        found = 0
        for arrival, count in arrivals:
            if found >= need:
                break
            # Enough records of this arrival to reach ``need`` if every one trained, plus what the hold-out takes.
            missing = need - found
            limit = missing + int(missing * self.fraction / max(1e-9, 1.0 - self.fraction)) + 2 * self.block + 64
            while True:
                got = self.training_count(arrival, count, limit)
                if found + got >= need or limit >= count:
                    break
                limit *= 2
            found += got
        return found >= need, found


def sides(split: Split, base: int, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(training, validation) masks of the records ``index`` of the arrival whose salt at record 0 is ``base``."""
    thr = split.threshold
    if split.mode == RANDOM:
        held = (index * HASH_MULTIPLIER + base) % HASH_MODULUS < thr
        return ~held, held
    length, gap = split.block, split.timesteps
    held = _held_blocks(index // length, base, thr)
    near = _held_blocks((index - gap) // length, base, thr) | _held_blocks((index + gap) // length, base, thr)
    return ~held & ~near, held


def per_worker(training_records: int, workers: int) -> int:
    """The smallest worker's share of ``training_records`` (``plan_inputs`` cuts them to within one record)."""
    return training_records // max(1, workers)
