"""What the trainer reads, decided before TensorFlow is imported: manifests, the per-worker plan, staging.

- ``load_manifests`` resolves ``--manifest`` arguments (a ``manifest.json`` URI, or a dataset prefix
  listing them), validates every manifest against the model's shape and dtype, and lists the shards.
- ``plan_inputs`` decides which records each worker trains and validates on, balanced to within one
  record however the instances spread over shards and arrivals. All shards' records are taken in one
  fixed global order (manifest order, then file order); the validation hold-out is a deterministic
  function of (seed, arrival, record index in the arrival) (``landfall.core.rules.holdout``: ``random``, a golden-ratio
  hash of the index, spread evenly over the data; or ``blocks``, contiguous runs with a gap of one window), so a
  record stays on the same side when more arrivals are added, and the submit stage counts exactly what a job
  will train on before it releases it. The training records
  are cut into ``num_workers`` contiguous runs of equal size (to within one record), the validation
  records likewise; a run may start and end inside a shard, so a worker stages only the shards its runs
  touch and reads only its record ranges of them (``Plan.train_slices``/``val_slices``). Every worker
  runs ``floor(smallest share / batch)`` steps an epoch (MultiWorkerMirroredStrategy needs the same
  number, or the last collective of an epoch waits forever), so an epoch covers every training
  instance once but less than one global batch.
- ``stage`` downloads this worker's shards to local disk in parallel through ``landfall.core.services.storage``
  (TensorFlow's own gs:// filesystem ignores ``STORAGE_EMULATOR_HOST``), checking size and crc32c.
"""

from __future__ import annotations

import dataclasses
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import google_crc32c
import numpy as np

from landfall.core import logs
from landfall.core.artifacts import snapshots
from landfall.core.contracts.layout import RETRACTION
from landfall.core.contracts.messages import JobInputs, Manifest
from landfall.core.contracts.records import DTYPE
from landfall.core.errors import Invalid, NotFound
from landfall.core.rules import holdout, moments, series_windows
from landfall.core.services.storage import Storage, crc32c_b64, resolve

log = logs.get("trainer.training.inputs")

MANIFEST_NAME = "manifest.json"
INPUTS_NAME = "inputs.json"
HASH_MULTIPLIER = holdout.HASH_MULTIPLIER  # the split's arithmetic lives in landfall.core.rules.holdout
HASH_MODULUS = holdout.HASH_MODULUS
READ_WORKERS = 32  # manifests read at once (latency-bound: one small object each)
DOWNLOAD_WORKERS = 32  # files staged at once (TrainerConfig.download_workers)


@dataclasses.dataclass(frozen=True)
class ShardRef:
    """Records ``[start, start + count)`` of the file ``uri``, all of one arrival (``arrival``), whose first is
    that arrival's record ``arrival_start``. A converted arrival's shard is one whole file; a compacted
    shard is one ``ShardRef`` per arrival it holds. For a series piece (``series`` set) the records are windows and
    ``start`` is the row the piece's rows start at in the file
    (``landfall.core.artifacts.snapshots.CompactedShard``)."""

    uri: str
    count: int
    bytes: int  # of the whole file
    crc32c: str
    manifest: str  # the arrival's manifest (for error messages and the per-arrival counts)
    start: int = 0
    arrival: str = ""  # the arrival id ("" in tests: the URI stands for it)
    arrival_start: int = 0
    whole: bool = False  # the file holds exactly these records (a converted arrival's shard): nothing else
    # A series arrival's shard (landfall.core.rules.series_windows): its records are windows cut from the rows the file
    # holds.
    series: series_windows.Layout | None = None


