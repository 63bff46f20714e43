"""Streaming readers: each turns an input file into float32 chunks of shape (k, T, F).

Memory stays bounded whatever the input size: at most ``chunk_instances`` instances (plus one
reader block) are held at a time. Every rejection is a ``BadInput`` with a short ``reason`` code
and a message that names the problem.

Decisions: ``.npy`` must be (N, T, F) of a float dtype in C order (``allow_pickle`` is never set, so
object arrays are never unpickled); ``.npz`` must hold one array unless ``npz_array`` names one;
CSV/Parquet rows are T*F numbers in C order (t-major); CSV rules are in ``csvfile``.

Errors, by retry class. Each reader maps its library's errors to its own reasons: numpy's header
errors to ``corrupt_npy``; zipfile, zlib, bz2 and lzma errors to ``corrupt_npz`` (``encrypted_npz`` for
a password-protected array, ``unsupported_npz`` for a zip feature zipfile lacks); gzip/zlib to
``corrupt_gzip``; pyarrow's ``ArrowNotImplementedError`` and ``ArrowCapacityError`` (a codec or feature
it lacks, a value past Arrow's 2 GiB limits: the same file fails the same way on every try) and a codec
it cannot decode to ``unsupported_parquet``, its other errors to ``corrupt_parquet``. Out of memory
(``MemoryError``, ``ArrowMemoryError``) is temporary: the platform retries on a fresh instance. A failure
of the input stream itself (network, disk) is never taken for bad data: it is temporary, or ``NotFound``
when the object is gone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import lzma
import tokenize
import zipfile
import zlib
from collections.abc import Iterator
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from landfall.arrival import csvfile, format_registry
from landfall.arrival.columns import Chunks, columns_to_instances, narrowed
from landfall.arrival.config import ConverterConfig
from landfall.core.errors import BadInput, TemporaryError
from landfall.core.services.storage import READ_CHUNK, mapped_errors


@dataclasses.dataclass(frozen=True)
class Reading:
    """An opened input: its chunks, and for CSV what was decided about it (recorded in the manifest)."""

    chunks: Chunks
    csv: dict[str, Any] | None = None


def format_of(name: str) -> str:
    """The name of the format an object name's ending chooses (``format_registry.of_file``)."""
    return format_registry.of_file(name).name


def read(fmt: str, fh: BinaryIO, size: int, cfg: ConverterConfig) -> Reading:
    """The instances of a file of format ``fmt``, read by its format's reader (``format_registry``)."""
    if size == 0:
        raise BadInput("empty_file", "the file is empty")
    reader = format_registry.named(fmt).instances
    try:
        return Reading(*reader(_Source(fh), size, cfg))
    except MemoryError as exc:
        raise out_of_memory(exc) from exc


def guarded(fh: BinaryIO) -> Any:
    """``fh`` failing in its own terms (see ``_Source``), for readers called without ``read``."""
    return _Source(fh)


def out_of_memory(exc: MemoryError) -> TemporaryError:
    return TemporaryError(f"out of memory while decoding the input ({type(exc).__name__}: {exc}); "
                          "a retry runs on a fresh instance")


class _Source:
    """The input stream, failing in its own terms: the readers' ``except OSError`` clauses (a corrupt
    stream) never see a network or disk failure, which is temporary (``NotFound`` when the object is gone).

    ``seek`` keeps its ``OSError``: zipfile probes with a seek past the start of a short file.
    """

    def __init__(self, raw: BinaryIO):
        self._raw = raw
        self.closed = False

    def read(self, n: int = -1) -> bytes:
        with mapped_errors("the input"), _failed_read():
            return self._raw.read(n)

    def readline(self, limit: int = -1) -> bytes:
        with mapped_errors("the input"), _failed_read():
            return self._raw.readline(limit)

    def seek(self, offset: int, whence: int = 0) -> int:
        with mapped_errors("the input"):
            return self._raw.seek(offset, whence)

    def tell(self) -> int:
        return self._raw.tell()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def close(self) -> None:  # the caller closes the underlying stream
        self.closed = True


