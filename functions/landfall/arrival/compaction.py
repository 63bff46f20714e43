"""Compaction: a dataset's small arrivals rewritten into shards of about ``LANDFALL_SHARD_TARGET_BYTES``,
and the snapshot that names them (``landfall.core.artifacts.snapshots``), created last.

``compact(storage, bucket, dataset)``:
1. Reads the newest snapshot (if any) and its shards; writes this attempt's ``fence`` object under its own
   folder ``gs://B/compacted/<D>/<seq>-<token>/`` and takes its generation; then lists the dataset's
   manifests and retractions (strongly consistent: every manifest below the fence is listed).
2. Keeps the previous snapshot's entries that are large (at least half the target) and hold no arrival
   retracted since; rewrites the rest without the retracted arrivals; adds the live arrivals below the
   fence that it does not hold. An arrival of at least half the target bytes is named in place (its own
   shards, never copied); smaller ones are concatenated whole (TFRecord files concatenate: every record
   carries its own framing) into new shards, cut between arrivals once past the target.
3. Writes the new shards, then the parts, then creates ``snapshots/<D>/<seq+1>.json`` (create-only). A
   crash or a lost race leaves the previous snapshot in force; the loser's folder is never named by any
   snapshot, and ``collect`` removes it once a snapshot of its number or a later one exists.

A series arrival (``landfall.core.rules.series_windows``: rows, windowed when read) is compacted the same way, whole:
a large one
named in place, small ones' shard files concatenated (a compacted file's rows are theirs one after another, each
range saying where its rows start), with each arrival's series section in the part so a job reads no manifest. A
snapshot holds one kind, series or instances; an arrival of the other kind stays in the delta.

Every arrival's statistics are merged with the converter's Chan merge (``RunningStats.merge``), so a
compacted shard's statistics are those of its arrivals, merged as the trainer merges manifests. Arrival
shards are checked against their manifest's size and crc32c before they are copied. The arrivals' own
shards and manifests stay (the manifest remains the commit point, ``landfall score`` reads it).

Where it runs: ``landfall compact`` (locally, and by the local operator after each job it runs), and
``should_compact`` is the trigger: uncompacted arrivals past ``COMPACT_ARRIVALS`` or ``COMPACT_BYTES``.
``collect`` (the collection rule) runs where the submit stage's records can be read: after ``landfall
compact`` and, deployed, in the reconciler (``landfall.reconcile.collect``).
"""

from __future__ import annotations

import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import google_crc32c
import numpy as np

from landfall.arrival.stats import RunningStats
from landfall.core.artifacts import retractions, snapshots
from landfall.core.artifacts.snapshots import CompactedShard, Snapshot
from landfall.core.contracts import records
from landfall.core.contracts.layout import Layout, dataset_prefix, gs, shard_name
from landfall.core.contracts.messages import Manifest
from landfall.core.errors import Invalid
from landfall.core.rules import series_windows
from landfall.core.services.storage import Storage, crc32c_b64, join, resolve

COMPACT_ARRIVALS = 256  # uncompacted arrivals that trigger a compaction ...
COMPACT_BYTES = 256 * 1024 * 1024  # ... or uncompacted bytes
READ_WORKERS = 16


@dataclasses.dataclass(frozen=True)
class Result:
    snapshot: str | None  # the snapshot created, or None (nothing to do, or another compactor won)
    shards: int = 0
    written: int = 0  # new shards written
    arrivals: int = 0
    dropped: int = 0  # retracted arrivals rewritten out
    detail: str = ""


def _stats_of(manifest: Manifest) -> RunningStats:
    stats = RunningStats(len(manifest.stats.mean), int(manifest.count))
    stats.mean = np.array(manifest.stats.mean, dtype=float)
    stats.m2 = np.array(manifest.stats.std, dtype=float) ** 2 * manifest.count
    stats.min, stats.max = np.array(manifest.stats.min, dtype=float), np.array(manifest.stats.max, dtype=float)
    return stats


def _stats_doc(stats: RunningStats) -> dict[str, list[float]]:
    result = stats.result()
    return {"count": stats.n, "mean": result.mean, "std": result.std, "min": result.min, "max": result.max}