@dataclasses.dataclass(frozen=True)
class Inputs:
    manifest_uris: tuple[str, ...]
    manifests: tuple[Manifest, ...]
    shards: tuple[ShardRef, ...]
    shape: tuple[int, int]
    # (count, mean, std) of what the snapshot adds: its shards' merged statistics, and each arrival in it
    # retracted since with a negative count (its own statistics taken back out).
    snapshot_stats: tuple[tuple[int, list[float], list[float]], ...] = ()
    snapshot_datasets: tuple[str, ...] = ()

    @property
    def count(self) -> int:
        return sum(s.count for s in self.shards)

    @property
    def datasets(self) -> list[str]:
        return sorted({m.dataset for m in self.manifests} | set(self.snapshot_datasets))

    def feature_stats(self) -> tuple[list[float], list[float]]:
        """Count-weighted mean and standard deviation per feature over all manifests and the snapshot's shards
        (``landfall.core.rules.moments``: the Chan merge of the arrivals' statistics)."""
        mean, std = self.pooled()
        return mean.tolist(), moments.scaled(std).tolist()  # a constant feature is left unscaled

    def error_scale(self) -> list[float]:
        """Each feature's unit for the detection error (``landfall.core.rules.moments.error_scale``), from the same
        pooled statistics: what ``normalization.json``'s ``error_scale`` holds and the verdict measures in."""
        return moments.error_scale(self.pooled()[1]).tolist()

    def pooled(self) -> tuple[np.ndarray, np.ndarray]:
        """The count-weighted mean and (raw) standard deviation per feature over the manifests and the snapshot."""
        return moments.pooled([(m.count, m.stats.mean, m.stats.std) for m in self.manifests]
                              + list(self.snapshot_stats))


def inputs_uri(args: list[str] | tuple[str, ...]) -> str | None:
    """The released job's ``inputs.json`` among the trainer's ``--inputs``/``--manifest`` arguments, if any."""
    return next((a for a in args if a.endswith("/" + INPUTS_NAME)), None)


def resolve_manifest_uris(storage: Storage, args: list[str] | tuple[str, ...]) -> list[str]:
    """An ``inputs.json`` argument lists a job's manifests; another ``.json`` is a manifest; anything else
    is a prefix whose live (not retracted) manifests are all used."""
    return _resolve(storage, args)[0]


def _resolve(storage: Storage, args: list[str] | tuple[str, ...]) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """The manifests, and the snapshots with the arrivals to skip in each (``landfall.inputs/v2``)."""
    uris: list[str] = []
    snaps: list[tuple[str, list[str]]] = []
    for arg in args:
        if arg.endswith("/" + INPUTS_NAME):
            try:
                job = JobInputs.from_json(storage.read_bytes(arg), f"inputs {arg}")
            except NotFound:
                raise NotFound(f"inputs {arg} does not exist") from None
            uris.extend(job.manifest_uris)
            if job.snapshot:
                snaps.append((job.snapshot, list(job.skip)))
            continue
        if arg.endswith(".json"):
            uris.append(arg)
            continue
        prefix = arg if arg.endswith("/") else arg + "/"
        listed = storage.list(prefix, suffix=("/" + MANIFEST_NAME, "/" + RETRACTION))
        retracted = {u.rsplit("/", 1)[0] for u in listed if u.endswith("/" + RETRACTION)}
        found = [u for u in listed if u.endswith("/" + MANIFEST_NAME) and u.rsplit("/", 1)[0] not in retracted]
        if not found:
            raise NotFound(f"no {MANIFEST_NAME} under {prefix}")
        uris.extend(found)
    out = list(dict.fromkeys(uris))  # keep order, drop repeats
    if not out and not snaps:
        raise Invalid("no manifest given: pass --manifest URI (a manifest.json or a dataset prefix)")
    return out, snaps


def _read_manifest(storage: Storage, uri: str, shape: tuple[int, int]) -> Manifest:
    try:
        text = storage.read_bytes(uri)
    except NotFound:
        raise NotFound(f"manifest {uri} does not exist") from None
    manifest = Manifest.from_json(text, where=f"manifest {uri}")
    if manifest.dtype != DTYPE:
        raise Invalid(f"manifest {uri}: dtype is {manifest.dtype!r}, the trainer reads {DTYPE!r} records")
    if tuple(manifest.shape) != tuple(shape):
        raise Invalid(
            f"manifest {uri}: instance shape is {list(manifest.shape)}, the model expects "
            f"{list(shape)} [timesteps, features] (set --timesteps/--features to train on other shapes)"
        )
    if not manifest.shards:
        raise Invalid(f"manifest {uri} lists no shards")
    return manifest