@contextlib.contextmanager
def _failed_read() -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        raise TemporaryError(f"reading the input failed: {exc}") from exc


@contextlib.contextmanager
def _rejecting(errors: tuple[type[Exception], ...], rejection: BadInput) -> Iterator[None]:
    """Turns ``errors`` into ``rejection``, its detail followed by theirs; anything else (``BadInput``,
    storage errors) passes."""
    try:
        yield
    except errors as exc:
        raise BadInput(rejection.reason, f"{rejection.detail}: {exc}") from None


# -- compressed inputs: expansion measured as it happens -----------------------------------------------

FREE_EXPANSION_BYTES = 64 * 2**20  # produced bytes below this are never refused by ratio


class _Counted:
    """``fh``, counting the bytes read from it (the compressed side)."""

    def __init__(self, fh: BinaryIO):
        self._fh = fh
        self.read_bytes = 0

    def read(self, n: int = -1) -> bytes:
        data = self._fh.read(n)
        self.read_bytes += len(data)
        return data

    def __getattr__(self, name: str) -> Any:  # seek, tell, seekable ...: the stream's own
        return getattr(self._fh, name)


class _Expanding:
    """A decompressed stream that refuses to expand more than ``ratio`` times the compressed bytes read so far
    (past ``FREE_EXPANSION_BYTES``), or beyond ``cap`` bytes: a bomb is stopped by what it does, whatever its
    headers declare."""

    def __init__(self, fh: Any, source: _Counted, what: str, ratio: int, setting: str, cap: int):
        self._fh, self._source, self._what = fh, source, what
        self._ratio, self._setting, self._cap = ratio, setting, cap
        self.produced = 0

    def _count(self, data: bytes) -> bytes:
        self.produced += len(data)
        if self.produced > self._cap:
            raise BadInput("compression_bomb", f"{self._what} expands to more than {self._cap} bytes "
                           "(LANDFALL_MAX_EXPANDED_BYTES)")
        read = max(self._source.read_bytes, 1)
        if self.produced > FREE_EXPANSION_BYTES and self.produced > self._ratio * read:
            raise BadInput("compression_bomb", f"{self._what} expanded {self.produced} bytes from {read} read so far "
                           f"({self.produced / read:.0f}x); limit {self._ratio}x ({self._setting})")
        return data

    def read(self, n: int = -1) -> bytes:
        return self._count(self._fh.read(n))

    def readline(self, limit: int = -1) -> bytes:
        return self._count(self._fh.readline(limit))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fh, name)


class _Inflating:
    """A deflated zip member, inflated with zlib from its raw bytes, so that ``read_bytes`` is exactly the
    compressed bytes consumed so far. (zipfile reads ahead by the size asked for, and with a compressed size
    that lies it keeps inflating what it read ahead: counting its reads would let a bomb expand for GBs.)
    The CRC-32 is checked at the end, as zipfile does."""

    STEP = 64 * 1024

    def __init__(self, fh: BinaryIO, member: zipfile.ZipInfo):
        fh.seek(member.header_offset)
        local = fh.read(30)
        if len(local) < 30 or local[:4] != b"PK\x03\x04":
            raise zipfile.BadZipFile(f"no local header for {member.filename!r}")
        name_len, extra_len = int.from_bytes(local[26:28], "little"), int.from_bytes(local[28:30], "little")
        fh.seek(member.header_offset + 30 + name_len + extra_len)
        self._fh, self._crc, self._expected = fh, 0, member.CRC
        self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
        self._tail = b""
        self._pos = 0
        self.read_bytes = 0

    def read(self, n: int = -1) -> bytes:
        n = 1 << 62 if n < 0 else n
        parts, got = [], 0
        while got < n and not self._inflate.eof:
            if not self._tail:
                self._tail = self._fh.read(self.STEP)
                if not self._tail:
                    raise EOFError("the compressed data ends before the deflate stream does")
            before = len(self._tail)
            data = self._inflate.decompress(self._tail, n - got)
            self._tail = self._inflate.unconsumed_tail
            self.read_bytes += before - len(self._tail) - len(self._inflate.unused_data)
            parts.append(data)
            got += len(data)
            self._crc = zlib.crc32(data, self._crc)
        if self._inflate.eof and self._crc != self._expected:
            raise zipfile.BadZipFile(f"bad CRC-32 ({self._crc:#010x}, expected {self._expected:#010x})")
        out = b"".join(parts)
        self._pos += len(out)
        return out

    def tell(self) -> int:
        return self._pos


