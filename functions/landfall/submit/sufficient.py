"""No job that cannot train: a release is held while its dataset holds too little data for the job it would render.

The trainer (``trainer.inputs.plan_inputs``) fails a job whose smallest worker gets less than one batch of training
records (exit 3: a Failed job, a red row, an alert). ``shortfall`` computes, before a release, exactly what it will
compute: the training records of the dataset's live arrivals under the job's hold-out (``landfall.core.holdout``:
a record's side depends only on the seed, its arrival, its index, the fraction, the mode and the window), split over
the job's workers; the job is held (``landfall.submit.coalesce.advance``: state ``held``, the requests stay pending)
while ``training // workers < batch_size_per_worker``, with a reason like ``held: 127 of 1,138 instances needed
(1 worker x batch 1024, validation 0.1)``, shown by ``landfall status`` and ``landfall report``. The next arrival,
or the reconciler, releases it once there is enough.

What the job will use (``split_of``): the trainer flags the release renders (``LANDFALL_TRAINER_ARGS``, then the
spec's), else ``landfall.core.holdout``'s defaults, which are the trainer's. ``pin`` renders ``--seed``,
``--validation-fraction`` and ``--holdout`` into every job when neither sets them, so the trainer never falls back
to its image's environment and the two sides always agree. Counts come from the release's one listing
(``ListedManifest.count``, the manifest object's metadata); a manifest without one is read. The count stops as soon
as one global batch of training records is found (``holdout.Split.training_at_least``), so a large dataset costs
one arrival's worth of arithmetic, not its size.

Decisions:
- *Never satisfiable: rejected.* When the dataset's spec sets a shape and a held arrival's manifest has another
  (the spec changed after the arrival), no job of the dataset can train while that arrival is live: the held
  requests are rejected (``Invalid``, ``rejected/<dataset>/request-<id>.json``) saying so and what to do, instead of
  waiting. Only the held requests' own manifests are read for this (at most ``SHAPE_READS``), never the history.
- *Bounded.* A dataset whose data stays below one batch keeps its requests pending for at most ``HOLD_BOUND_S``
  (7 days) after the oldest was recorded; then they are rejected (``Invalid``, with the same reason). Nothing is
  lost: the arrivals stay in the dataset, and its next arrival's request is held again counting all of them, so the
  first job that can train trains on everything.
- *The trainer keeps its own check* (``plan_inputs``' ``Invalid``) as the last line of defence: a manual
  ``landfall train``, a retraction between release and start, or a hand-edited ``LANDFALL_TRAINER_ARGS``.
- ``LANDFALL_MIN_DATA=off`` (read from the process environment, like the retrain policy's defaults) releases
  regardless, as before this rule; the default, ``batch``, holds.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor

from landfall.core import holdout
from landfall.core.config import Seed
from landfall.core.errors import Invalid, NotFound
from landfall.core.messages import InputManifest, Manifest, TrainingRequest
from landfall.core.storage import Storage
from landfall.submit.config import JobConfig

HOLD_BOUND_S = 7 * 86400.0  # the longest a request waits for its dataset to hold one batch
SHAPE_READS = 64  # held requests whose manifests are checked against the spec's shape, per release attempt
READ_WORKERS = 16
MODES = ("batch", "off")


def enabled(env: Mapping[str, str] | None = None) -> bool:
    mode = (os.environ if env is None else env).get("LANDFALL_MIN_DATA", "batch").strip().lower() or "batch"
    if mode not in MODES:
        raise ValueError(f"LANDFALL_MIN_DATA must be one of {', '.join(MODES)}, not {mode!r}")
    return mode == "batch"


def flag_value(args: tuple[str, ...] | list[str], name: str) -> str | None:
    """The value argparse would give ``name`` (the last of ``--name value`` or ``--name=value``), or None."""
    found = None
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            found = args[i + 1]
        elif arg.startswith(name + "="):
            found = arg[len(name) + 1:]
    return found


def split_of(cfg: JobConfig, timesteps: int | None = None) -> holdout.Split:
    """The hold-out the job rendered from ``cfg`` will use (its trainer flags, else the trainer's defaults)."""
    args = cfg.trainer_args
    seed, fraction = flag_value(args, "--seed"), flag_value(args, "--validation-fraction")
    mode, steps = flag_value(args, "--holdout"), flag_value(args, "--timesteps")
    try:
        return holdout.Split(int(seed) if seed is not None else holdout.SEED,
                             float(fraction) if fraction is not None else holdout.VALIDATION_FRACTION,
                             mode or holdout.MODE, int(steps) if steps is not None else (timesteps or Seed.TIMESTEPS))
    except ValueError as exc:
        raise Invalid(f"trainer flags {' '.join(args)}: {exc}") from None


def pin(cfg: JobConfig) -> JobConfig:
    """``cfg`` with ``--seed``, ``--validation-fraction`` and ``--holdout`` in its trainer flags (the defaults when
    neither the deployment nor the spec set them): what the release counted with is what the trainer uses."""
    pinned = {"--seed": str(holdout.SEED), "--validation-fraction": str(holdout.VALIDATION_FRACTION),
              "--holdout": holdout.MODE}
    extra = [x for flag, value in pinned.items() if flag_value(cfg.trainer_args, flag) is None for x in (flag, value)]
    return dataclasses.replace(cfg, trainer_args=(*cfg.trainer_args, *extra)) if extra else cfg


@dataclasses.dataclass(frozen=True)
class Shortfall:
    """Too little data for the job: ``training`` training records of the ``need`` (workers x batch) it needs."""

    instances: int
    training: int
    workers: int
    batch: int
    split: holdout.Split
    held_out: int = 0  # the held-out records counted
    need_held: int = 0  # the held-out records the job needs (one per replica: each evaluates its share)

    @property
    def need(self) -> int:
        return self.workers * self.batch

    @property
    def short_of_training(self) -> bool:
        return self.training < self.need

    @property
    def needed(self) -> int:
        """About how many instances the dataset needs (the hold-out's expected share taken out), always more than
        it holds."""
        kept = 1.0 - self.split.fraction * (1.0 + (2.0 * self.split.timesteps / self.split.block
                                                   if self.split.mode == holdout.BLOCKS else 0.0))
        if not self.short_of_training:
            return self.instances
        kept = max(kept, 1e-6)
        return max(math.ceil(self.need / kept), self.instances + math.ceil((self.need - self.training) / kept))

    @property
    def reason(self) -> str:
        workers = f"{self.workers} worker{'s' if self.workers != 1 else ''}"
        if self.short_of_training:
            return (f"held: {self.instances:,} of {self.needed:,} instances needed ({workers} x batch {self.batch}, "
                    f"{self.split.describe()})")
        return (f"held: no hold-out yet: {self.held_out:,} of {self.need_held:,} held-out instances needed (one per "
                f"replica) among {self.instances:,} instances ({self.split.describe()}); a job now could only end "
                f"not_evaluated, so it waits for the next arrival")

    def describe(self) -> dict:
        return {"instances": self.instances, "needed": self.needed, "training": self.training,
                "training_needed": self.need, "held_out": self.held_out, "held_out_needed": self.need_held,
                "workers": self.workers, "batch_size_per_worker": self.batch,
                "validation_fraction": self.split.fraction, "holdout": self.split.mode, "reason": self.reason}


def arrival_of(manifest_uri: str) -> str:
    """The arrival id of a listed manifest: its folder (``tfrecords/<dataset>/<arrival-id>/manifest.json``, the
    layout the converter writes and the trainer's ``Manifest.arrival_id``)."""
    return manifest_uri.rsplit("/", 2)[-2]


def _read(storage: Storage, uri: str) -> Manifest | None:
    try:
        return Manifest.from_json(storage.read_bytes(uri), uri)
    except (NotFound, Invalid):
        return None  # gone or unreadable: it trains nothing (the trainer would say why)


def _counted(manifests: list[InputManifest], storage: Storage) -> Iterator[tuple[str, int]]:
    """(arrival id, count) of each manifest, newest first (the listing's generations), reading a manifest only
    when the listing has no count for it."""
    for m in sorted(manifests, key=lambda m: (-m.generation, m.uri)):
        count = m.count
        if count is None:
            read = _read(storage, m.uri)
            count = read.count if read is not None else 0
        yield arrival_of(m.uri), int(count)


def held_out_needed(cfg: JobConfig, split: holdout.Split) -> int:
    """The held-out records a job of ``cfg`` needs to be evaluated at all: one per replica (each replica's share of
    the held-out split must hold a record, or the chief evaluates nothing and the job ends ``not_evaluated``); 0 when
    the job holds nothing out (``--validation-fraction 0``: it asked for no verdict)."""
    if split.fraction <= 0.0:
        return 0
    return cfg.workers * max(1, cfg.gpus_per_worker)


def shortfall(manifests: list[InputManifest], cfg: JobConfig, storage: Storage,
              timesteps: int | None = None, series: bool = False) -> Shortfall | None:
    """None when the job rendered from ``cfg`` over ``manifests`` gives every worker at least one batch of training
    records and every replica a held-out record (exactly as ``plan_inputs`` will count), else what is missing.
    ``timesteps``: the instances' window, when no ``--timesteps`` flag says it (the ``segment`` and ``blocks``
    hold-outs use it). ``series``: a series dataset, whose hold-out the trainer keeps apart by a window whatever the
    flags say (``random`` becomes ``segment``)."""
    split = split_of(cfg, timesteps)
    if series and split.mode not in holdout.OVERLAPPING:
        split = dataclasses.replace(split, mode=holdout.SEGMENT)
    need = cfg.workers * cfg.batch_size_per_worker
    need_held = held_out_needed(cfg, split)
    counted: list[tuple[str, int]] = []

    def seen() -> Iterator[tuple[str, int]]:
        for item in _counted(manifests, storage):
            counted.append(item)
            yield item

    enough, found, held = split.enough(seen(), need, need_held)
    if enough:
        return None
    return Shortfall(sum(n for _, n in counted), found, cfg.workers, cfg.batch_size_per_worker, split, held,
                     need_held)


def window_of(manifests: list[InputManifest], storage: Storage) -> int | None:
    """The instances' timesteps, from the newest manifest (one read), for a ``segment`` or ``blocks`` hold-out without a
    ``--timesteps`` flag."""
    for m in sorted(manifests, key=lambda m: (-m.generation, m.uri)):
        read = _read(storage, m.uri)
        if read is not None:
            return int(read.shape[0])
    return None


def never(requests: list[TrainingRequest], shape: tuple[int | None, int | None] | None, dataset: str,
          generation: int | None, storage: Storage) -> Invalid | None:
    """Why these held requests can never be trained on: a held arrival whose instances are not the shape the
    dataset's spec now asks for (``shape``; None: the spec sets none, nothing to check). Reads at most
    ``SHAPE_READS`` of their manifests."""
    if shape is None:
        return None
    uris = sorted({r.manifest for r in requests if r.reason == "arrival"})[:SHAPE_READS]
    with ThreadPoolExecutor(max(1, min(READ_WORKERS, len(uris) or 1))) as pool:
        read = list(pool.map(lambda u: _read(storage, u), uris))
    want = [w if w is not None else "any" for w in shape]
    for uri, manifest in zip(uris, read, strict=True):
        if manifest is not None and any(w is not None and int(w) != int(h)
                                        for w, h in zip(shape, manifest.shape, strict=True)):
            return Invalid(f"dataset {dataset}'s spec generation {generation} trains instances of shape "
                           f"{want}, but its arrival {uri} holds {list(manifest.shape)}: no job of the dataset "
                           "can train while that arrival is live (the spec changed after it arrived); retract it "
                           "(delete its incoming/ object) or set the spec's shape back")
    return None


def spec_shape(shape: Mapping[str, int]) -> tuple[int | None, int | None] | None:
    """The shape a dataset spec's ``shape`` section pins ((timesteps, features), either None when unset), or None."""
    if not shape:
        return None
    return shape.get("timesteps"), shape.get("features")


def expired(short: Shortfall, oldest: float, now: float) -> Invalid | None:
    """The requests' rejection once the oldest waited ``HOLD_BOUND_S`` for enough data, else None."""
    if now - oldest < HOLD_BOUND_S:
        return None
    return Invalid(f"{short.reason}, for {HOLD_BOUND_S / 86400:g} days (the bound): its requests are retired; the "
                   "arrivals stay in the dataset and its next arrival is held again counting all of them")
