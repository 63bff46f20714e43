"""Ranged conversion: ``N`` tasks convert one source object together, each a disjoint share of it.

Task ``i`` of ``N`` (a Cloud Run job task, or a local process) converts its share (``landfall.arrival.ranges``
says which, per format) into shards and writes a *part record*; the last task to finish commits the
manifest. Objects, for an arrival ``gs://B/incoming/<dataset>/...`` (``T`` = ``gs://B/tmp/<dataset>/<arrival-id>/ranged-<N>``,
the converter's ``tmp/`` convention, swept by the bucket's lifecycle rule; ``<out>/_tmp-ranged-<N>`` when
an ``out`` folder is given, as for ``landfall convert``):

- ``T/t<iiiii>/part-<kkkkk>.tfrecord``: task i's shards, named deterministically, so a retried task
  rewrites only its own, with the same bytes: the output is the same whichever tasks were retried.
- ``T/task-<iiiii>.json``: task i's part record (``landfall.ranged-part/v1``): its shards with the
  count, size and CRC32C the manifest lists, its running statistics (count, mean, M2, min, max per
  feature), dropped rows, the CSV decision. Written after its shards.
- ``T/rejected.json``: written create-only by the first task that finds bad data; the other tasks stop
  when they see it (checked before converting and at each shard). It names the configuration: a marker
  left by a run under another one (say ``LANDFALL_DROP_NONFINITE`` since changed) is stale and replaced.
- ``<out>/part-0000i-of-0000M.tfrecord`` + ``manifest.json``: the committed arrival, as the in-process
  converter writes it (``landfall.manifest/v1``: same count, statistics merged as the in-process converter
  merges its batches, shards in task order then file order).

**One committer.** After writing its part record, a task lists the part records; when all ``N`` exist
(for this source generation and configuration) it merges them, moves the shards to their final names
and writes the manifest create-only. Several tasks finishing together may all try; the one whose create
succeeds has committed and calls ``on_committed(manifest)`` (publishing the training request: the
caller's business); the others see ``AlreadyExists`` and stop. A task that starts after the commit (a
retry of a committer that died before ``on_committed`` returned) calls ``on_committed`` again, which is
idempotent (deterministic request ids), as a redelivered event is in-process.

**Retries.** A task that dies before its part record is written leaves at most some of its own shards,
which its retry rewrites with the same bytes; a task retried after writing its part record (it died while
committing or publishing) does not convert again, it goes straight to the commit. A committer that dies
between moving shards and writing the manifest is repeated by its retry: a shard already at its final name
with the part's size (and CRC32C, on Cloud Storage) counts as moved. So the manifest is the same,
timestamps aside, whichever tasks were retried.

**Bad data** found by any task (or by the committer: no instances at all, an index column whose ranges do
not join up) rejects the whole arrival once: the rejection record (``landfall.core.artifacts.rejections``,
create-only) and ``T/rejected.json``; no manifest, ``on_committed`` is never called. Errors keep their
classes: ``BadInput`` is recorded and returned (``TaskResult.outcome == "rejected"``), ``TemporaryError``
raises (Cloud Run retries the task), a generation that is gone is ``superseded``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from typing import Any, Literal

from landfall.arrival import formats, ranges, series
from landfall.arrival import ranged_parts as parts
from landfall.arrival.config import ConverterConfig
from landfall.arrival.converter import Decoder, ShardWriter, prefetched
from landfall.arrival.ranged_parts import Job
from landfall.core.artifacts import rejections
from landfall.core.contracts import layout
from landfall.core.contracts.layout import Layout
from landfall.core.contracts.messages import Manifest, Rejection
from landfall.core.errors import BadInput, Invalid, NotFound
from landfall.core.services.storage import Storage, is_gs, join

log = logging.getLogger("landfall.arrival.ranged")

Outcome = Literal["committed", "part_written", "duplicate", "rejected", "stopped", "superseded"]


@dataclasses.dataclass(frozen=True)
class TaskResult:
    """``committed``: this task wrote the manifest (and called ``on_committed``); ``manifest``: the
    arrival's manifest when this task committed it or found it committed; ``outcome`` says which."""

    index: int
    count: int
    outcome: Outcome
    committed: bool = False
    manifest: Manifest | None = None
    instances: int = 0  # this task's share, kept
    rejection: Rejection | None = None