# -- .npy / .npz --------------------------------------------------------------------------------------

def _check_dtype(dtype: np.dtype) -> None:
    if dtype.hasobject:
        raise BadInput("bad_dtype", f"dtype {dtype} holds Python objects; object arrays are never unpickled")
    if dtype.kind != "f" or dtype.fields is not None:
        raise BadInput("bad_dtype", f"dtype {dtype} is not a floating-point type (expected float16/32/64)")


def _check_shape(shape: tuple[int, ...], cfg: ConverterConfig) -> None:
    if any(d == 0 for d in shape):
        raise BadInput("zero_length", f"shape {shape} has a zero-length dimension")
    if len(shape) != 3 or tuple(shape[1:]) != cfg.shape:
        raise BadInput("shape_mismatch", f"shape {shape} is not (N, {cfg.timesteps}, {cfg.features})")
    if shape[0] > cfg.max_instances:
        raise BadInput("absurd_shape", f"header declares {shape[0]} instances (limit {cfg.max_instances})")


@dataclasses.dataclass(frozen=True)
class NpyHeader:
    """A checked ``.npy`` header: the array's shape and dtype, and where its data starts."""

    shape: tuple[int, ...]
    dtype: np.dtype
    offset: int

    @property
    def row_bytes(self) -> int:
        return int(np.prod(self.shape[1:])) * self.dtype.itemsize


def npy_header(fh: BinaryIO, size: int, cfg: ConverterConfig) -> NpyHeader:
    """Reads and checks the header (``fh`` at the file's start); leaves ``fh`` at the first data byte."""
    try:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
        else:
            raise BadInput("corrupt_npy", f"unsupported .npy format version {version}")
    except BadInput:
        raise
    except (ValueError, EOFError, SyntaxError, TypeError, tokenize.TokenError) as exc:  # numpy parses it as Python
        raise BadInput("corrupt_npy", f"not a valid .npy header: {exc}") from None
    _check_dtype(dtype)
    if fortran:
        raise BadInput("fortran_order", "Fortran-ordered arrays are not supported; save a C-ordered array")
    _check_shape(tuple(shape), cfg)
    header_len = fh.tell()
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if header_len + expected != size:
        what = "truncated" if header_len + expected > size else "has trailing bytes"
        raise BadInput("corrupt_npy",
                       f"header declares {shape} {dtype} ({expected} data bytes) but the file {what} "
                       f"({size - header_len} data bytes)")
    return NpyHeader(tuple(shape), dtype, header_len)


def read_npy(fh: BinaryIO, size: int, cfg: ConverterConfig) -> Chunks:
    header = npy_header(fh, size, cfg)
    return npy_rows(fh, header, 0, header.shape[0], cfg)


def npy_rows(fh: BinaryIO, header: NpyHeader, start: int, stop: int, cfg: ConverterConfig) -> Chunks:
    """Instances ``start:stop``, read from ``fh`` positioned at instance ``start``."""
    shape, dtype, row_bytes = header.shape, header.dtype, header.row_bytes
    done = start
    while done < stop:
        k = min(cfg.chunk_instances, stop - done)
        buf = _read_exact(fh, k * row_bytes)
        if len(buf) < k * row_bytes:
            raise BadInput("corrupt_npy",
                           f"data ends after {done + len(buf) // row_bytes} of {shape[0]} instances")
        yield narrowed(np.frombuffer(buf, dtype=dtype)).reshape(k, *shape[1:])
        done += k