def _read_manifest(storage: Storage, uri: str) -> Manifest:
    return Manifest.from_json(storage.read_bytes(uri), f"manifest {uri}")


def _checked(storage: Storage, uri: str, size: int, crc: str) -> bytes:
    data = storage.read_bytes(uri)
    checksum = google_crc32c.Checksum()
    checksum.update(data)
    if len(data) != size or (crc and crc32c_b64(checksum) != crc):
        raise Invalid(f"shard {uri} is not the {size} bytes with crc32c {crc} its manifest or snapshot says")
    return data


def pending_work(storage: Storage, bucket: str, dataset: str, layout: Layout | None = None) -> tuple[int, int]:
    """The dataset's live arrivals no snapshot holds yet: how many, and their shards' bytes (from the
    listing's object sizes: no manifest is read)."""
    layout = layout or Layout()
    prefix = gs(bucket, dataset_prefix(layout, dataset))
    found = snapshots.latest(storage, bucket, layout, dataset)
    fence = found[1].fence if found else 0
    live = [m for m in retractions.list_dataset(storage, prefix).live if m.generation >= fence]
    folders = {m.uri.rsplit("/", 1)[0] + "/" for m in live}
    size = sum(i.size for i in storage.list_objects(prefix, suffix=records.SHARD_SUFFIX)
               if i.uri.rsplit("/", 1)[0] + "/" in folders)
    return len(live), size


def should_compact(storage: Storage, bucket: str, dataset: str, layout: Layout | None = None,
                   arrivals: int | None = None, size: int | None = None) -> bool:
    count, held = pending_work(storage, bucket, dataset, layout)
    return count >= (arrivals or COMPACT_ARRIVALS) or held >= (size or COMPACT_BYTES)


# A series arrival's shard files as pieces of a compacted file: (windows, rows, first window) each.
SeriesPieces = tuple[dict[str, Any], list[tuple[int, int, int]]]


def _series_section(manifest: Manifest) -> dict[str, Any]:
    return {"stride": manifest.series["stride"], "segments": manifest.series["segments"]}  # type: ignore[index]


def _series_pieces(manifest: Manifest) -> SeriesPieces:
    """Each shard file of a series arrival: its windows, its rows (``landfall.core.rules.series_windows``: the rows of
    its windows, ``[start(first), start(last) + length)``) and its first window's index in the arrival."""
    layout = series_windows.Layout.of(manifest.series or {}, manifest.shape[0])
    out, first = [], 0
    for s in manifest.shards:
        r0, r1 = (int(r) for r in layout.starts([first, first + s.count - 1]))
        out.append((int(s.count), r1 + layout.length - r0, first))
        first += s.count
    return _series_section(manifest), out


class _Writer:
    """Concatenates whole arrivals' records (or a series arrival's shard files) into shards of about ``target``
    bytes under ``prefix``."""

    def __init__(self, storage: Storage, prefix: str, target: int):
        self.storage, self.prefix, self.target = storage, prefix, target
        # (arrival id, its data, its stats, its series pieces or None)
        self.pending: list[tuple[str, list[bytes], RunningStats, SeriesPieces | None]] = []
        self.held = 0
        self.out: list[CompactedShard] = []

    def add(self, aid: str, data: list[bytes], stats: RunningStats, pieces: SeriesPieces | None = None) -> None:
        size = sum(len(d) for d in data)
        if self.pending and self.held + size > self.target:
            self.flush()
        self.pending.append((aid, data, stats, pieces))
        self.held += size

    def flush(self) -> None:
        if not self.pending:
            return
        uri = join(self.prefix, shard_name(len(self.out), 0).replace("-of-00000", ""))
        merged = RunningStats(len(self.pending[0][2].mean))
        ranges, at, row = [], 0, 0
        sections: dict[str, dict[str, Any]] = {}
        with self.storage.open_write(uri) as fh:
            for aid, data, stats, pieces in self.pending:
                for d in data:
                    fh.write(d)
                if pieces is None:
                    ranges.append([aid, at, stats.n, 0])
                else:  # a range per shard file: where its rows start in this file, its windows, its first
                    sections[aid] = pieces[0]
                    for count, rows, first in pieces[1]:
                        ranges.append([aid, row, count, first])
                        row += rows
                at += stats.n
                merged.merge(stats)
            size, crc = fh.size, fh.crc32c
        self.out.append(CompactedShard(uri, at, size, crc, _stats_doc(merged), ranges, sections or None))
        self.pending, self.held = [], 0


