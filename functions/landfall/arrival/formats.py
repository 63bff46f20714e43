"""Streaming readers: each turns an input file into float32 chunks of shape (k, T, F).

Memory stays bounded whatever the input size: at most ``chunk_instances`` instances (plus one
reader block) are held at a time. Every rejection is a ``BadInput`` with a short ``reason`` code
and a message that names the problem.

Decisions: ``.npy`` must be (N, T, F) of a float dtype in C order (``allow_pickle`` is never set, so
object arrays are never unpickled); ``.npz`` must hold one array unless ``npz_array`` names one;
CSV/Parquet rows are T*F numbers in C order (t-major). Empty CSV cells count as non-finite.
"""

from __future__ import annotations

import collections
import concurrent.futures
import gzip
import zipfile
import zlib
from collections.abc import Callable, Iterator
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from landfall.arrival.config import ConverterConfig
from landfall.core.errors import BadInput

Chunks = Iterator[np.ndarray]
CSV_BLOCK_BYTES = 16 * 1024 * 1024


def format_of(name: str) -> str:
    lower = name.lower()
    for suffix, fmt in ((".csv.gz", "csv.gz"), (".csv", "csv"), (".npy", "npy"), (".npz", "npz"),
                        (".parquet", "parquet"), (".pq", "parquet")):
        if lower.endswith(suffix):
            return fmt
    raise BadInput("unsupported_format",
                   f"{name!r} has an unsupported extension (use .npy, .npz, .csv, .csv.gz or .parquet)")


def read_chunks(fmt: str, fh: BinaryIO, size: int, cfg: ConverterConfig) -> Chunks:
    if size == 0:
        raise BadInput("empty_file", "the file is empty")
    readers: dict[str, Callable[[BinaryIO, int, ConverterConfig], Chunks]] = {
        "npy": read_npy, "npz": read_npz, "csv": read_csv, "csv.gz": read_csv_gz, "parquet": read_parquet,
    }
    return readers[fmt](fh, size, cfg)


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


def read_npy(fh: BinaryIO, size: int, cfg: ConverterConfig) -> Chunks:
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
    except (ValueError, EOFError, SyntaxError, TypeError) as exc:
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
    return _npy_body(fh, shape, dtype, cfg)


def _npy_body(fh: BinaryIO, shape: tuple[int, ...], dtype: np.dtype, cfg: ConverterConfig) -> Chunks:
    n = shape[0]
    row_bytes = int(np.prod(shape[1:])) * dtype.itemsize
    done = 0
    while done < n:
        k = min(cfg.chunk_instances, n - done)
        buf = _read_exact(fh, k * row_bytes)
        if len(buf) < k * row_bytes:
            raise BadInput("corrupt_npy", f"data ends after {done + len(buf) // row_bytes} of {n} instances")
        yield np.frombuffer(buf, dtype=dtype).astype("<f4", copy=False).reshape(k, *shape[1:])
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


def read_npz(fh: BinaryIO, size: int, cfg: ConverterConfig) -> Chunks:
    try:
        zf = zipfile.ZipFile(fh)
        members = [i for i in zf.infolist() if i.filename.endswith(".npy")]
    except (zipfile.BadZipFile, EOFError, ValueError) as exc:
        raise BadInput("corrupt_npz", f"not a valid .npz archive: {exc}") from None
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
    ratio = member.file_size / max(member.compress_size, 1)
    if ratio > cfg.max_npz_ratio:
        raise BadInput("compression_bomb",
                       f"array {member.filename!r} expands {ratio:.0f}x ({member.file_size} bytes); "
                       f"limit {cfg.max_npz_ratio}x")
    try:
        inner = zf.open(member)
    except (zipfile.BadZipFile, NotImplementedError, ValueError) as exc:
        raise BadInput("corrupt_npz", f"cannot open {member.filename!r}: {exc}") from None
    return _guard_zip(read_npy(inner, member.file_size, cfg))