def _read_exact(fh: BinaryIO, n: int) -> bytes:
    parts, got = [], 0
    while got < n:
        b = fh.read(n - got)
        if not b:
            break
        parts.append(b)
        got += len(b)
    return b"".join(parts)


# A corrupt archive, as zipfile and its decompressors report it (bz2's data errors are OSError; the
# stream's own failures are not, see _Source).
_ZIP_ERRORS = (zipfile.BadZipFile, EOFError, OSError, ValueError, zlib.error, lzma.LZMAError)
_ENCRYPTED = 0x1 | 0x40  # zip flag bits: encrypted (ZipCrypto, AES), strong encryption


def read_npz(fh: BinaryIO, size: int, cfg: ConverterConfig) -> Chunks:
    lacking = BadInput("unsupported_npz", "the archive needs a zip feature that zipfile lacks")
    counted = _Counted(fh)
    with (_rejecting((NotImplementedError,), lacking),
          _rejecting(_ZIP_ERRORS, BadInput("corrupt_npz", "not a valid .npz archive"))):
        zf = zipfile.ZipFile(counted)
        members = [i for i in zf.infolist() if i.filename.endswith(".npy")]
    names = [m.filename[:-4] for m in members]
    if not members:
        raise BadInput("corrupt_npz", "the archive holds no .npy array")
    if cfg.npz_array is not None:
        chosen = [m for m in members if m.filename[:-4] == cfg.npz_array]
        if not chosen:
            raise BadInput("npz_array_missing", f"no array {cfg.npz_array!r} in the archive (has {names})")
        member = chosen[0]
    elif len(members) > 1:
        raise BadInput("npz_several_arrays",
                       f"the archive holds {len(members)} arrays {names}; set LANDFALL_NPZ_ARRAY to pick one")
    else:
        member = members[0]
    if member.flag_bits & _ENCRYPTED:
        raise BadInput("encrypted_npz", f"array {member.filename!r} is encrypted; upload it without a password")
    # The declared sizes first (an honest bomb is refused before any byte is inflated), then what it does:
    # a ZIP64 header may declare any compressed size.
    ratio = member.file_size / max(member.compress_size, 1)
    if ratio > cfg.max_npz_ratio or member.file_size > cfg.max_expanded_bytes:
        raise BadInput("compression_bomb",
                       f"array {member.filename!r} declares it expands {ratio:.0f}x ({member.file_size} bytes); "
                       f"limit {cfg.max_npz_ratio}x (LANDFALL_MAX_NPZ_RATIO), {cfg.max_expanded_bytes} bytes")
    # zipfile raises NotImplementedError (a RuntimeError) for a compression method such as Deflate64.
    lacking = BadInput("unsupported_npz", f"array {member.filename!r} uses zip compression method "
                       f"{member.compress_type}; write it with numpy.savez or savez_compressed")
    with (_rejecting((RuntimeError,), lacking),
          _rejecting(_ZIP_ERRORS, BadInput("corrupt_npz", f"cannot open {member.filename!r}"))):
        opened: Any = zf.open(member)  # checks the name, flags and method
        source: Any = counted
        if member.compress_type == zipfile.ZIP_DEFLATED:  # np.savez_compressed: consumption counted exactly
            opened.close()
            opened = source = _Inflating(counted, member)
        inner = _Expanding(opened, source, f"array {member.filename!r}", cfg.max_npz_ratio,
                           "LANDFALL_MAX_NPZ_RATIO", cfg.max_expanded_bytes)
        chunks = read_npy(inner, member.file_size, cfg)  # reads the header from the archive
    return _guard_zip(chunks)


def _guard_zip(chunks: Chunks) -> Chunks:
    with _rejecting(_ZIP_ERRORS, BadInput("corrupt_npz", "the archive is corrupt")):
        yield from chunks


# -- .csv.gz -------------------------------------------------------------------------------------