def _snapshot_shards(storage: Storage, uri: str, skip: list[str], shape: tuple[int, int], pool: ThreadPoolExecutor
                     ) -> tuple[list[ShardRef], list[tuple[int, list[float], list[float]]], str]:
    """A snapshot's records as one ``ShardRef`` per arrival range, less the ``skip`` arrivals, and the
    statistics they add (each skipped arrival's own taken back out, read from its manifest)."""
    snap = snapshots.read(storage, uri)
    snapshots.check_shape(snap, shape, f"snapshot {uri}")
    held = snapshots.read_shards(storage, snap)
    gone = set(skip)
    refs, stats, found = [], [], []
    for shard in held:
        if shard.stats.get("count"):
            stats.append((int(shard.stats["count"]), shard.stats["mean"], shard.stats["std"]))
        layouts = {aid: series_windows.Layout.of(section, shape[0]) for aid, section in (shard.series or {}).items()}
        for aid, start, count, first in shard.ranges:
            if aid in gone:
                found.append(aid)
                continue
            refs.append(ShardRef(shard.uri, int(count), int(shard.bytes), shard.crc32c, snap.manifest_of(aid),
                                 int(start), aid, int(first),
                                 whole=len(shard.ranges) == 1 and int(start) == 0 and int(count) == shard.count,
                                 series=layouts.get(aid)))
    retracted = pool.map(lambda a: _read_manifest(storage, snap.manifest_of(a), shape), sorted(set(found)))
    stats.extend((-m.count, m.stats.mean, m.stats.std) for m in retracted)
    return refs, stats, snap.dataset


def load_manifests(storage: Storage, args: list[str] | tuple[str, ...], shape: tuple[int, int]) -> Inputs:
    """Reads and validates the manifests (and a job's snapshot), all in parallel; raises ``Invalid`` or
    ``NotFound`` (permanent). The snapshot's shards come first, then the manifests' in their order."""
    uris, snaps = _resolve(storage, args)
    shards: dict[tuple[str, int], ShardRef] = {}
    stats: list[tuple[int, list[float], list[float]]] = []
    names: list[str] = []
    with ThreadPoolExecutor(READ_WORKERS) as pool:
        pending = [pool.submit(_snapshot_shards, storage, uri, skip, shape, pool) for uri, skip in snaps]
        manifests = list(pool.map(lambda u: _read_manifest(storage, u, shape), uris))
        for future in pending:
            refs, more, dataset = future.result()
            for ref in refs:
                shards.setdefault((ref.uri, ref.start), ref)
            stats.extend(more)
            names.append(dataset)
    for uri, manifest in zip(uris, manifests, strict=True):
        first = 0
        layout = series_windows.Layout.of(manifest.series, manifest.shape[0]) if manifest.series else None
        for s in manifest.shards:
            ref = ShardRef(resolve(uri, s.uri), int(s.count), int(s.bytes), s.crc32c, uri, 0, manifest.arrival_id,
                           first, whole=True, series=layout)
            if ref.count <= 0:
                raise Invalid(f"manifest {uri}: shard {ref.uri} has count {ref.count}")
            first += ref.count
            shards.setdefault((ref.uri, 0), ref)
    return Inputs(tuple(uris), tuple(manifests), tuple(shards.values()), tuple(shape),  # type: ignore[arg-type]
                  tuple(stats), tuple(names))


# -- the plan -------------------------------------------------------------------------------------


def shard_salt(seed: int, shard: ShardRef) -> int:
    """The hold-out salt of ``shard``'s first record: a function of its arrival and its index in the arrival
    (never of the file it is in), so compaction moves records without moving them across the split."""
    return holdout.salt_at(seed, shard.arrival or shard.uri, shard.arrival_start)


def holdout_threshold(fraction: float) -> int:
    return holdout.threshold(fraction)


