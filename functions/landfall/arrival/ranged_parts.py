"""The parts of a ranged conversion (``landfall.arrival.ranged``): where they go, and the commit that merges them.

A part record (``landfall.ranged-part/v1``, ``T/task-<iiiii>.json``) is what task i converted: its shards
(temporary URI, count, bytes, CRC32C), its rows seen, kept and dropped, its running statistics
(``RunningStats.to_dict``: count, mean, M2, min, max per feature, exact in JSON), the CSV decision, and for a
headerless CSV index column the first index its range held. It names the source generation and the
configuration that shape the output (``fingerprint``): a record of another generation or configuration is
stale, never merged. The commit merges statistics with ``RunningStats.merge`` (Chan et al., as the in-process
converter merges its batches), moves the shards to ``part-0000i-of-0000M`` in task order, and writes the
manifest create-only. A series dataset's part also carries its share's segments, rows numbered from its first
(``series``): the commit numbers them after the earlier parts' stored rows (``landfall.arrival.series.merge_parts``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from landfall import __version__
from landfall.arrival import screen, series
from landfall.arrival.commit import manifest_metadata
from landfall.arrival.config import ConverterConfig
from landfall.arrival.stats import RunningStats
from landfall.core.contracts import layout
from landfall.core.contracts.layout import Layout
from landfall.core.contracts.messages import Manifest, Shard, Source
from landfall.core.errors import BadInput, NotFound, TemporaryError
from landfall.core.quality.profile import Profile
from landfall.core.services.storage import Storage, join

PART_SCHEMA = "landfall.ranged-part/v1"
MOVERS = 8  # shards moved at once by the committer


@dataclasses.dataclass(frozen=True)
class Job:
    """Where one ranged conversion reads and writes."""

    source: str  # gs://B/name or a local path
    bucket: str
    name: str
    generation: int
    dataset: str
    arrival_id: str
    out: str
    tmp: str
    count: int
    official: bool  # an arrival of the bucket layout: rejections go to rejected/ too

    @property
    def manifest(self) -> str:
        return join(self.out, layout.MANIFEST)

    @property
    def marker(self) -> str:
        return join(self.tmp, "rejected.json")

    def part(self, index: int) -> str:
        return join(self.tmp, f"task-{index:05d}.json")


def resolve(bucket: str, name: str, generation: int, count: int, dataset: str | None, out: str | None,
            lay: Layout) -> Job:
    """An arrival (``out=None``: the bucket layout) or any object or local path with an ``out`` folder."""
    source = layout.gs(bucket, name) if bucket else name
    if out is None:
        if not bucket:
            raise ValueError("a local source needs an out folder")
        arrival = layout.parse_arrival(bucket, name, generation, lay)
        dataset, aid = dataset or arrival.dataset, arrival.arrival_id
        out = layout.gs(bucket, layout.shards_prefix(lay, dataset, aid))
        tmp = layout.gs(bucket, f"tmp/{dataset}/{aid}/ranged-{count}")
        return Job(source, bucket, name, generation, dataset, aid, out, tmp, count, True)
    aid = out.rstrip("/").rsplit("/", 1)[-1]
    dataset = dataset or name.rstrip("/").rsplit("/", 1)[-1].split(".", 1)[0]
    return Job(source, bucket, name, generation, dataset, aid, out, join(out, f"_tmp-ranged-{count}"), count, False)


def fingerprint(cfg: ConverterConfig) -> dict[str, Any]:
    """What shapes the output: parts written under another configuration are not merged."""
    out = {"shape": list(cfg.shape), "shard_target_bytes": cfg.shard_target_bytes, "csv_header": cfg.csv_header,
           "drop_nonfinite": cfg.drop_nonfinite, "npz_array": cfg.npz_array}
    if cfg.series:  # a series dataset's windows and reading rules
        out["series"] = [cfg.series_time_column, list(cfg.series_channels), list(cfg.series_drop_columns),
                         cfg.series_max_gap, cfg.window_stride, cfg.series_duplicate_times]
    return out


def rejected(storage: Storage, cfg: ConverterConfig, job: Job) -> dict[str, Any] | None:
    """The rejection marker's record (``{"rejection", "generation", "config"}``) if this source generation
    under this configuration was rejected; one left by a run under another configuration does not count."""
    try:
        marker = json.loads(storage.read_bytes(job.marker))
    except (NotFound, ValueError):
        return None
    if not isinstance(marker, dict) or marker.get("generation") != job.generation \
            or marker.get("config") != fingerprint(cfg):
        return None
    return marker


def mark_rejected(storage: Storage, cfg: ConverterConfig, job: Job, rejection: dict[str, Any]) -> bool:
    """Writes the marker create-only (a stale one is replaced); whether this call wrote it."""
    data = json.dumps({"rejection": rejection, "generation": job.generation, "config": fingerprint(cfg)},
                      sort_keys=True).encode()
    if not storage.create(job.marker, data, content_type="application/json"):
        if rejected(storage, cfg, job) is not None:
            return False
        storage.write_bytes(job.marker, data, content_type="application/json")
    return True


def part_record(storage: Storage, cfg: ConverterConfig, job: Job, index: int) -> dict[str, Any] | None:
    """Task ``index``'s part record if it is there and of this source generation and configuration."""
    try:
        part = json.loads(storage.read_bytes(job.part(index)))
    except (NotFound, ValueError):  # not written yet, or removed by a committer
        return None
    if (part.get("schema") != PART_SCHEMA or part["task"] != index or part["tasks"] != job.count
            or part["source"]["generation"] != job.generation or part["config"] != fingerprint(cfg)):
        return None  # a stale part: its task overwrites it
    return part


