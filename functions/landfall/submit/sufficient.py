"""No job that cannot train: a release is held while its dataset holds too little data for the job it would render.

The trainer (``trainer.training.inputs.plan_inputs``) fails a job whose smallest worker gets no training record, or
fewer than its local replicas (exit 3: a Failed job, a red row, an alert); a worker with fewer records than one batch
trains on all of them, one step an epoch (issue #47: a dataset smaller than one batch gets a model, and the verdict
says whether a baseline beats it). ``shortfall`` computes, before a release, exactly what it will compute: the
training records of the dataset's live arrivals under the job's hold-out (``landfall.core.rules.holdout``: a record's
side
depends only on the seed, its arrival, its index, the fraction, the mode and the gap, with the rescue when no arrival
holds anything out), split over the job's workers; the job is held (``landfall.submit.coalesce.advance``: state
``held``, the requests stay pending) while ``training // workers`` is below one record per replica, or while the
hold-out has no record per replica, with a reason like ``held: 1 of 2 instances needed (2 workers, one instance per
replica, validation 0.1)``, shown by ``landfall status`` and ``landfall report``. The next arrival, or the
reconciler, releases it once there is enough.

What the job will use (``split_of``): the trainer flags the release renders (``LANDFALL_TRAINER_ARGS``, then the
spec's), else ``landfall.core.rules.holdout``'s defaults, which are the trainer's. ``pin`` renders ``--seed``,
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
- ``LANDFALL_MIN_DATA`` (read from the process environment, like the retrain policy's defaults): ``record`` (the
  default since issue #47) holds a job until every replica gets a training record and a held-out one; ``batch``
  until every worker gets one batch of training records (the rule before #47: a deployment that would rather wait
  for data than train a dataset smaller than a batch); ``off`` releases regardless.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor

from landfall.core.config import Seed
from landfall.core.contracts.messages import InputManifest, Manifest, TrainingRequest
from landfall.core.errors import Invalid, NotFound
from landfall.core.rules import holdout
from landfall.core.services.storage import Storage
from landfall.submit.config import JobConfig

HOLD_BOUND_S = 7 * 86400.0  # the longest a request waits for its dataset to hold one batch
SHAPE_READS = 64  # held requests whose manifests are checked against the spec's shape, per release attempt
READ_WORKERS = 16
RECORD, BATCH, OFF = "record", "batch", "off"
MODES = (RECORD, BATCH, OFF)


def mode_of(env: Mapping[str, str] | None = None) -> str:
    mode = (os.environ if env is None else env).get("LANDFALL_MIN_DATA", RECORD).strip().lower() or RECORD
    if mode not in MODES:
        raise ValueError(f"LANDFALL_MIN_DATA must be one of {', '.join(MODES)}, not {mode!r}")
    return mode


def enabled(env: Mapping[str, str] | None = None) -> bool:
    return mode_of(env) != OFF


def flag_value(args: tuple[str, ...] | list[str], name: str) -> str | None:
    """The value argparse would give ``name`` (the last of ``--name value`` or ``--name=value``), or None."""
    found = None
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            found = args[i + 1]
        elif arg.startswith(name + "="):
            found = arg[len(name) + 1:]
    return found


def split_of(cfg: JobConfig, timesteps: int | None = None, gap: int | None = None) -> holdout.Split:
    """The hold-out the job rendered from ``cfg`` will use (its trainer flags, else the trainer's defaults); ``gap``:
    a series dataset's (``holdout.series_gap`` of its window and stride)."""
    args = cfg.trainer_args
    seed, fraction = flag_value(args, "--seed"), flag_value(args, "--validation-fraction")
    mode, steps = flag_value(args, "--holdout"), flag_value(args, "--timesteps")
    try:
        return holdout.Split(int(seed) if seed is not None else holdout.SEED,
                             float(fraction) if fraction is not None else holdout.VALIDATION_FRACTION,
                             mode or holdout.MODE, int(steps) if steps is not None else (timesteps or Seed.TIMESTEPS),
                             gap)
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
    """Too little data for the job: ``training`` training records of the ``need`` (one per replica) it needs."""

    instances: int
    training: int
    workers: int
    batch: int
    split: holdout.Split
    held_out: int = 0  # the held-out records counted
    need_held: int = 0  # the held-out records the job needs (one per replica: each evaluates its share)

    per_worker: int = 1  # training records each worker needs: one per replica (record), or a batch (batch)

    @property
    def need(self) -> int:
        return self.workers * self.per_worker

    @property
    def short_of_training(self) -> bool:
        return self.training < self.need

    @property
    def needed(self) -> int:
        """About how many instances the dataset needs (the hold-out's expected share taken out), always more than
        it holds."""
        kept = 1.0 - self.split.fraction * (1.0 + (2.0 * self.split.gap / self.split.block
                                                   if self.split.mode == holdout.BLOCKS else 0.0))
        if not self.short_of_training:
            return self.instances
        kept = max(kept, 1e-6)
        return max(math.ceil(self.need / kept), self.instances + math.ceil((self.need - self.training) / kept))

    @property
    def reason(self) -> str:
        workers = f"{self.workers} worker{'s' if self.workers != 1 else ''}"
        if self.short_of_training:
            what = (f"x batch {self.batch}" if self.per_worker == self.batch
                    else f"x {self.per_worker} training instance{'s' if self.per_worker != 1 else ''}")
            return (f"held: {self.instances:,} of {self.needed:,} instances needed ({workers} {what}, "
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
              timesteps: int | None = None, series: bool = False, gap: int | None = None,
              mode: str = RECORD) -> Shortfall | None:
    """None when the job rendered from ``cfg`` over ``manifests`` gives every worker at least one batch of training
    records and every replica a held-out record (exactly as ``plan_inputs`` will count), else what is missing.
    ``timesteps``: the instances' window, when no ``--timesteps`` flag says it (the ``segment`` and ``blocks``
    hold-outs use it). ``series``: a series dataset, whose hold-out the trainer keeps apart by a window whatever the
    flags say (``random`` becomes ``segment``)."""
    split = split_of(cfg, timesteps, gap if series else None)
    if series and split.mode not in holdout.OVERLAPPING:
        split = dataclasses.replace(split, mode=holdout.SEGMENT)
    per_worker = cfg.batch_size_per_worker if mode == BATCH else max(1, cfg.gpus_per_worker)
    need = cfg.workers * per_worker
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
                     need_held, per_worker)


def window_of(manifests: list[InputManifest], storage: Storage) -> tuple[int | None, int | None]:
    """The instances' timesteps and, for a series, the gap its window and stride need (``holdout.series_gap``), from
    the newest manifest (one read), for a ``segment`` or ``blocks`` hold-out."""
    for m in sorted(manifests, key=lambda m: (-m.generation, m.uri)):
        read = _read(storage, m.uri)
        if read is not None:
            stride = (read.series or {}).get("stride")
            gap = holdout.series_gap(int(read.shape[0]), int(stride)) if stride else None
            return int(read.shape[0]), gap
    return None, None


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
