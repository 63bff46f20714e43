"""Dataset snapshots: a dataset's compacted data, so a job's inputs do not grow with its history.

A snapshot (``landfall.snapshot/v1``, ``gs://B/snapshots/<D>/<seq>.json``) lists a dataset's compacted
shards (``gs://B/compacted/<D>/<seq>-<token>/part-NNNNN.tfrecord``, written by
``landfall.arrival.compaction``), in parts (``landfall.snapshot-part/v1``) of at most ``PART_RANGES`` arrival
ranges each, so no object grows past a few MB however many arrivals it holds. Every compacted shard
records the record range of each arrival it holds (``[arrival_id, start, count]``), so an arrival
retracted after compaction is skipped by range before its shard is rewritten, and the hold-out hash is
taken over (arrival, index within the arrival), which does not change when records move.

**What a snapshot holds.** Its ``fence`` is the generation of an object the compactor wrote *before*
listing the dataset. Cloud Storage lists strongly consistently, so every manifest with a smaller
generation was in that listing: snapshot ``n`` holds exactly the arrivals live at compaction whose
manifest generation is below its fence. It is created last and create-only (after its shards and
parts); a crash anywhere before leaves the previous snapshot in force, and unreferenced objects that
the collection rule below removes.

On local disk (a folder instead of a bucket) the listing's generations are modification times and a
manifest's is its temporary file's, taken before it is linked into place: there the fence holds only while
no arrival is written during a compaction.

**Delta discovery (the release).** Decided: the release's one listing of the dataset's manifests and
retractions (the listing it already makes) is the delta's source, split by the newest snapshot's fence:
- live manifests with a generation at or above the fence are the delta (``inputs.manifests``);
- a retraction whose manifest is below the fence and whose own generation is at or above it is an
  arrival the snapshot may hold and must not be trained on (``inputs.skip``);
- nothing else: below the fence, a live manifest is in the snapshot, and a retraction older than the
  fence was seen by the compactor.
Why not the pending requests: a ``forbid``-dropped request is never pending, a retraction publishes no
request, and a request may be redelivered, reordered or lost to a crash; the listing holds every
committed manifest and retraction whatever happened to the messages. It costs one list request per
1,000 objects once per release, in the submit stage, never per worker, and only the newest snapshot's
small top object is read. ``inputs.json`` then names the snapshot, the skip list and the delta
(``landfall.inputs/v2``); a job with ``LANDFALL_WINDOW`` set keeps v1 (all its manifests listed).

**Collection rule.** A job reads the snapshot its ``inputs.json`` names (on every restart too). So a
snapshot, and each compacted shard and part that it alone names, may be deleted once (1) a newer snapshot
exists, (2) no unfinished job's inputs name it or an older one, and (3) it was superseded at least
``GRACE_S`` ago (a release that read it just before has written its inputs by then); shards and parts
that a kept snapshot still names stay. ``collectable`` is that rule; ``landfall
compact`` applies it after every compaction and, deployed, the reconciler once an hour
(``landfall.reconcile.collect``), with the dataset's head job as the unfinished one (under ``coalesce`` and
``forbid`` only the head can be unfinished; under ``allow`` nothing is collected).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import secrets
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from landfall.core.artifacts.retractions import Listing
from landfall.core.contracts.layout import Layout, gs
from landfall.core.contracts.messages import INPUTS_SNAPSHOT_SCHEMA, JobInputs, decode, utc_now
from landfall.core.errors import Invalid, NotFound
from landfall.core.rules import timestamps
from landfall.core.services.storage import Storage

SNAPSHOT_SCHEMA = "landfall.snapshot/v1"
PART_SCHEMA = "landfall.snapshot-part/v1"
PART_RANGES = 40_000  # arrival ranges per part: about 3 MB of JSON
READ_WORKERS = 16
NAMING_WORKERS = 4  # parts parsed at once by ``named_objects`` (the collection rule's memory)
GRACE_S = 3600.0  # a superseded snapshot stays an hour at least: far longer than any release takes


@dataclasses.dataclass(frozen=True)
class CompactedShard:
    """A compacted shard: ``ranges`` are ``[arrival_id, start, count, first]`` in file order (``first``: the range's
    first record's index in its arrival); ``stats`` the Chan merge (count-weighted) of its arrivals' statistics:
    ``{mean, std, min, max}`` per feature.

    A series shard (``landfall.core.rules.series_windows``) holds rows, not records: ``series`` maps each arrival id in
    it to its
    manifest's series section (``stride``, ``segments``), its ranges' ``count`` and ``first`` are windows, and a
    range's ``start`` is the row its rows start at in the file (the file is its arrivals' shard files, whole, one
    after another). A snapshot holds one kind: series shards or instance shards."""

    uri: str
    count: int
    bytes: int
    crc32c: str
    stats: dict[str, list[float]]
    ranges: list[list[Any]]
    series: dict[str, dict[str, Any]] | None = None


@dataclasses.dataclass(frozen=True)
class Snapshot:
    dataset: str
    seq: int
    fence: int  # generation: the snapshot holds the arrivals live at compaction whose manifest is below it
    shape: list[int]
    arrivals_prefix: str  # gs://B/tfrecords/<D>/: an arrival's manifest is <prefix><arrival_id>/manifest.json
    parts: list[str]
    count: int
    arrivals: int
    shards: int
    previous: str | None = None
    dtype: str = "float32"
    created_at: str = dataclasses.field(default_factory=utc_now)
    schema: str = SNAPSHOT_SCHEMA

    def to_json(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, text: str | bytes, where: str = "snapshot") -> Snapshot:
        return decode(cls, text, SNAPSHOT_SCHEMA, where)  # type: ignore[no-any-return]

    def manifest_of(self, arrival_id: str) -> str:
        return f"{self.arrivals_prefix}{arrival_id}/manifest.json"


def part_json(shards: list[CompactedShard]) -> bytes:
    return json.dumps({"schema": PART_SCHEMA, "shards": [dataclasses.asdict(s) for s in shards]},
                      separators=(",", ":")).encode()


def parse_part(text: bytes, where: str) -> list[CompactedShard]:
    return decode(None, text, PART_SCHEMA, where,  # type: ignore[no-any-return]
                  lambda raw: [CompactedShard(**s) for s in raw["shards"]])


def split_parts(shards: list[CompactedShard], limit: int = PART_RANGES) -> list[list[CompactedShard]]:
    """Shards in parts of at most ``limit`` arrival ranges (a shard is never split; one holds at least one)."""
    parts: list[list[CompactedShard]] = [[]]
    held = 0
    for shard in shards:
        if parts[-1] and held + len(shard.ranges) > limit:
            parts.append([])
            held = 0
        parts[-1].append(shard)
        held += len(shard.ranges)
    return [p for p in parts if p]


# -- where ----------------------------------------------------------------------------------------


def snapshots_prefix(bucket: str, layout: Layout, dataset: str) -> str:
    return gs(bucket, f"{layout.snapshots_prefix}{dataset}/")


def snapshot_uri(bucket: str, layout: Layout, dataset: str, seq: int) -> str:
    return f"{snapshots_prefix(bucket, layout, dataset)}{seq:08d}.json"


def attempt_prefix(bucket: str, layout: Layout, dataset: str, seq: int) -> str:
    """A compaction attempt's own folder: concurrent or retried attempts never write the same object."""
    return gs(bucket, f"{layout.compacted_prefix}{dataset}/{seq:08d}-{secrets.token_hex(4)}/")