def _guard_zip(chunks: Chunks) -> Chunks:
    try:
        yield from chunks
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        raise BadInput("corrupt_npz", f"the archive is corrupt: {exc}") from None


# -- CSV ------------------------------------------------------------------------------------------

_GZIP_ERRORS = (gzip.BadGzipFile, EOFError, zlib.error)


def read_csv_gz(fh: BinaryIO, size: int, cfg: ConverterConfig) -> Chunks:
    try:
        chunks = read_csv(gzip.GzipFile(fileobj=fh, mode="rb"), size, cfg)
    except _GZIP_ERRORS as exc:
        raise BadInput("corrupt_gzip", f"the gzip stream is corrupt: {exc}") from None
    return _guard_gzip(chunks)


def _guard_gzip(chunks: Chunks) -> Chunks:
    try:
        yield from chunks
    except _GZIP_ERRORS as exc:
        raise BadInput("corrupt_gzip", f"the gzip stream is corrupt: {exc}") from None


def _is_number(cell: bytes) -> bool:
    try:
        float(cell)
        return True
    except ValueError:
        return False


MAX_LINE_BYTES = 16 * 1024 * 1024
CSV_PARSERS = 2  # blocks parsed at once; results are consumed in file order
CSV_IN_FLIGHT = 3  # blocks read ahead at most: bounds memory to a few blocks


def read_csv(fh: BinaryIO, size: int, cfg: ConverterConfig) -> Chunks:
    head = fh.readline(MAX_LINE_BYTES)
    first_line = head.rstrip(b"\r\n")
    if not first_line.strip():
        raise BadInput("empty_file", "the CSV has no rows")
    cells = first_line.split(b",")
    has_header = not all(_is_number(c) for c in cells if c.strip())
    width = cfg.timesteps * cfg.features
    if len(cells) != width:
        raise BadInput("wrong_column_count",
                       f"the CSV has {len(cells)} columns, expected T*F = {cfg.timesteps}*{cfg.features} = {width}")
    return _csv_body(fh, b"" if has_header else head, cfg, width)


def _line_blocks(fh: BinaryIO, carry: bytes) -> Iterator[bytes]:
    """Blocks of about ``CSV_BLOCK_BYTES`` that end at a line break (values hold no line breaks)."""
    while True:
        data = fh.read(CSV_BLOCK_BYTES)
        if not data:
            if carry.strip():
                yield carry
            return
        data = carry + data
        cut = data.rfind(b"\n") + 1
        if cut:
            yield data[:cut]
        carry = data[cut:]


def _parse_block(block: bytes, names: list[str], types: dict[str, pa.DataType]) -> pa.Table:
    try:
        return pacsv.read_csv(pa.py_buffer(block),
                              read_options=pacsv.ReadOptions(column_names=names, use_threads=False),
                              convert_options=pacsv.ConvertOptions(column_types=types))
    except pa.ArrowInvalid as exc:
        raise _csv_error(exc) from None


def _csv_body(fh: BinaryIO, carry: bytes, cfg: ConverterConfig, width: int) -> Chunks:
    """Parses line-aligned blocks on ``CSV_PARSERS`` threads (pyarrow releases the GIL), in order.

    Faster than pyarrow's streaming reader, which parses one block at a time, and unlike reading the
    whole file at once, memory stays bounded by the blocks in flight.
    """
    names = [f"c{i}" for i in range(width)]
    types = {n: pa.float32() for n in names}
    pending: collections.deque[concurrent.futures.Future[pa.Table]] = collections.deque()
    pool = concurrent.futures.ThreadPoolExecutor(CSV_PARSERS, thread_name_prefix="landfall-csv")
    try:
        for block in _line_blocks(fh, carry):
            pending.append(pool.submit(_parse_block, block, names, types))
            if len(pending) >= CSV_IN_FLIGHT:
                yield from _table_chunks(pending.popleft().result(), cfg)
        while pending:
            yield from _table_chunks(pending.popleft().result(), cfg)
    finally:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True)