def compact(storage: Storage, bucket: str, dataset: str, target_bytes: int, layout: Layout | None = None
            ) -> Result:
    layout = layout or Layout()
    prefix = gs(bucket, dataset_prefix(layout, dataset))
    found = snapshots.latest(storage, bucket, layout, dataset)
    prev_uri, prev = found if found else (None, None)
    held = snapshots.read_shards(storage, prev) if prev else []
    seq = (prev.seq if prev else 0) + 1
    folder = snapshots.attempt_prefix(bucket, layout, dataset, seq)
    fence_uri = folder + "fence"
    storage.write_bytes(fence_uri, b"{}", content_type="application/json")
    fence = storage.list_objects(fence_uri)[0].generation
    listing = retractions.list_dataset(storage, prefix)
    retracted = {m.uri.rsplit("/", 2)[-2] for m, _ in listing.retracted}
    have = {r[0] for s in held for r in s.ranges}
    new = [m for m in listing.live if m.generation < fence and m.uri.rsplit("/", 2)[-2] not in have]
    keep, redo = [], []
    for shard in held:
        hit = any(r[0] in retracted for r in shard.ranges)
        in_place = not shard.uri.startswith(gs(bucket, layout.compacted_prefix))
        if in_place:
            if not hit:
                keep.append(shard)
        elif hit or shard.bytes < target_bytes // 2:
            redo.append(shard)
        else:
            keep.append(shard)
    dropped = len({r[0] for s in held for r in s.ranges if r[0] in retracted})  # arrivals (one range per file each)
    if not new and not redo and not dropped:
        storage.delete(fence_uri)
        return Result(None, len(held), detail="nothing to compact")

    shape = prev.shape if prev else None
    writer = _Writer(storage, folder, target_bytes)
    in_place: list[CompactedShard] = []
    arrivals_prefix = prefix

    # One kind per snapshot: series shards (rows, windowed when read) or instance shards; an arrival of the other
    # kind stays in the delta, as one of another shape does.
    kind: bool | None = any(x.series is not None for x in held) if held else None

    def copied(manifest: Manifest, manifest_uri: str) -> list[bytes]:
        uris = [resolve(manifest_uri, s.uri) for s in manifest.shards]
        return list(pool.map(_checked, [storage] * len(uris), uris, [s.bytes for s in manifest.shards],
                             [s.crc32c for s in manifest.shards]))

    with ThreadPoolExecutor(READ_WORKERS) as pool:
        # Rewritten shards: their live arrivals' records (whole arrivals) and each arrival's own statistics.
        for shard in redo:
            live = [r for r in shard.ranges if r[0] not in retracted]
            if shard.series is not None:  # series: each live arrival's own shard files again, whole
                aids = list(dict.fromkeys(r[0] for r in live))
                uris = [f"{arrivals_prefix}{a}/manifest.json" for a in aids]
                manifests = pool.map(lambda u: _read_manifest(storage, u), uris)
                for aid, uri, manifest in zip(aids, uris, manifests, strict=True):
                    writer.add(aid, copied(manifest, uri), _stats_of(manifest),
                               _series_pieces(manifest))
                continue
            data = _checked(storage, shard.uri, shard.bytes, shard.crc32c)
            record = len(data) // shard.count
            manifests = pool.map(lambda r: _read_manifest(storage, f"{arrivals_prefix}{r[0]}/manifest.json"), live)
            for (aid, start, count, _), manifest in zip(live, manifests, strict=True):
                writer.add(aid, [data[start * record:(start + count) * record]], _stats_of(manifest))
        manifests = list(pool.map(lambda m: _read_manifest(storage, m.uri), new))
        for listed, manifest in zip(new, manifests, strict=True):
            is_series = manifest.series is not None
            if kind is None:
                kind = is_series
            elif kind != is_series:
                continue  # the other kind than the snapshot holds: it stays in the delta
            if shape is None:
                shape = list(manifest.shape)
            elif list(manifest.shape) != list(shape):
                continue  # a shape the dataset's snapshot does not hold: it stays in the delta
            size = sum(s.bytes for s in manifest.shards)
            aid = manifest.arrival_id
            sections = {aid: _series_section(manifest)} if is_series else None
            if size >= target_bytes // 2:
                first, stats = 0, _stats_doc(_stats_of(manifest))
                for s in manifest.shards:
                    in_place.append(CompactedShard(resolve(listed.uri, s.uri), s.count, s.bytes, s.crc32c,
                                                   stats if first == 0 else {"count": 0}, [[aid, 0, s.count, first]],
                                                   sections))
                    first += s.count
                continue
            writer.add(aid, copied(manifest, listed.uri), _stats_of(manifest),
                       _series_pieces(manifest) if is_series else None)
        writer.flush()
    shards = keep + in_place + writer.out
    if not shards or shape is None:
        storage.delete(fence_uri)
        return Result(None, 0, detail="no live arrivals")
    part_uris = []
    for i, part in enumerate(snapshots.split_parts(shards)):
        uri = f"{folder}part-{i:05d}.json"
        storage.write_bytes(uri, snapshots.part_json(part), content_type="application/json")
        part_uris.append(uri)
    snap = Snapshot(dataset=dataset, seq=seq, fence=fence, shape=list(shape), arrivals_prefix=arrivals_prefix,
                    parts=part_uris, count=sum(r[2] for s in shards for r in s.ranges),
                    arrivals=len({r[0] for s in shards for r in s.ranges}), shards=len(shards), previous=prev_uri)
    uri = snapshots.snapshot_uri(bucket, layout, dataset, seq)
    if not storage.create(uri, snap.to_json(), content_type="application/json"):
        return Result(None, len(held), detail=f"another compaction created {uri} first")
    storage.delete(fence_uri)  # its generation is in the snapshot; a folder left with one lost or crashed
    return Result(uri, len(shards), len(writer.out), snap.arrivals, dropped, "compacted")