def is_validation(index: np.ndarray, salt: int, threshold: int) -> np.ndarray:
    """``random`` hold-out: same integer arithmetic as ``trainer.training.pipeline`` does in TensorFlow (int64,
    exact)."""
    return holdout.is_validation(index, salt, threshold)


def arrival_key(shard: ShardRef) -> str:
    """The arrival a shard's records belong to, as the hold-out names it (the URI in tests without an arrival id)."""
    return shard.arrival or shard.uri


def arrival_totals(shards: tuple[ShardRef, ...] | list[ShardRef]) -> tuple[int, ...]:
    """Per shard, the record count of its arrival: the sum over the pieces of that arrival among ``shards`` (a job
    reads every arrival whole: a manifest's shards, or a snapshot's ranges of it), which the ``segment`` hold-out
    needs (``landfall.core.rules.holdout``)."""
    total: dict[str, int] = {}
    for s in shards:
        total[arrival_key(s)] = total.get(arrival_key(s), 0) + s.count
    return tuple(total[arrival_key(s)] for s in shards)


def shard_sides(split: holdout.Split, shard: ShardRef, excluded: dict[str, np.ndarray] | None = None,
                total: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(training, validation) masks of ``shard``'s records (``landfall.core.rules.holdout``: by arrival and index in
    it),
    less the records ``excluded`` names (by manifest: sorted indices in the arrival), in neither side. ``total``:
    the arrival's record count (``arrival_totals``; the ``segment`` hold-out needs it)."""
    index = shard.arrival_start + np.arange(shard.count, dtype=np.int64)
    train, held = split.sides(arrival_key(shard), index, total)
    out = excluded_mask(excluded, shard, index)
    if out is not None:
        train, held = train & ~out, held & ~out
    return train, held


def excluded_mask(excluded: dict[str, np.ndarray] | None, shard: ShardRef, index: np.ndarray) -> np.ndarray | None:
    """Which of ``shard``'s records ``index`` (indices in its arrival) ``excluded`` leaves out; None: none."""
    gone = (excluded or {}).get(shard.manifest)
    if gone is None or not len(gone):
        return None
    return np.isin(index, gone)


@dataclasses.dataclass(frozen=True)
class Slice:
    """Records ``[start, stop)`` of shard ``shard`` (an index into ``Plan.shards``), in file order."""

    shard: int
    start: int
    stop: int


@dataclasses.dataclass(frozen=True)
class Plan:
    shards: tuple[ShardRef, ...]  # every shard, in the global order
    mine: tuple[int, ...]  # indices into ``shards`` this worker stages (its slices touch them)
    num_workers: int
    worker_index: int
    salts: tuple[int, ...]
    threshold: int
    train_counts: tuple[int, ...]  # per worker; they differ by at most one record
    val_counts: tuple[int, ...]
    batch_size: int  # per worker
    steps_per_epoch: int
    val_batch_size: int
    val_steps: int
    offsets: tuple[int, ...]  # global position of each shard's first record
    train_ranges: tuple[tuple[int, int], ...]  # per worker: [start, stop) of global positions
    val_ranges: tuple[tuple[int, int], ...]
    split: holdout.Split = dataclasses.field(default_factory=holdout.Split)  # seed, fraction, mode, window
    # Records left out of both splits (``training.exclude_flagged``: the champion flagged them), by manifest: sorted
    # indices in the arrival (``trainer.judging.champion_view``).
    excluded: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    totals: tuple[int, ...] = ()  # per shard, its arrival's record count (``arrival_totals``)

    def total_of(self, shard: int) -> int | None:
        return self.totals[shard] if self.totals else None

    def ranges_of(self, shard: int) -> tuple[int, int, int, int]:
        """The ``segment`` hold-out's ranges of shard ``shard``'s arrival (``holdout.Split.ranges``)."""
        total = self.total_of(shard)
        return self.split.ranges(arrival_key(self.shards[shard]), total) if total is not None else (0, 0, 0, 0)

    @property
    def global_batch_size(self) -> int:
        return self.batch_size * self.num_workers

    @property
    def train_slices(self) -> tuple[Slice, ...]:
        """This worker's training records: the training records (by the hold-out hash) of these slices."""
        return self.slices_of(self.train_ranges[self.worker_index])

    @property
    def val_slices(self) -> tuple[Slice, ...]:
        """This worker's validation records: the held-out records of these slices."""
        return self.slices_of(self.val_ranges[self.worker_index])

    def slices_of(self, span: tuple[int, int]) -> tuple[Slice, ...]:
        """The global positions ``[start, stop)`` as per-shard record ranges, in the global order."""
        start, stop = span
        out = []
        for i, (offset, shard) in enumerate(zip(self.offsets, self.shards, strict=True)):
            lo, hi = max(start - offset, 0), min(stop - offset, shard.count)
            if lo < hi:
                out.append(Slice(i, lo, hi))
        return tuple(out)