def seq_of(uri: str) -> int:
    return int(uri.rsplit("/", 1)[-1].removesuffix(".json"))


def listed(storage: Storage, bucket: str, layout: Layout, dataset: str) -> list[str]:
    """The dataset's snapshot URIs, oldest first (the collection rule keeps the list short)."""
    prefix = snapshots_prefix(bucket, layout, dataset)
    return sorted((u for u in storage.list(prefix, suffix=".json") if "/" not in u[len(prefix):]), key=seq_of)


def latest(storage: Storage, bucket: str, layout: Layout, dataset: str) -> tuple[str, Snapshot] | None:
    uris = listed(storage, bucket, layout, dataset)
    if not uris:
        return None
    return uris[-1], read(storage, uris[-1])


def read(storage: Storage, uri: str) -> Snapshot:
    try:
        return Snapshot.from_json(storage.read_bytes(uri), f"snapshot {uri}")
    except NotFound:
        raise NotFound(f"snapshot {uri} does not exist") from None


def read_part(storage: Storage, uri: str) -> list[CompactedShard]:
    try:
        return parse_part(storage.read_bytes(uri), f"snapshot part {uri}")
    except NotFound:
        raise NotFound(f"snapshot part {uri} does not exist") from None


def read_shards(storage: Storage, snapshot: Snapshot) -> list[CompactedShard]:
    """Every compacted shard of ``snapshot``, its parts read in parallel."""
    with ThreadPoolExecutor(max(1, min(READ_WORKERS, len(snapshot.parts)))) as pool:
        return [s for part in pool.map(lambda u: read_part(storage, u), snapshot.parts) for s in part]


