"""Streaming readers: each turns an input file into float32 chunks of shape (k, T, F).

Memory stays bounded whatever the input size: at most ``chunk_instances`` instances (plus one
reader block) are held at a time. Every rejection is a ``BadInput`` with a short ``reason`` code
and a message that names the problem.

Decisions: ``.npy`` must be (N, T, F) of a float dtype in C order (``allow_pickle`` is never set, so
object arrays are never unpickled); ``.npz`` must hold one array unless ``npz_array`` names one;
CSV/Parquet rows are T*F numbers in C order (t-major); CSV rules are in ``csvfile``.
"""

from __future__ import annotations

import dataclasses
import gzip
import zipfile
import zlib
from collections.abc import Iterator
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from landfall.arrival import csvfile
from landfall.arrival.columns import Chunks, columns_to_instances
from landfall.arrival.config import ConverterConfig
from landfall.core.errors import BadInput


@dataclasses.dataclass(frozen=True)
class Reading:
    """An opened input: its chunks, and for CSV what was decided about it (recorded in the manifest)."""

    chunks: Chunks
    csv: dict[str, Any] | None = None


def format_of(name: str) -> str:
    lower = name.lower()
    for suffix, fmt in ((".csv.gz", "csv.gz"), (".csv", "csv"), (".npy", "npy"), (".npz", "npz"),
                        (".parquet", "parquet"), (".pq", "parquet")):
        if lower.endswith(suffix):
            return fmt
    raise BadInput("unsupported_format",
                   f"{name!r} has an unsupported extension (use .npy, .npz, .csv, .csv.gz or .parquet)")


def read(fmt: str, fh: BinaryIO, size: int, cfg: ConverterConfig) -> Reading:
    if size == 0:
        raise BadInput("empty_file", "the file is empty")
    if fmt == "csv":
        return Reading(*csvfile.read_csv(fh, cfg))
    if fmt == "csv.gz":
        return Reading(*read_csv_gz(fh, cfg))
    readers = {"npy": read_npy, "npz": read_npz, "parquet": read_parquet}
    return Reading(readers[fmt](fh, size, cfg))


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


# -- .csv.gz -------------------------------------------------------------------------------------

_GZIP_ERRORS = (gzip.BadGzipFile, EOFError, zlib.error)


def read_csv_gz(fh: BinaryIO, cfg: ConverterConfig) -> tuple[Chunks, dict[str, Any]]:
    try:
        chunks, decided = csvfile.read_csv(gzip.GzipFile(fileobj=fh, mode="rb"), cfg)
    except _GZIP_ERRORS as exc:
        raise BadInput("corrupt_gzip", f"the gzip stream is corrupt: {exc}") from None
    return _guard_gzip(chunks), decided


def _guard_gzip(chunks: Chunks) -> Chunks:
    try:
        yield from chunks
    except _GZIP_ERRORS as exc:
        raise BadInput("corrupt_gzip", f"the gzip stream is corrupt: {exc}") from None


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
            yield columns_to_instances([c.cast(pa.float32()) for c in batch.columns], cfg)


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