def _balanced_ranges(masks: list[np.ndarray], offsets: list[int], num_workers: int) -> tuple[
        list[tuple[int, int]], list[int]]:
    """Splits the records selected by ``masks`` (one per shard, in the global order) into ``num_workers``
    contiguous runs of ``floor`` or ``ceil`` of an equal share: worker ``w`` gets the selected records of
    ordinals ``[w * N // n, (w + 1) * N // n)``. Returns each worker's tight span of global positions
    (first selected record to last, ``(0, 0)`` when it has none) and its count."""
    per_shard = [int(m.sum()) for m in masks]
    total = sum(per_shard)
    cuts = [w * total // num_workers for w in range(num_workers + 1)]
    counts = [cuts[w + 1] - cuts[w] for w in range(num_workers)]
    # The global position of every ordinal we need: each worker's first and last selected record.
    wanted = sorted({k for w in range(num_workers) if counts[w] for k in (cuts[w], cuts[w + 1] - 1)})
    where: dict[int, int] = {}
    before, j = 0, 0
    for mask, offset, n in zip(masks, offsets, per_shard, strict=True):
        if j < len(wanted) and wanted[j] < before + n:
            index = np.flatnonzero(mask)
            while j < len(wanted) and wanted[j] < before + n:
                where[wanted[j]] = offset + int(index[wanted[j] - before])
                j += 1
        before += n
    spans = [(where[cuts[w]], where[cuts[w + 1] - 1] + 1) if counts[w] else (0, 0) for w in range(num_workers)]
    return spans, counts


MIN_BATCH = 32  # the batch is never lowered below this to reach min_steps (only to the data a worker has)


def batch_for(records: int, batch_size: int, min_steps: int = 0) -> int:
    """The per-worker batch for ``records`` training records per worker: ``batch_size``, lowered (not below
    ``MIN_BATCH``) until an epoch has ``min_steps`` steps, and never more than the records (issue #47: at batch 1024
    a dataset of 900 windows took one optimizer step an epoch, and its model was still learning at the 60-epoch
    ceiling)."""
    batch = batch_size
    if min_steps > 0 and records < batch * min_steps:
        batch = min(batch, max(MIN_BATCH, records // min_steps))
    return max(1, min(batch, records))


def plan_inputs(inputs: Inputs, num_workers: int, worker_index: int, batch_size: int,
                validation_fraction: float, seed: int, holdout_mode: str = holdout.RANDOM,
                excluded: dict[str, np.ndarray] | None = None, min_steps: int = 0) -> Plan:
    """Every worker's records, balanced to within one record whatever the shards' sizes.

    All shards' records are taken in one fixed global order (the manifests' shard order, each shard's
    records in file order). The hold-out hash marks each record training or validation; the training
    records are then cut into ``num_workers`` contiguous runs of equal size (to within one record), and
    the validation records likewise, independently. A run may start and end inside a shard: a worker
    stages only the shards its runs touch and reads only its record ranges of them. An epoch is
    ``floor(min share / batch)`` steps on every worker, so it covers every training instance once but
    the remainder of one global batch.

    ``holdout_mode`` ``segment`` holds out one contiguous run of each arrival (its head or its tail) with a gap of one
    window (the instances' timesteps) beside it, trained on by no one; ``blocks`` contiguous blocks with a gap on
    each side (``landfall.core.rules.holdout``).

    ``excluded`` (by manifest, sorted indices in the arrival) are in neither split: the counts leave them out, so
    every worker's share stays exact and equal to within one record (``training.exclude_flagged``).

    The batch is ``batch_for(min share, batch_size, min_steps)``: lowered for a small dataset so an epoch has
    ``min_steps`` steps (``--min-steps-per-epoch``, default 16), and all of a share smaller than one batch.
    """
    shards = inputs.shards
    if holdout_mode not in holdout.OVERLAPPING and any(s.series is not None for s in shards):
        # Windows of a series overlap: only a gap of a window keeps the sides apart (trainer.training.windows).
        log.warning("series inputs: the hold-out is %s, not %s", holdout.SEGMENT, holdout_mode)
        holdout_mode = holdout.SEGMENT
    layouts = [s.series for s in shards if s.series is not None]
    gap = max(holdout.series_gap(lay.length, lay.stride) for lay in layouts) if layouts else None
    split = holdout.Split(seed, validation_fraction, holdout_mode, max(1, int(inputs.shape[0])), gap)
    totals = arrival_totals(shards)
    split = split.rescued({arrival_key(s): t for s, t in zip(shards, totals, strict=True)}.items())
    salts = [shard_salt(seed, s) for s in shards]
    threshold = split.threshold
    offsets = np.concatenate([[0], np.cumsum([s.count for s in shards], dtype=np.int64)])[:-1].tolist()
    excluded = {k: np.asarray(v, np.int64) for k, v in (excluded or {}).items() if len(v)}
    sides = [shard_sides(split, s, excluded, t) for s, t in zip(shards, totals, strict=True)]
    train_ranges, train_counts = _balanced_ranges([t for t, _ in sides], offsets, num_workers)
    val_ranges, val_counts = _balanced_ranges([v for _, v in sides], offsets, num_workers)
    if min(train_counts) < 1:
        raise Invalid(
            f"too little data: {inputs.count} instances give {sum(train_counts)} training instances, "
            f"{min(train_counts)} per worker ({num_workers} workers): every worker needs one; add data"
        )
    if min(train_counts) < batch_size:  # a dataset smaller than one batch trains on all of it, one step an epoch
        log.warning(f"{min(train_counts)} training instances per worker, fewer than one batch of {batch_size}: "
                    f"the batch is {batch_for(min(train_counts), batch_size, min_steps)}")
    batch_size = batch_for(min(train_counts), batch_size, min_steps)
    steps = min(train_counts) // batch_size
    min_val = min(val_counts)
    val_batch = min(batch_size, min_val) if min_val > 0 else 0
    val_steps = min_val // val_batch if val_batch else 0
    plan = Plan(
        shards=shards,
        mine=(),
        num_workers=num_workers,
        worker_index=worker_index,
        salts=tuple(salts),
        threshold=threshold,
        train_counts=tuple(train_counts),
        val_counts=tuple(val_counts),
        batch_size=batch_size,
        steps_per_epoch=steps,
        val_batch_size=val_batch,
        val_steps=val_steps,
        offsets=tuple(offsets),
        train_ranges=tuple(train_ranges),
        val_ranges=tuple(val_ranges),
        split=split,
        excluded=excluded,
        totals=totals,
    )
    mine = sorted({s.shard for s in plan.train_slices + plan.val_slices})
    return dataclasses.replace(plan, mine=tuple(mine))


def arrival_counts(inputs: Inputs, plan: Plan) -> list[dict]:
    """Each arrival's (manifest's) instances and how the hold-out split them, in the plan's order."""
    per: dict[str, dict] = {}
    for uri, manifest in zip(inputs.manifest_uris, inputs.manifests, strict=True):
        per[uri] = {"manifest": uri, "source": manifest.source.name, "instances": 0, "train": 0, "validation": 0}
    for i, shard in enumerate(plan.shards):
        train, held = shard_sides(plan.split, shard, plan.excluded, plan.total_of(i))
        entry = per.setdefault(shard.manifest, {"manifest": shard.manifest, "source": None, "instances": 0,
                                                "train": 0, "validation": 0})
        if plan.excluded:  # training.exclude_flagged: the champion's flagged records, in neither split
            index = shard.arrival_start + np.arange(shard.count, dtype=np.int64)
            gone = excluded_mask(plan.excluded, shard, index)
            entry["excluded"] = entry.get("excluded", 0) + (int(gone.sum()) if gone is not None else 0)
        entry["instances"] += shard.count
        entry["validation"] += int(held.sum())
        entry["train"] += int(train.sum())  # with blocks, the gap records are in neither
    return list(per.values())


# -- staging --------------------------------------------------------------------------------------


def file_crc32c(path: Path) -> str:
    checksum = google_crc32c.Checksum()
    with open(path, "rb") as fh:
        while chunk := fh.read(8 * 1024 * 1024):
            checksum.update(chunk)
    return crc32c_b64(checksum)


def _check_staged(path: Path, shard: ShardRef, verify: bool) -> str | None:
    """None when the local copy matches the manifest, else what is wrong."""
    size = path.stat().st_size
    if size != shard.bytes:
        return f"is {size} bytes, its manifest says {shard.bytes}"
    if verify and shard.crc32c:
        crc = file_crc32c(path)
        if crc != shard.crc32c:
            return f"has crc32c {crc}, its manifest says {shard.crc32c} (corrupt records)"
    return None


def stage(storage: Storage, plan: Plan, local_dir: Path, workers: int = DOWNLOAD_WORKERS, verify: bool = True
          ) -> list[Path]:
    """Downloads this worker's shards (parallel), reusing valid copies from an earlier attempt.

    Returns local paths in the order of ``plan.mine``. A missing shard raises ``NotFound``; a shard
    whose size or crc32c disagrees with its manifest raises ``Invalid`` (both permanent).
    """
    local_dir.mkdir(parents=True, exist_ok=True)
    first: dict[str, int] = {}  # a compacted file holds many of the plan's pieces: staged once
    for i in plan.mine:
        first.setdefault(plan.shards[i].uri, i)

    def one(i: int) -> Path:
        shard = plan.shards[i]
        path = local_dir / f"{i:05d}-{shard.uri.rsplit('/', 1)[-1]}"
        if path.exists() and _check_staged(path, shard, verify) is None:
            return path
        tmp = path.with_name(path.name + f".part-{os.getpid()}")
        try:
            storage.download(shard.uri, tmp)
        except NotFound:
            raise NotFound(f"shard {shard.uri} listed in manifest {shard.manifest} does not exist") from None
        problem = _check_staged(tmp, shard, verify)
        if problem:
            tmp.unlink(missing_ok=True)
            raise Invalid(f"shard {shard.uri} (manifest {shard.manifest}) {problem}")
        os.replace(tmp, path)
        return path

    files = sorted(set(first.values()))
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(files) or 1))) as pool:
        staged = dict(zip(files, pool.map(one, files), strict=True))
    paths = [staged[first[plan.shards[i].uri]] for i in plan.mine]
    total = sum(p.stat().st_size for p in staged.values())
    log.info("staged shards", extra={"fields": {"shards": len(staged), "bytes": total, "dir": str(local_dir)}})
    return paths


def steps_summary(plan: Plan) -> dict:
    mine = plan.worker_index
    return {
        "sharding": "records",
        "shards_total": len(plan.shards),
        "shards_mine": len(plan.mine),
        "train_instances": plan.train_counts[mine],
        "val_instances": plan.val_counts[mine],
        "train_records": list(plan.train_ranges[mine]),  # global positions [start, stop)
        "steps_per_epoch": plan.steps_per_epoch,
        "val_steps": plan.val_steps,
        "epoch_fraction_used": round(
            plan.steps_per_epoch * plan.global_batch_size / max(1, sum(plan.train_counts)), 4
        ),
    }
