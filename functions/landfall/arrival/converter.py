"""Converts one input file into TFRecord shards and a manifest (pure pipeline over ``Storage``).

Shards are streamed to attempt-private temporary names, then moved to their final
``part-0000i-of-0000N.tfrecord`` names once N is known, and the manifest is written last with a
create-only precondition. A crash anywhere before the manifest leaves nothing a reader can see;
the retry redoes the work (the output is deterministic, so final shard names are simply rewritten).
Temporary objects of a crashed attempt are swept by the bucket's lifecycle rule on ``tmp/``. Moving the shards and
the create-only manifest are ``landfall.arrival.commit``'s, shared with series arrivals; the statistics are
``landfall.arrival.stats.RunningStats`` (imported here too, where older code looks for it).
"""

from __future__ import annotations

import contextlib
import queue
import threading
import uuid
from collections.abc import Callable, Iterator

import numpy as np

from landfall import __version__
from landfall.arrival import commit, formats, screen, series
from landfall.arrival.config import ConverterConfig
from landfall.arrival.stats import RunningStats
from landfall.core.contracts import records
from landfall.core.contracts.messages import Manifest, Source
from landfall.core.errors import BadInput
from landfall.core.quality.profile import Profile
from landfall.core.services.storage import Storage, join

Progress = Callable[[int, int], None]  # (instances so far, shards so far)


def finite_rows(chunk: np.ndarray, cfg: ConverterConfig, seen: int) -> tuple[np.ndarray, int]:
    """Returns the chunk (without non-finite rows if configured) and how many rows were dropped."""
    ok = np.isfinite(chunk).all(axis=(1, 2))
    if ok.all():
        return chunk, 0
    if not cfg.drop_nonfinite:
        row = seen + int(np.argmin(ok))
        raise BadInput("non_finite", f"instance {row} holds NaN, Inf or a missing value (an empty cell, #N/A, NA ...) "
                       "(set LANDFALL_DROP_NONFINITE=true to drop such instances)")
    return chunk[ok], int((~ok).sum())