def _table_chunks(table: pa.Table, cfg: ConverterConfig) -> Chunks:
    for batch in table.to_batches(max_chunksize=cfg.chunk_instances):
        if batch.num_rows:
            yield _columns_to_instances(batch.columns, cfg)


def _csv_error(exc: Exception) -> BadInput:
    text = str(exc)
    if "Expected" in text and "columns" in text:
        return BadInput("ragged_rows", f"rows have different lengths: {text}")
    if "conversion error" in text or "invalid value" in text:
        return BadInput("non_numeric", f"a cell is not a number: {text}")
    return BadInput("corrupt_csv", text)


def _columns_to_instances(columns: list[pa.Array], cfg: ConverterConfig) -> np.ndarray:
    # Stack columns (contiguous copies), then one transposing copy into row-major instances.
    stacked = np.vstack([(c.fill_null(float("nan")) if c.null_count else c).to_numpy(zero_copy_only=False)
                         for c in columns])
    return np.ascontiguousarray(stacked.T, dtype="<f4").reshape(-1, cfg.timesteps, cfg.features)


# -- Parquet --------------------------------------------------------------------------------------

def read_parquet(fh: BinaryIO, size: int, cfg: ConverterConfig) -> Chunks:
    try:
        pf = pq.ParquetFile(fh)
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as exc:
        raise BadInput("corrupt_parquet", f"not a valid Parquet file: {exc}") from None
    schema = pf.schema_arrow
    width = cfg.timesteps * cfg.features
    if len(schema) == 1 and (pa.types.is_fixed_size_list(schema[0].type) or pa.types.is_list(schema[0].type)
                             or pa.types.is_large_list(schema[0].type)):
        value_type = schema[0].type.value_type
        if not pa.types.is_floating(value_type):
            raise BadInput("bad_dtype", f"list column {schema[0].name!r} holds {value_type}, not floats")
        if pa.types.is_fixed_size_list(schema[0].type) and schema[0].type.list_size != width:
            raise BadInput("shape_mismatch", f"list column {schema[0].name!r} holds "
                           f"{schema[0].type.list_size} values per row, expected T*F = {width}")
        return _parquet_lists(pf, cfg, width)
    if len(schema) != width:
        raise BadInput("wrong_column_count", f"the Parquet file has {len(schema)} columns, expected one "
                       f"fixed-size list column or T*F = {width} float columns")
    bad = [f.name for f in schema if not pa.types.is_floating(f.type)]
    if bad:
        raise BadInput("bad_dtype", f"columns {bad[:3]} are {schema.field(bad[0]).type}, not floats")
    return _parquet_columns(pf, cfg)


def _parquet_batches(pf: pq.ParquetFile, cfg: ConverterConfig) -> Iterator[pa.RecordBatch]:
    try:
        yield from pf.iter_batches(batch_size=cfg.chunk_instances)
    except (pa.ArrowInvalid, OSError) as exc:
        raise BadInput("corrupt_parquet", f"cannot read the Parquet data: {exc}") from None


def _parquet_columns(pf: pq.ParquetFile, cfg: ConverterConfig) -> Chunks:
    for batch in _parquet_batches(pf, cfg):
        if batch.num_rows:
            yield _columns_to_instances([c.cast(pa.float32()) for c in batch.columns], cfg)


def _parquet_lists(pf: pq.ParquetFile, cfg: ConverterConfig, width: int) -> Chunks:
    for batch in _parquet_batches(pf, cfg):
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
        values = col.flatten().cast(pa.float32()).fill_null(float("nan")).to_numpy(zero_copy_only=False)
        yield np.ascontiguousarray(values, dtype="<f4").reshape(n, cfg.timesteps, cfg.features)