def run_task(storage: Storage, cfg: ConverterConfig, *, bucket: str, name: str, generation: int, index: int,
             count: int, dataset: str | None = None, out: str | None = None,
             on_committed: Callable[[Manifest], Any] | None = None, lay: Layout | None = None) -> TaskResult:
    """Task ``index`` of ``count``: converts its share of ``gs://bucket/name#generation`` (``bucket=""``:
    ``name`` is a local path and ``generation`` its ``Storage.stat`` generation), then commits if last.

    ``out=None``: the arrival's own ``tfrecords/`` folder (the name must be an arrival); otherwise that
    folder (``landfall convert``). Raises ``TemporaryError`` (retry the task); everything else returns.
    """
    if not 0 <= index < count:
        raise ValueError(f"task index {index} is not in 0..{count - 1}")
    lay = lay or Layout.load()
    try:
        job = parts.resolve(bucket, name, generation, count, dataset, out, lay)
    except BadInput as exc:
        fallback = parts.Job(layout.gs(bucket, name), bucket, name, generation, layout.dataset_of(name, lay),
                             layout.arrival_id(name, generation), "", "", count, True)
        return TaskResult(index, count, "rejected",
                          rejection=_reject(storage, cfg, fallback, exc, lay, marker=False))
    context = {"component": "ranged", "arrival_id": job.arrival_id, "dataset": job.dataset}
    try:
        existing = _manifest(storage, job)
        if existing is not None:
            if on_committed is not None:
                on_committed(existing)
            return TaskResult(index, count, "duplicate", manifest=existing)
        if parts.rejected(storage, cfg, job) is not None:
            return TaskResult(index, count, "stopped")
        info = _stat(storage, job)
        # A retry of a task that wrote its part (it died committing or publishing) does not convert again.
        part = parts.part_record(storage, cfg, job, index) or _convert(storage, cfg, job, info, index)
        if part is None:
            log.info("task %d of %d stopped: the arrival was rejected", index, count, extra=context)
            return TaskResult(index, count, "stopped")
        manifest = parts.maybe_commit(storage, cfg, job, info)
    except NotFound as exc:
        log.warning("%s generation %s is gone (%s); task %d stops", name, generation, exc, index, extra=context)
        return TaskResult(index, count, "superseded")
    except BadInput as exc:
        return TaskResult(index, count, "rejected", rejection=_reject(storage, cfg, job, exc, lay))
    fields = {"task": index, "tasks": count, "instances": part["count"], "shards": len(part["shards"])}
    if manifest is None:
        log.info("task %d of %d wrote its part", index, count, extra={**context, "fields": fields})
        return TaskResult(index, count, "part_written", instances=part["count"])
    log.info("task %d of %d committed %s: %d instances in %d shards", index, count, job.manifest, manifest.count,
             len(manifest.shards), extra={**context, "fields": {**fields, "manifest": job.manifest}})
    if on_committed is not None:
        on_committed(manifest)
    parts.cleanup(storage, job)
    return TaskResult(index, count, "committed", True, manifest, part["count"])


def _stat(storage: Storage, job: Job) -> Any:
    info = storage.stat(job.source, job.generation if is_gs(job.source) else None)
    if info.generation != job.generation:
        raise NotFound(f"{job.source} is now generation {info.generation}")
    return info


def _manifest(storage: Storage, job: Job) -> Manifest | None:
    """The committed manifest, if any (one that cannot be read rejects the arrival, as in-process)."""
    try:
        return Manifest.from_json(storage.read_bytes(job.manifest), job.manifest)
    except NotFound:
        return None
    except Invalid as exc:
        raise BadInput("invalid_manifest", f"the existing manifest cannot be read: {exc}") from None