_GZIP_ERRORS = (gzip.BadGzipFile, EOFError, zlib.error)
_CORRUPT_GZIP = BadInput("corrupt_gzip", "the gzip stream is corrupt")


def read_csv_gz(fh: BinaryIO, cfg: ConverterConfig) -> tuple[Chunks, dict[str, Any]]:
    with _rejecting(_GZIP_ERRORS, _CORRUPT_GZIP):
        chunks, decided = csvfile.read_csv(gunzipped(fh, cfg), cfg)
    return guard_gzip(chunks), decided


def gunzipped(fh: BinaryIO, cfg: ConverterConfig) -> Any:
    """``fh``'s gzip stream decompressed, refused (``compression_bomb``) past ``LANDFALL_MAX_GZIP_RATIO`` times the
    compressed bytes read so far or ``LANDFALL_MAX_EXPANDED_BYTES``; read its chunks through ``guard_gzip``."""
    counted = _Counted(fh)
    return _Expanding(gzip.GzipFile(fileobj=counted, mode="rb"), counted, "the gzip stream",
                      cfg.max_gzip_ratio, "LANDFALL_MAX_GZIP_RATIO", cfg.max_expanded_bytes)


def guard_gzip(chunks: Chunks) -> Chunks:
    """``chunks`` read from a gzip stream, a corrupt stream turned into ``corrupt_gzip``."""
    with _rejecting(_GZIP_ERRORS, _CORRUPT_GZIP):
        yield from chunks


# -- Parquet --------------------------------------------------------------------------------------

# Column-chunk bytes buffered at once, shared by the columns. pyarrow reads each column chunk whole unless
# buffer_size > 0, so a big row group would be held whole; with a share per column, memory is about
# columns x (page + share) whatever the row-group size, and a small row group is still read in one go.
PARQUET_BUFFER_BYTES = 64 * 2**20
_MIN_COLUMN_BUFFER = 64 * 1024


# Beyond the buffers, pyarrow holds one decoded page (and its dictionary) per column being read, so a wide
# file's floor is columns x page whatever its row-group size: pandas' defaults (1 MiB pages, dictionaries) cost
# about 2.2 MiB a column. The metadata holds no page sizes, so the cost is measured: the first batch of
# PROBE_COLUMNS columns, scaled to all of them (linear: 8 columns predict 360 within 1%).
PROBE_COLUMNS = 8
READERS_SHARE = 0.6
# The footer (FileMetaData: a column chunk's metadata per column per row group) is parsed whole: it holds about
# 12 times its serialized size in memory (measured: 6.4 MB -> 76 MiB, 26.7 MB -> 290 MiB, 360 columns; the
# tests check the factor), before any data is read. Its size is in the file's last 8 bytes.
FOOTER_FACTOR = 12  # of memory_limit_mib for the column readers; the rest: interpreter, batches, shard writer


def data_columns(schema: pa.Schema, keep: tuple[str, ...] = ()) -> list[str]:
    """A Parquet file's column names less the index pandas stored beside its data (``DataFrame.to_parquet`` writes
    any index but a plain range as columns, ``__index_level_0__`` when unnamed, listed in the file's ``pandas``
    metadata as ``index_columns``): what ``pandas.read_parquet`` gives back as the index, not as data. A name in
    ``keep`` (a series' time column stored as the index) stays."""
    try:
        meta = schema.pandas_metadata
    except ValueError:  # metadata that is not JSON (or not UTF-8): no index is known
        meta = None
    stored = meta.get("index_columns") if isinstance(meta, dict) else None  # valid JSON of another type: none
    index = {c for c in stored if isinstance(c, str) and c not in keep} if isinstance(stored, list) else set()
    # (a range index is listed as a dict, not a column)
    return [n for n in schema.names if n not in index]


