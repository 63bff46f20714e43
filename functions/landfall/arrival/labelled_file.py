"""A labelled evaluation file (a dataset spec's ``verdict.labelled``) read and checked with the converter's readers.

What a labelled file is: the instances of the dataset's shape, as the converter reads them, plus one 0/1 label
per instance (1: anomalous), in any input format the converter reads except ``.npy`` (one array, no room for
labels):

- ``.npz``: the label array (``verdict.labelled.label``, default ``label``) and exactly one other array, the
  instances ``(N, T, F)`` (read by ``formats.read_npz``). The labels: ``(N,)`` (or ``(N, 1)``) of bool, integer
  or float dtype.
- ``.csv``, ``.csv.gz``: a header row naming the label column; the other columns are the ``T*F`` values in C
  order, as for any arrival (read by the converter's CSV reader, with its rules: quoting, BOM, CRLF, a leading
  row index, missing values ...).
- ``.parquet``: the label column, and either ``T*F`` float columns or one list column of ``T*F`` floats.

Checks (``BadInput``, one line each, reasons as the converter's plus): ``too_large`` (over
``landfall.core.artifacts.labelled.MAX_BYTES``, the file or its decoded instances), ``unsupported_format`` (``.npy``),
``no_label`` (no such column or array), ``label_length`` (not one label per instance), ``non_finite`` (a
missing, NaN or infinite label or value), ``label_values`` (a label other than 0 or 1), ``no_positives``,
``no_negatives`` (precision, recall and average precision need both).
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import gzip
import zipfile
from collections.abc import Iterator
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from landfall.arrival import csvfile, format_registry, formats
from landfall.arrival.columns import columns_to_instances, narrowed
from landfall.arrival.config import ConverterConfig
from landfall.core.artifacts.labelled import MAX_BYTES
from landfall.core.errors import BadInput
from landfall.core.services.storage import Storage

DEFAULT_LABEL = "label"


@dataclasses.dataclass(frozen=True)
class Labelled:
    instances: np.ndarray  # float32 [n, T, F], original units
    labels: np.ndarray  # uint8 [n], 0/1

    @property
    def positives(self) -> int:
        return int(self.labels.sum())


def load(storage: Storage, source: str, cfg: ConverterConfig, label: str = DEFAULT_LABEL) -> Labelled:
    """Reads and checks ``source`` (a local path or ``gs://`` URI) for instances of ``cfg.shape``."""
    size = storage.stat(source).size
    if size > MAX_BYTES:
        raise BadInput("too_large", f"{size} bytes, more than a labelled evaluation file may have "
                       f"({MAX_BYTES >> 20} MiB)")
    with storage.open_read(source) as fh:
        return read(fh, source, size, cfg, label)


def read(fh: BinaryIO, name: str, size: int, cfg: ConverterConfig, label: str = DEFAULT_LABEL) -> Labelled:
    fmt = format_registry.of_file(name)  # its reader of labelled files, or why it has none
    if size == 0:
        raise BadInput("empty_file", "the file is empty")
    if size > MAX_BYTES:
        raise BadInput("too_large", f"{size} bytes, more than a labelled evaluation file may have "
                       f"({MAX_BYTES >> 20} MiB)")
    if fmt.labelled is None:
        raise BadInput("unsupported_format", fmt.no_labels.format(label=repr(label)))
    try:
        x, y = fmt.labelled(fh, size, cfg, label)
    except MemoryError as exc:
        raise formats.out_of_memory(exc) from exc
    return check(x, y)


def check(instances: np.ndarray, labels: np.ndarray, unit: str = "instance") -> Labelled:
    """The labels' rules, in this order: one per instance, finite, 0 or 1, both classes present; finite values.
    ``unit`` names what is labelled in the messages (``row`` for a labelled recording, ``labelled_recording``)."""
    y = np.asarray(labels)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or len(y) != len(instances):
        raise BadInput("label_length", f"{y.shape[0] if y.ndim else 0} labels for {len(instances)} {unit}s "
                       f"(labels of shape {list(y.shape)}): one label per {unit}")
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        row = int(np.flatnonzero(~np.isfinite(y))[0])
        raise BadInput("non_finite", f"label {row} (0-based) is missing or not finite ({y[row]}): every {unit} "
                       "needs a label, 0 or 1")
    other = (y != 0) & (y != 1)
    if other.any():
        rows = np.flatnonzero(other)
        raise BadInput("label_values", f"{len(rows)} labels are neither 0 nor 1, the first label {int(rows[0])} "
                       f"(0-based) = {y[rows[0]].item()!r}: labels are 0 (normal) or 1 (anomalous)")
    y = y.astype(np.uint8)
    if not y.any():
        raise BadInput("no_positives", f"all {len(y)} labels are 0: no anomalous {unit}, so precision, recall "
                       "and average precision are undefined")
    if y.all():
        raise BadInput("no_negatives", f"all {len(y)} labels are 1: no normal {unit}, so precision and average "
                       "precision say nothing")
    bad = ~np.isfinite(instances).reshape(len(instances), -1).all(axis=1)
    if bad.any():
        raise BadInput("non_finite", f"{int(bad.sum())} {unit}s hold a missing or non-finite value, the first "
                       f"{unit} {int(np.flatnonzero(bad)[0])} (0-based): a labelled set is evaluated as it is")
    return Labelled(np.ascontiguousarray(instances, np.float32), y)


# -- readers --------------------------------------------------------------------------------------------------

def _collect(chunks: Iterator[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    parts, total = [], 0
    for chunk in chunks:
        total += chunk.nbytes
        if total > MAX_BYTES:
            raise BadInput("too_large", f"its instances hold more than {MAX_BYTES >> 20} MiB as float32, more than "
                           "a labelled evaluation set may")
        parts.append(chunk)
    return np.concatenate(parts) if parts else np.empty((0, *shape), np.float32)


def read_npz(fh: BinaryIO, size: int, cfg: ConverterConfig, label: str) -> tuple[np.ndarray, np.ndarray]:
    src = formats.guarded(fh)
    try:
        zf = zipfile.ZipFile(src)
        members = {i.filename[:-4]: i for i in zf.infolist() if i.filename.endswith(".npy")}
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise BadInput("corrupt_npz", f"not a valid .npz archive: {exc}") from None
    if label not in members:
        raise BadInput("no_label", f"no array {label!r} in the archive (has {sorted(members)}): name the label "
                       "array with verdict.labelled.label")
    others = sorted(set(members) - {label})
    if len(others) != 1:
        raise BadInput("npz_several_arrays", f"the archive holds {sorted(members)}: a labelled .npz holds the label "
                       f"array {label!r} and exactly one array of instances")
    member = members[label]
    if member.file_size > MAX_BYTES:
        raise BadInput("too_large", f"label array {label!r} declares {member.file_size} bytes")
    try:
        with zf.open(member) as f:
            labels = np.lib.format.read_array(f, allow_pickle=False)
    except ValueError as exc:  # object arrays (allow_pickle=False), bad headers
        if "pickle" in str(exc):
            raise BadInput("bad_dtype", f"label array {label!r}: {exc}") from None
        raise BadInput("corrupt_npz", f"label array {label!r}: {exc}") from None
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise BadInput("corrupt_npz", f"label array {label!r}: {exc}") from None
    if labels.dtype.kind not in "biuf":
        raise BadInput("bad_dtype", f"label array {label!r} is {labels.dtype}, not booleans or numbers")
    src.seek(0)
    chunks = formats.read_npz(src, size, dataclasses.replace(cfg, npz_array=others[0]))
    return _collect(chunks, cfg.shape), labels


def _first_row(fh: BinaryIO, gz: bool) -> list[str]:
    """The header cells of a CSV (gzipped: ``gz``; blank lines skipped, BOM dropped); ``fh`` is left at its start."""
    stream: Any = gzip.GzipFile(fileobj=fh, mode="rb") if gz else fh
    try:
        line = b""
        for _ in range(1000):
            line = stream.readline(csvfile.MAX_LINE_BYTES)
            if not line or line.strip():
                break
    except (gzip.BadGzipFile, EOFError, OSError) as exc:
        if gz:
            raise BadInput("corrupt_gzip", f"{exc}") from None
        raise BadInput("corrupt_csv", f"{exc}") from None
    finally:
        fh.seek(0)
    if not line.strip():
        raise BadInput("empty_file", "the CSV has no rows")
    try:
        text = line.removeprefix(csvfile.BOM).decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as exc:
        raise BadInput("bad_encoding", f"the first row is not UTF-8 text: {exc}") from None
    return [c.strip() for c in next(csv.reader([text]))]


def read_csv(fh: BinaryIO, size: int, cfg: ConverterConfig, label: str, *, fmt: str = "csv",
             gz: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """A labelled CSV (``fmt``, gzipped: ``gz``), read by the converter's CSV reader."""
    width = cfg.timesteps * cfg.features
    cells = _first_row(fh, gz)
    if label not in cells:
        raise BadInput("no_label", f"no column {label!r} in the header row ({len(cells)} columns, the first "
                       f"{cells[:3]}): a labelled CSV has a header naming its label column")
    if len(cells) not in (width + 1, width + 2):
        raise BadInput("wrong_column_count", f"the CSV has {len(cells)} columns, expected T*F = {width} values "
                       f"and the label column {label!r} (and at most a leading row index)")
    values = cells[1:] if len(cells) == width + 2 else cells  # a leading index column is dropped by the reader
    at = values.index(label)
    # The converter's CSV reader, for rows of T*F + 1 numbers with a header: every CSV rule applies as it does
    # to an arrival (quoting, BOM, CRLF, blank lines, repeated headers, missing values, float32 range).
    wide = dataclasses.replace(cfg, timesteps=1, features=width + 1, csv_header="present")
    rows = _collect(formats.read(fmt, fh, size, wide).chunks, (1, width + 1))[:, 0, :]
    labels = rows[:, at].copy()
    x = np.delete(rows, at, axis=1).reshape(-1, cfg.timesteps, cfg.features)
    return x, labels


@contextlib.contextmanager
def _parquet_errors() -> Iterator[None]:
    try:
        yield
    except MemoryError:
        raise
    except (pa.ArrowNotImplementedError, pa.ArrowCapacityError) as exc:
        raise BadInput("unsupported_parquet", f"{exc}") from None
    except (pa.ArrowException, OSError) as exc:
        raise BadInput("corrupt_parquet", f"{exc}") from None


def read_parquet(fh: BinaryIO, size: int, cfg: ConverterConfig, label: str) -> tuple[np.ndarray, np.ndarray]:
    width = cfg.timesteps * cfg.features
    src = formats.guarded(fh)
    meta = formats.parquet_metadata(src, size, cfg)  # the converter's footer check
    with _parquet_errors():
        pf = pq.ParquetFile(src, metadata=meta)
        schema = pf.schema_arrow
    if label not in schema.names:
        raise BadInput("no_label", f"no column {label!r} (has {schema.names[:4]}{'...' if len(schema) > 4 else ''})"
                       ": name the label column with verdict.labelled.label")
    kind = schema.field(label).type
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)):
        raise BadInput("bad_dtype", f"label column {label!r} is {kind}, not booleans or numbers")
    others = [n for n in formats.data_columns(schema) if n != label]  # a pandas index is not data
    listed = len(others) == 1 and (pa.types.is_list(schema.field(others[0]).type)
                                   or pa.types.is_large_list(schema.field(others[0]).type)
                                   or pa.types.is_fixed_size_list(schema.field(others[0]).type))
    if not listed:
        if len(others) != width:
            raise BadInput("wrong_column_count", f"the Parquet file has {len(others)} columns besides {label!r}, "
                           f"expected one list column or T*F = {width} float columns")
        bad = [n for n in others if not pa.types.is_floating(schema.field(n).type)]
        if bad:
            raise BadInput("bad_dtype", f"columns {bad[:3]} are {schema.field(bad[0]).type}, not floats")
    labels, chunks = [], []
    total = 0
    with _parquet_errors():
        dropped = len(others) + 1 < len(schema)  # a pandas index: read the data columns only
        for batch in pf.iter_batches(batch_size=cfg.chunk_instances, columns=[label, *others] if dropped else None):
            col = batch.column(label)
            labels.append(col.cast(pa.float64()).fill_null(float("nan")).to_numpy(zero_copy_only=False))
            if listed:
                chunk = _list_chunk(batch.column(others[0]), cfg, width)
            else:
                chunk = columns_to_instances([batch.column(n) for n in others], cfg)
            total += chunk.nbytes
            if total > MAX_BYTES:
                raise BadInput("too_large", f"its instances hold more than {MAX_BYTES >> 20} MiB as float32")
            chunks.append(chunk)
    x = np.concatenate(chunks) if chunks else np.empty((0, *cfg.shape), np.float32)
    return x, np.concatenate(labels) if labels else np.empty(0)


def _list_chunk(col: pa.Array, cfg: ConverterConfig, width: int) -> np.ndarray:
    if not pa.types.is_floating(col.type.value_type):
        raise BadInput("bad_dtype", f"the list column holds {col.type.value_type}, not floats")
    if col.null_count:
        raise BadInput("missing_values", f"{col.null_count} rows of the list column are null")
    if pa.types.is_fixed_size_list(col.type):
        ok = col.type.list_size == width
        lengths = np.full(len(col), col.type.list_size)
    else:
        lengths = np.diff(col.offsets.to_numpy())
        ok = bool((lengths == width).all())
    if not ok:
        row = int(np.argmax(lengths != width))
        if pa.types.is_fixed_size_list(col.type):
            raise BadInput("shape_mismatch", f"row {row} holds {lengths[row]} values, expected T*F = {width}")
        raise BadInput("ragged_rows", f"row {row} holds {lengths[row]} values, expected T*F = {width}")
    values = col.flatten().fill_null(float("nan")).to_numpy(zero_copy_only=False)
    return narrowed(values).reshape(len(col), cfg.timesteps, cfg.features)