def complete_parts(storage: Storage, cfg: ConverterConfig, job: Job) -> list[dict[str, Any]] | None:
    """All ``N`` part records of this source generation and configuration, in task order, or ``None``."""
    names = {join(job.tmp, uri.rsplit("/", 1)[-1]) for uri in storage.list(job.tmp.rstrip("/") + "/", ".json")}
    if any(job.part(i) not in names for i in range(job.count)):
        return None
    parts = [part_record(storage, cfg, job, i) for i in range(job.count)]
    return None if any(p is None for p in parts) else parts  # type: ignore[return-value]


def merge(parts: list[dict[str, Any]], features: int) -> tuple[RunningStats, int, int]:
    """Statistics, kept and dropped instances of all parts (and the index column's joins, for CSV)."""
    stats = RunningStats(features)
    rows = 0
    for part in parts:
        if part["index_first"] is not None and part["index_first"] != rows:
            raise BadInput("wrong_column_count", f"the first column counts rows like an index, but row {rows} "
                           f"holds {part['index_first']}: the CSV has one column too many")
        rows += part["seen"]
        stats.merge(RunningStats.from_dict(part["stats"]))
    kept, dropped = sum(p["count"] for p in parts), sum(p["dropped"] for p in parts)
    if kept == 0:
        raise BadInput("no_instances", "no instances left to convert" if dropped else "the file holds no instances")
    return stats, kept, dropped


def maybe_commit(storage: Storage, cfg: ConverterConfig, job: Job, info: Any) -> Manifest | None:
    """Commits when all parts exist; ``None`` when some are missing or another task committed."""
    parts = complete_parts(storage, cfg, job)
    if parts is None or storage.exists(job.manifest):
        return None
    section = series.merge_parts(parts, cfg) if cfg.series else None  # landfall.arrival.series
    stats, kept, dropped = merge(parts, cfg.features)
    checks = screen.screen(storage, job.out, cfg, merged_profile(parts, cfg.features, stats))
    pending = [s for part in parts for s in part["shards"]]
    owners = [job.part(part["task"]) for part in parts for _ in part["shards"]]
    finals = [join(job.out, layout.shard_name(i, len(pending))) for i in range(len(pending))]
    with ThreadPoolExecutor(MOVERS) as pool:
        list(pool.map(lambda args: place(storage, *args), zip(pending, finals, owners, strict=True)))
    manifest = Manifest(
        dataset=job.dataset, arrival_id=job.arrival_id,
        source=Source(bucket=job.bucket, name=job.name, generation=info.generation, size=info.size,
                      crc32c=info.crc32c),
        shape=list(cfg.shape), count=kept,
        shards=[Shard(uri=f, count=s["count"], bytes=s["bytes"], crc32c=s["crc32c"]) for s, f in zip(pending, finals,
                                                                                                    strict=True)],
        stats=stats.result(), dropped_nonfinite=dropped, converter_version=__version__, csv=_csv(parts),
        spec_generation=cfg.spec_generation, checks=checks, series=section,
    )
    if not storage.create(job.manifest, manifest.to_json().encode(), content_type="application/json",
                          metadata=manifest_metadata(manifest)):
        return None  # another task committed the same arrival
    return manifest


def merged_profile(parts: list[dict[str, Any]], features: int, stats: RunningStats) -> Profile | None:
    """The arrival's profile: its tasks' profiles merged (fixed buckets: exact in any order), with the merged moments;
    ``None`` when the tasks did not profile (``LANDFALL_PROFILE=false``)."""
    if any(part.get("profile") is None for part in parts):
        return None
    out = Profile(features)
    for part in parts:
        out.merge(Profile.from_dict(part["profile"], "a ranged part's profile"))
    return out.finish(stats.to_dict())


def _csv(parts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The CSV decision (every task made the same) with the repeated header rows of all tasks."""
    csv = parts[0]["csv"]
    if csv is None or "repeated_headers" not in csv:
        return csv
    return {**csv, "repeated_headers": sum((p["csv"] or {}).get("repeated_headers", 0) for p in parts)}


def place(storage: Storage, shard: dict[str, Any], final: str, owner: str) -> None:
    """Moves a shard to its final name; already moved (a committer's retry, a concurrent one) is fine.

    A shard that is nowhere (swept from ``tmp/`` by the lifecycle rule, its tasks run that far apart) voids
    its part record ``owner``, so that task converts its share again when retried or run again."""
    with contextlib.suppress(NotFound, FileNotFoundError):
        storage.move(shard["tmp"], final)
    try:
        info = storage.stat(final)
    except NotFound:
        storage.delete(owner)
        raise TemporaryError(f"{shard['tmp']} is gone and {final} does not exist; its task must run again") \
            from None
    if info.size != shard["bytes"] or (info.crc32c is not None and info.crc32c != shard["crc32c"]):
        raise TemporaryError(f"{final} holds {info.size} bytes (crc32c {info.crc32c}), not the part's "
                             f"{shard['bytes']} ({shard['crc32c']}): retry")


def cleanup(storage: Storage, job: Job) -> None:
    """Removes the part records (the lifecycle rule would sweep them anyway)."""
    with contextlib.suppress(Exception):
        for uri in storage.list(job.tmp.rstrip("/") + "/"):
            storage.delete(uri)
        for i in range(job.count):
            storage.remove_empty_dir(join(job.tmp, f"t{i:05d}"))
        storage.remove_empty_dir(job.tmp)