def read_parquet(fh: BinaryIO, size: int, cfg: ConverterConfig, groups: list[int] | None = None) -> Chunks:
    """All rows, or only those of row ``groups`` (in file order): a ranged task's share."""
    footer = footer_bytes(fh, size, cfg)
    with _parquet_errors("not a valid Parquet file"):
        meta = pq.read_metadata(fh)
        share = PARQUET_BUFFER_BYTES // max(meta.num_columns, 1)
        options = {"metadata": meta, "pre_buffer": False,
                   "buffer_size": min(READ_CHUNK, max(_MIN_COLUMN_BUFFER, share))}
        pf = pq.ParquetFile(fh, **options)
        kept = set(data_columns(pf.schema_arrow))
        schema = pa.schema([f for f in pf.schema_arrow if f.name in kept])
        names = None if len(schema) == len(pf.schema_arrow) else schema.names  # None: every column, by position
    width = cfg.timesteps * cfg.features
    if len(schema) == 1 and (pa.types.is_fixed_size_list(schema[0].type) or pa.types.is_list(schema[0].type)
                             or pa.types.is_large_list(schema[0].type)):
        value_type = schema[0].type.value_type
        if not pa.types.is_floating(value_type):
            raise BadInput("bad_dtype", f"list column {schema[0].name!r} holds {value_type}, not floats")
        if pa.types.is_fixed_size_list(schema[0].type) and schema[0].type.list_size != width:
            raise BadInput("shape_mismatch", f"list column {schema[0].name!r} holds "
                           f"{schema[0].type.list_size} values per row, expected T*F = {width}")
        return _guard_parquet(_parquet_lists(pf, cfg, width, groups, names))
    if len(schema) != width:
        raise BadInput("wrong_column_count", f"the Parquet file has {len(schema)} columns, expected one "
                       f"fixed-size list column or T*F = {width} float columns")
    bad = [f.name for f in schema if not pa.types.is_floating(f.type)]
    if bad:
        raise BadInput("bad_dtype", f"columns {bad[:3]} are {schema.field(bad[0]).type}, not floats")
    with _parquet_errors("cannot read the Parquet data"):
        _check_width(pq.ParquetFile(fh, **options), cfg, groups, footer)
    return _guard_parquet(_parquet_columns(pf, cfg, groups, names))


def column_readers_bytes(pf: pq.ParquetFile, cfg: ConverterConfig, groups: list[int] | None = None) -> int:
    """What reading all of ``pf``'s columns at once holds in Arrow's memory pool, predicted from the first
    batch of ``PROBE_COLUMNS`` of them."""
    names = pf.schema_arrow.names
    if len(names) <= PROBE_COLUMNS or pf.metadata.num_rows == 0 or (groups is not None and not groups):
        return 0
    pool = pa.default_memory_pool()
    before = pool.bytes_allocated()
    batches = pf.iter_batches(batch_size=cfg.chunk_instances, row_groups=groups[:1] if groups else None,
                              columns=names[:PROBE_COLUMNS])
    first = next(batches, None)
    used = max(0, pool.bytes_allocated() - before)
    del first, batches
    return used * len(names) // PROBE_COLUMNS


def _budget(cfg: ConverterConfig) -> int:
    return int(cfg.memory_limit_mib * 2**20 * READERS_SHARE)


def footer_bytes(fh: BinaryIO, size: int, cfg: ConverterConfig) -> int:
    """The footer's serialized size, from the file's last 8 bytes (``fh`` is left at the start); a footer whose
    parsed form would not fit is refused before it is parsed (``parquet_metadata_too_large``)."""
    footer = 0
    if size >= 12:
        fh.seek(size - 8)
        tail = fh.read(8)
        if tail[4:] == b"PAR1":
            footer = int.from_bytes(tail[:4], "little")
            if footer + 12 > size:  # not a footer: pyarrow says how the file is corrupt
                footer = 0
    fh.seek(0)
    if footer * FOOTER_FACTOR > _budget(cfg):
        raise BadInput("parquet_metadata_too_large",
                       f"its footer is {footer >> 20} MiB (too many row groups or columns); parsed it holds about "
                       f"{footer * FOOTER_FACTOR >> 20} MiB, more than the {_budget(cfg) >> 20} MiB this "
                       f"converter's {cfg.memory_limit_mib} MiB leave for reading: write fewer, larger row groups "
                       "(row_group_size), or one fixed-size list column")
    return footer