class ShardWriter:
    """Writes framed records into temporary shards of about ``target_bytes`` each."""

    def __init__(self, storage: Storage, tmp_prefix: str, cfg: ConverterConfig):
        self.storage = storage
        self.tmp_prefix = tmp_prefix
        self.framer = records.RecordFramer(cfg.shape)
        self.per_shard = max(1, cfg.shard_target_bytes // self.framer.record_bytes)
        self.done: list[tuple[str, int, int, str]] = []  # (tmp uri, count, bytes, crc32c)
        self._stack = contextlib.ExitStack()
        self._writer = None
        self._count = 0
        self.written = 0

    def write(self, batch: np.ndarray) -> None:
        start = 0
        while start < len(batch):
            if self._writer is None:
                uri = join(self.tmp_prefix, f"part-{len(self.done):05d}{records.SHARD_SUFFIX}")
                self._writer = self._stack.enter_context(self.storage.open_write(uri))
                self._uri, self._count = uri, 0
            take = min(len(batch) - start, self.per_shard - self._count)
            self._writer.write(self.framer.frame(batch[start : start + take]))
            self._count += take
            self.written += take
            start += take
            if self._count == self.per_shard:
                self._close_current()

    def _close_current(self) -> None:
        writer = self._writer
        self._stack.close()
        self._stack = contextlib.ExitStack()
        self._writer = None
        assert writer is not None
        self.done.append((self._uri, self._count, writer.size, writer.crc32c))

    def close(self) -> list[tuple[str, int, int, str]]:
        if self._writer is not None:
            self._close_current()
        return self.done

    def abort(self) -> None:
        current = self._uri if self._writer is not None else None  # the shard being written, if any
        with contextlib.suppress(Exception):
            self._stack.close()
        for uri in [u for u, *_ in self.done] + ([current] if current else []):
            with contextlib.suppress(Exception):
                self.storage.delete(uri)
        self.storage.remove_empty_dir(self.tmp_prefix)


def convert(
    source_uri: str,
    out_prefix: str,
    dataset: str,
    cfg: ConverterConfig,
    storage: Storage,
    *,
    arrival_id: str | None = None,
    generation: int | None = None,
    tmp_prefix: str | None = None,
    progress: Progress | None = None,
) -> Manifest:
    """Converts ``source_uri`` (gs:// or local) into shards + ``manifest.json`` under ``out_prefix``.

    Raises ``BadInput`` for data that cannot be converted (nothing is left visible), and
    ``TemporaryError`` when storage is unavailable.
    """
    if cfg.series:  # a series dataset: stored as its rows, windowed when read
        return series.convert(source_uri, out_prefix, dataset, cfg, storage, arrival_id=arrival_id,
                              generation=generation, tmp_prefix=tmp_prefix)
    fmt = formats.format_of(source_uri)
    info = storage.stat(source_uri, generation)
    writer = ShardWriter(storage, tmp_prefix or join(out_prefix, f"_tmp-{uuid.uuid4().hex[:12]}"), cfg)
    decoder = Decoder(cfg)
    try:
        with storage.open_read(source_uri, generation) as fh:
            reading = formats.read(fmt, fh, info.size, cfg)
            for kept in prefetched(decoder.chunks(reading.chunks)):
                writer.write(kept)
                if progress:
                    progress(writer.written, len(writer.done))
        parts = writer.close()
        if decoder.kept == 0:
            raise BadInput("no_instances",
                           "no instances left to convert" if decoder.dropped else "the file holds no instances")
        checks = screen.screen(storage, out_prefix, cfg, decoder.profile())
    except BaseException:
        writer.abort()
        raise
    shards = commit.publish_shards(storage, parts, out_prefix, writer.tmp_prefix)
    bucket, _, name = source_uri[5:].partition("/") if source_uri.startswith("gs://") else ("", "", source_uri)
    manifest = Manifest(
        dataset=dataset,
        arrival_id=arrival_id or out_prefix.rstrip("/").rsplit("/", 1)[-1],
        source=Source(bucket=bucket, name=name, generation=info.generation, size=info.size, crc32c=info.crc32c),
        shape=list(cfg.shape),
        count=decoder.kept,
        shards=shards,
        stats=decoder.stats.result(),
        dropped_nonfinite=decoder.dropped,
        converter_version=__version__,
        csv=reading.csv,
        spec_generation=cfg.spec_generation,
        checks=checks,
    )
    return commit.commit_manifest(storage, join(out_prefix, "manifest.json"), manifest)


class Decoder:
    """Checks finiteness and gathers the statistics of decoded chunks; counts what it kept and dropped.

    ``chunks`` runs in the prefetch thread: decoding, the finiteness check and the statistics overlap with
    framing and writing in the caller's thread (numpy releases the GIL).
    """

    def __init__(self, cfg: ConverterConfig, first_row: int = 0):
        self.cfg = cfg
        self.stats = RunningStats(cfg.features)
        self.sketch = Profile(cfg.features) if cfg.profile else None  # landfall.core.quality.profile
        self.first_row = first_row  # of the file, for messages: a ranged task starts further in
        self.seen = 0
        self.dropped = 0

    @property
    def kept(self) -> int:
        return self.seen - self.dropped

    def profile(self) -> Profile | None:
        """The arrival's profile with its exact moments, once every chunk was read (``None``: not profiling)."""
        return None if self.sketch is None else self.sketch.finish(self.stats.to_dict())

    def chunks(self, decoded: Iterator[np.ndarray]) -> Iterator[np.ndarray]:
        for chunk in _checked(decoded):
            kept, lost = chunk, 0
            if not self.stats.update(chunk):
                kept, lost = finite_rows(chunk, self.cfg, self.first_row + self.seen)
                self.stats.update(kept)
                if self.sketch is not None:
                    self.sketch.dropped(chunk[~np.isfinite(chunk).all(axis=(1, 2))])
            if self.sketch is not None:
                self.sketch.update(kept)
            self.seen += len(chunk)
            self.dropped += lost
            yield kept


def prefetched(chunks: Iterator[np.ndarray], depth: int = 2) -> Iterator[np.ndarray]:
    """Decodes the next chunks in a background thread while the caller frames and writes this one.

    At most ``depth`` chunks wait in the queue, so memory stays bounded. Errors are re-raised here.
    """
    done = object()
    slots: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def offer(item: object) -> bool:
        """Queues ``item`` unless the consumer stopped (it may stop early and never take it)."""
        while not stop.is_set():
            try:
                slots.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for chunk in chunks:
                if not offer(chunk):
                    return
            offer(done)
        except BaseException as exc:  # handed to the consumer
            offer(exc)

    worker = threading.Thread(target=produce, name="landfall-decode", daemon=True)
    worker.start()
    try:
        while True:
            item = slots.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        worker.join(timeout=5)


def _checked(chunks: Iterator[np.ndarray]) -> Iterator[np.ndarray]:
    """Running out of memory while decoding is temporary: the platform retries on a fresh instance.

    Readers turn their own errors into ``BadInput`` and let storage errors through; anything else that
    escapes is a bug and propagates as it is.
    """
    try:
        yield from chunks
    except MemoryError as exc:  # pyarrow.ArrowMemoryError is one too
        raise formats.out_of_memory(exc) from exc