def named_objects(storage: Storage, snapshot: Snapshot, workers: int = NAMING_WORKERS) -> set[str]:
    """The parts and compacted shards ``snapshot`` names. Each part is reduced to its shards' URIs once read,
    so at most ``workers`` parsed parts are held at a time (about 9 MB each at ``PART_RANGES`` ranges), not
    every range of the snapshot (500,000 arrivals, 13 parts: 27 MB at the peak, against 110 MB held by
    ``read_shards``, measured with tracemalloc): what the reconciler's memory limit allows."""
    def uris(uri: str) -> list[str]:
        return [s.uri for s in read_part(storage, uri)]

    with ThreadPoolExecutor(max(1, min(workers, len(snapshot.parts)))) as pool:
        return {*snapshot.parts, *(u for part in pool.map(uris, snapshot.parts) for u in part)}


# -- the release ----------------------------------------------------------------------------------


def with_snapshot(inputs: JobInputs, listing: Listing, storage: Storage, bucket: str, layout: Layout) -> JobInputs:
    """``inputs`` (all live manifests, as listed) as the newest snapshot plus the delta: the manifests at or
    above its fence, and the arrivals retracted since (``skip``). Unchanged if the dataset has no snapshot."""
    found = latest(storage, bucket, layout, inputs.dataset)
    if found is None:
        return inputs
    uri, snapshot = found
    delta = [m for m in inputs.manifests if m.generation >= snapshot.fence]
    skip = sorted(m.uri.rsplit("/", 2)[-2] for m, retracted_at in listing.retracted
                  if m.generation < snapshot.fence <= retracted_at)
    return dataclasses.replace(inputs, schema=INPUTS_SNAPSHOT_SCHEMA, snapshot=uri, manifests=delta, skip=skip)


# -- the collection rule --------------------------------------------------------------------------


def collectable(snapshots: list[Snapshot], named_by_unfinished: set[int], now: float,
                grace_s: float = GRACE_S) -> list[Snapshot]:
    """The snapshots that may be deleted: those older than the newest, older than every snapshot an
    unfinished job's inputs name (``named_by_unfinished``: their seqs), and superseded (their successor
    created) at least ``grace_s`` ago, so a release that read one a moment ago has written its inputs and
    counts as unfinished by then."""
    ordered = sorted(snapshots, key=lambda s: s.seq)
    if not ordered:
        return []
    keep_from = min([ordered[-1].seq, *named_by_unfinished])
    out = []
    for older, newer in itertools.pairwise(ordered):
        if older.seq < keep_from and now - _epoch(newer.created_at) >= grace_s:
            out.append(older)
    return out


def _epoch(stamp: str) -> float:
    return timestamps.parse(stamp).timestamp()


def check_shape(snapshot: Snapshot, shape: tuple[int, int], where: str) -> None:
    if tuple(snapshot.shape) != tuple(shape):
        raise Invalid(f"{where}: instance shape is {snapshot.shape}, the model expects {list(shape)}")