def _check_width(pf: pq.ParquetFile, cfg: ConverterConfig, groups: list[int] | None, footer: int = 0) -> None:
    readers = column_readers_bytes(pf, cfg, groups)
    need = readers + footer * FOOTER_FACTOR
    budget = _budget(cfg)
    if need > budget:
        columns = len(pf.schema_arrow)
        raise BadInput("parquet_too_wide", f"reading its {columns} columns at once holds about {need >> 20} MiB "
                       f"({footer * FOOTER_FACTOR >> 20} MiB of them its parsed footer) of metadata, pages and "
                       f"dictionaries ({readers / columns / 2**20:.1f} MiB a column), more than the "
                       f"{budget >> 20} MiB this converter's {cfg.memory_limit_mib} MiB leave for them: write "
                       "it as one fixed-size list column, or with smaller pages (data_page_size) and no "
                       "dictionary (use_dictionary=False)")


def _guard_parquet(chunks: Chunks) -> Chunks:
    with _parquet_errors("cannot read the Parquet data"):
        yield from chunks


@contextlib.contextmanager
def _parquet_errors(what: str) -> Iterator[None]:
    try:
        yield
    except MemoryError:  # ArrowMemoryError is an ArrowException too: temporary, see read()
        raise
    except (pa.ArrowNotImplementedError, pa.ArrowCapacityError) as exc:
        raise BadInput("unsupported_parquet", f"{what}: {exc}") from None
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:  # ArrowIOError is OSError; names are UTF-8
        # A codec pyarrow lacks (LZO) is an I/O error that says so. Not looked up in the metadata instead:
        # reading a corrupt column chunk's metadata from Python aborts the process (pyarrow 22).
        if isinstance(exc, OSError) and "not supported" in str(exc):
            raise BadInput("unsupported_parquet", f"{what}: {exc}") from None
        raise BadInput("corrupt_parquet", f"{what}: {exc}") from None


def parquet_metadata(fh: BinaryIO, size: int, cfg: ConverterConfig) -> pq.FileMetaData:
    footer_bytes(fh, size, cfg)
    with _parquet_errors("not a valid Parquet file"):
        return pq.read_metadata(fh)


def _batches(pf: pq.ParquetFile, cfg: ConverterConfig, groups: list[int] | None,
             names: list[str] | None) -> Iterator[pa.RecordBatch]:
    if groups is not None and not groups:
        return iter(())
    return pf.iter_batches(batch_size=cfg.chunk_instances, row_groups=groups, columns=names)


def _parquet_columns(pf: pq.ParquetFile, cfg: ConverterConfig, groups: list[int] | None,
                     names: list[str] | None) -> Chunks:
    for batch in _batches(pf, cfg, groups, names):
        if batch.num_rows:
            yield columns_to_instances(batch.columns, cfg)  # float64 columns are narrowed there, checked


def _parquet_lists(pf: pq.ParquetFile, cfg: ConverterConfig, width: int, groups: list[int] | None,
                   names: list[str] | None) -> Chunks:
    for batch in _batches(pf, cfg, groups, names):
        col = batch.column(0)
        if col.null_count:
            raise BadInput("missing_values", f"{col.null_count} rows of the list column are null")
        n = len(col)
        if not n:
            continue
        if not pa.types.is_fixed_size_list(col.type):
            lengths = np.diff(col.offsets.to_numpy())
            if (lengths != width).any():
                row = int(np.argmax(lengths != width))
                raise BadInput("ragged_rows", f"row {row} holds {lengths[row]} values, expected T*F = {width}")
        values = col.flatten().fill_null(float("nan")).to_numpy(zero_copy_only=False)
        yield narrowed(values).reshape(n, cfg.timesteps, cfg.features)