def _convert(storage: Storage, cfg: ConverterConfig, job: Job, info: Any, index: int) -> dict[str, Any] | None:
    """Converts the share into ``T/t<index>/`` and writes the part record; ``None`` if the arrival was
    rejected meanwhile (the shards written are removed)."""
    if cfg.series:
        return _convert_series(storage, cfg, job, info, index)
    fmt = formats.format_of(job.name)
    writer = ShardWriter(storage, join(job.tmp, f"t{index:05d}"), cfg)
    try:
        with storage.open_read(job.source, job.generation if is_gs(job.source) else None) as fh:
            share = ranges.share(fmt, fh, info.size, cfg, index, job.count)
            decoder = Decoder(cfg, share.first_row or 0)
            try:
                shards = 0
                for kept in prefetched(decoder.chunks(share.chunks)):
                    writer.write(kept)
                    if len(writer.done) > shards:
                        shards = len(writer.done)
                        if parts.rejected(storage, cfg, job) is not None:
                            writer.abort()
                            return None
            except BadInput as exc:
                counted = "" if share.first_row is not None else ", rows counted from the range's start"
                raise BadInput(exc.reason, f"{exc.detail} (task {index} of {job.count}: {share.where}{counted})") \
                    from None
        done = writer.close()
    except BaseException:
        writer.abort()
        raise
    part = {
        "schema": parts.PART_SCHEMA, "task": index, "tasks": job.count,
        "source": {"uri": job.source, "generation": job.generation, "size": info.size},
        "config": parts.fingerprint(cfg), "seen": decoder.seen, "count": decoder.kept, "dropped": decoder.dropped,
        "shards": [{"tmp": uri, "count": n, "bytes": size, "crc32c": crc} for uri, n, size, crc in done],
        "stats": decoder.stats.to_dict(), "csv": share.csv,
        "profile": decoder.sketch.to_dict() if decoder.sketch is not None else None,
        "index_first": share.index.first if share.index is not None else None,
    }
    storage.write_bytes(job.part(index), json.dumps(part, sort_keys=True).encode(), content_type="application/json")
    return part


def _convert_series(storage: Storage, cfg: ConverterConfig, job: Job, info: Any, index: int) -> dict[str, Any] | None:
    """A series dataset's share (``landfall.arrival.series.convert_share``): its rows, windowed from its first row,
    with a look of ``length - 1`` rows past its end so every window that starts in it is whole."""
    try:
        done = series.convert_share(storage, cfg, job.source, job.generation if is_gs(job.source) else None, info.size,
                                    join(job.tmp, f"t{index:05d}"), index, job.count,
                                    stop=lambda: parts.rejected(storage, cfg, job) is not None)
    except BadInput as exc:
        raise BadInput(exc.reason, f"{exc.detail} (task {index} of {job.count})") from None
    if done is None:
        return None
    writer, section = done
    part = {
        "schema": parts.PART_SCHEMA, "task": index, "tasks": job.count,
        "source": {"uri": job.source, "generation": job.generation, "size": info.size},
        "config": parts.fingerprint(cfg), "seen": writer.rows, "count": sum(n for _, n, _, _ in writer.done),
        "dropped": writer.dropped_nonfinite,
        "shards": [{"tmp": uri, "count": n, "bytes": size, "crc32c": crc} for uri, n, size, crc in writer.done],
        "stats": writer.stats.to_dict(), "csv": None, "index_first": None, "series": section,
        "profile": writer.sketch.to_dict() if writer.sketch is not None else None,
    }
    storage.write_bytes(job.part(index), json.dumps(part, sort_keys=True).encode(), content_type="application/json")
    return part


def _reject(storage: Storage, cfg: ConverterConfig, job: Job, exc: BadInput, lay: Layout,
            marker: bool = True) -> Rejection:
    """Records the rejection once, whichever tasks find bad data, and marks it for the other tasks."""
    rejection = Rejection(stage="arrival", reason=exc.reason, detail=exc.detail, dataset=job.dataset or None,
                          source={"bucket": job.bucket, "name": job.name, "generation": job.generation})
    context = {"arrival_id": job.arrival_id, "component": "ranged"}
    if job.official:
        rejections.record(rejection, job.source, storage=storage, lay=lay, bucket=job.bucket, key=job.arrival_id,
                          context=context, once=True)
    if marker and parts.mark_rejected(storage, cfg, job, json.loads(rejection.to_json())) and not job.official:
        log.error("rejected %s: %s: %s", job.source, exc.reason, exc.detail, extra=context)
    return rejection