def collect(storage: Storage, bucket: str, dataset: str, named_by_unfinished: set[int],
            layout: Layout | None = None, now: float | None = None, grace_s: float = snapshots.GRACE_S) -> list[str]:
    """Applies the collection rule (``landfall.core.artifacts.snapshots``): deletes the collectable snapshots, then
    every object under ``compacted/<D>/`` that no kept snapshot names, in the folders of attempts numbered
    at most the newest snapshot's ``seq`` (the deleted snapshots' own shards and parts, and what lost races
    and crashes left; an attempt numbered past it may still be running). Returns what it deleted."""
    layout = layout or Layout()
    now = time.time() if now is None else now
    every = [snapshots.read(storage, u) for u in snapshots.listed(storage, bucket, layout, dataset)]
    if not every:
        return []
    gone = {s.seq for s in snapshots.collectable(every, named_by_unfinished, now, grace_s)}
    kept = [s for s in every if s.seq not in gone]
    named = {u for s in kept for u in snapshots.named_objects(storage, s)}
    deleted = [snapshots.snapshot_uri(bucket, layout, dataset, seq) for seq in sorted(gone)]
    storage.delete_many(deleted, READ_WORKERS)  # the snapshots first: once they are gone nothing names their objects
    prefix = gs(bucket, f"{layout.compacted_prefix}{dataset}/")
    newest = every[-1].seq
    doomed = [u for u in storage.list(prefix) if u not in named
              and _attempt_seq(u[len(prefix):]) is not None and _attempt_seq(u[len(prefix):]) <= newest]
    storage.delete_many(doomed, READ_WORKERS)  # a first collection of an old dataset: thousands
    return deleted + doomed


def _attempt_seq(rest: str) -> int | None:
    head = rest.split("/", 1)[0].split("-", 1)[0]
    return int(head) if head.isdigit() else None
