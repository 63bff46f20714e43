"""CSV arrivals, as pandas, the csv module, numpy, pyarrow and Excel write them.

Rules (docs/arrival.md repeats them):

- One instance per row: ``T*F`` numbers in C order (t-major), comma-separated. Quoted fields
  (``QUOTE_ALL``, ``QUOTE_NONNUMERIC``), a UTF-8 byte-order mark, CRLF line ends, a missing final
  newline and trailing blank lines are accepted. An empty cell is a missing value (non-finite).
- A quoted field that holds a line break is refused (``quoted_newline``): values are numbers, so such a
  file is not what we think it is, and rows could not be split safely in parallel.
- Header (``LANDFALL_CSV_HEADER``): ``present`` or ``absent`` say it; ``auto`` (the default) takes the
  first row as a header when any non-empty cell is not a number, or when its cells are exactly
  ``0..W-1`` (what ``pandas.DataFrame.to_csv`` writes for unnamed columns). A data row that is exactly
  ``0, 1, ..., W-1`` is therefore taken for a header under ``auto``: say ``absent`` for such data.
- Index column: a file with ``W+1`` columns whose first one is a row index, as ``to_csv(index=True)``
  writes it, reads as ``W`` columns. With a header the first column is the index whatever it holds;
  without one it must count rows ``0, 1, 2, ...`` (checked on every row), else the file is refused.
- The decision is recorded in the manifest: ``{"header", "index_column", "dialect": {...}}``.
"""

from __future__ import annotations

import collections
import concurrent.futures
import csv
import dataclasses
from collections.abc import Iterator
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from landfall.arrival.columns import Chunks, columns_to_instances
from landfall.arrival.config import ConverterConfig
from landfall.core.errors import BadInput

BOM = b"\xef\xbb\xbf"
BLOCK_BYTES = 16 * 1024 * 1024
MAX_LINE_BYTES = 16 * 1024 * 1024
PARSERS = 2  # blocks parsed at once; results are consumed in file order
IN_FLIGHT = 3  # blocks read ahead at most: bounds memory to a few blocks
INDEX = "index"


@dataclasses.dataclass(frozen=True)
class CsvLayout:
    """What was decided about one file: recorded in its manifest as ``csv``."""

    header: bool
    index_column: bool
    bom: bool
    crlf: bool

    def record(self) -> dict[str, Any]:
        return {"header": "present" if self.header else "absent", "index_column": self.index_column,
                "dialect": {"delimiter": ",", "quotechar": '"', "lineterminator": "\r\n" if self.crlf else "\n",
                            "bom": self.bom}}


def _is_number(cell: str) -> bool:
    try:
        float(cell)
        return True
    except ValueError:
        return False


def _first_row(line: bytes) -> list[str]:
    if line.count(b'"') % 2:
        raise BadInput("quoted_newline", "the first row has a quoted field that holds a line break "
                       "(values must be numbers on one line)")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput("bad_encoding", f"the first row is not UTF-8 text: {exc}") from None
    try:
        return next(csv.reader([text]))
    except (csv.Error, StopIteration) as exc:
        raise BadInput("corrupt_csv", f"the first row is not CSV: {exc}") from None


def decide(cells: list[str], width: int, header_mode: str) -> CsvLayout:
    """Header and index column for a first row of ``cells`` (BOM and line end are filled in by the caller)."""
    if len(cells) not in (width, width + 1):
        hint = " (the delimiter must be ',')" if len(cells) == 1 and any(d in cells[0] for d in ";\t|") else ""
        raise BadInput("wrong_column_count", f"the CSV has {len(cells)} columns, expected T*F = {width}"
                       f" (or {width + 1} with a leading row index){hint}")
    indexed = len(cells) == width + 1
    values = cells[1:] if indexed else cells
    if header_mode == "auto":
        numeric = all(_is_number(c) for c in cells if c.strip())
        header = not numeric or [c.strip() for c in values] == [str(i) for i in range(width)]
    else:
        header = header_mode == "present"
    if indexed and not header and cells[0].strip() != "0":
        raise BadInput("wrong_column_count", f"the CSV has {len(cells)} columns, expected T*F = {width}; "
                       f"its first column is not a row index 0, 1, 2, ... (the first row holds {cells[0]!r})")
    return CsvLayout(header=header, index_column=indexed, bom=False, crlf=False)


def read_csv(fh: BinaryIO, cfg: ConverterConfig) -> tuple[Chunks, dict[str, Any]]:
    decided, head = decide_layout(fh, cfg)
    chunks = parse_blocks(line_blocks(fh, b"" if decided.header else head), cfg, decided, RowIndex(0))
    return chunks, decided.record()


def decide_layout(fh: BinaryIO, cfg: ConverterConfig) -> tuple[CsvLayout, bytes]:
    """Reads the first line (``fh`` at the file's start) and decides the layout from it.

    Returns the layout and that line (without a BOM, with its line end); ``fh`` is left after it.
    """
    head = fh.readline(MAX_LINE_BYTES)
    bom = head.startswith(BOM)
    if bom:
        head = head[len(BOM):]
    if len(head) >= MAX_LINE_BYTES and not head.endswith(b"\n"):
        raise BadInput("corrupt_csv", f"the first row is longer than {MAX_LINE_BYTES // 2**20} MiB")
    line = head.rstrip(b"\r\n")
    if not line.strip():
        raise BadInput("empty_file", "the CSV has no rows")
    width = cfg.timesteps * cfg.features
    decided = dataclasses.replace(decide(_first_row(line), width, cfg.csv_header), bom=bom,
                                  crlf=head.endswith(b"\r\n"))
    return decided, head


class RowIndex:
    """The row number a headerless index column must hold next.

    ``start=None``: taken from the first row parsed (a ranged task does not know how many rows precede its
    range); ``first`` then says which it was, for the committer to check that the ranges join up.
    """

    def __init__(self, start: int | None = 0):
        self.first = start
        self.next = start

    def check(self, index: np.ndarray) -> None:
        if self.next is None:
            if not len(index):
                return
            self.first = self.next = int(index[0])
        wrong = np.flatnonzero(index != np.arange(self.next, self.next + len(index)))
        if len(wrong):
            row = self.next + int(wrong[0])
            raise BadInput("wrong_column_count", f"the first column counts rows like an index until row {row}, "
                           f"which holds {index[wrong[0]]}: the CSV has one column too many")
        self.next += len(index)


def line_blocks(fh: BinaryIO, carry: bytes) -> Iterator[bytes]:
    """Blocks of about ``BLOCK_BYTES`` that end at a line break (values hold no line breaks)."""
    while True:
        data = fh.read(BLOCK_BYTES)
        if not data:
            if carry.strip():
                yield carry
            return
        data = carry + data
        cut = data.rfind(b"\n") + 1
        if cut:
            yield data[:cut]
        carry = data[cut:]


def quoted_newline(block: bytes) -> bool:
    """Whether a line break in ``block`` falls inside quotes (an odd number of quotes before it)."""
    if b'"' not in block:
        return False
    raw = np.frombuffer(block, np.uint8)
    quotes = np.flatnonzero(raw == ord('"'))
    if len(quotes) % 2:
        return True
    before = np.searchsorted(quotes, np.flatnonzero(raw == ord("\n")))
    return bool((before % 2).any())


def _parse_block(block: bytes, names: list[str], types: dict[str, pa.DataType]) -> pa.Table:
    if quoted_newline(block):
        raise BadInput("quoted_newline", "a quoted field holds a line break (values must be numbers on one line)")
    try:
        return pacsv.read_csv(pa.py_buffer(block),
                              read_options=pacsv.ReadOptions(column_names=names, use_threads=False),
                              convert_options=pacsv.ConvertOptions(column_types=types, include_columns=list(types)))
    except pa.ArrowInvalid as exc:
        raise _csv_error(exc) from None


def parse_blocks(blocks: Iterator[bytes], cfg: ConverterConfig, decided: CsvLayout, rows: RowIndex) -> Chunks:
    """Parses line-aligned blocks on ``PARSERS`` threads (pyarrow releases the GIL), in order.

    ``rows`` checks a headerless index column (unused otherwise).

    Faster than pyarrow's streaming reader, which parses one block at a time, and unlike reading the
    whole file at once, memory stays bounded by the blocks in flight.
    """
    values = [f"c{i}" for i in range(cfg.timesteps * cfg.features)]
    names = [INDEX, *values] if decided.index_column else values
    types = {n: pa.float32() for n in values}
    counted = decided.index_column and not decided.header  # a headerless index must count rows
    if counted:
        types = {INDEX: pa.int64(), **types}
    pending: collections.deque[concurrent.futures.Future[pa.Table]] = collections.deque()
    pool = concurrent.futures.ThreadPoolExecutor(PARSERS, thread_name_prefix="landfall-csv")
    index = rows if counted else None
    try:
        for block in blocks:
            pending.append(pool.submit(_parse_block, block, names, types))
            if len(pending) >= IN_FLIGHT:
                yield from _table_chunks(pending.popleft().result(), cfg, index)
        while pending:
            yield from _table_chunks(pending.popleft().result(), cfg, index)
    finally:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True)


def _table_chunks(table: pa.Table, cfg: ConverterConfig, rows: RowIndex | None) -> Chunks:
    if rows is not None:
        rows.check(table.column(INDEX).to_numpy(zero_copy_only=False))
        table = table.drop_columns([INDEX])
    for batch in table.to_batches(max_chunksize=cfg.chunk_instances):
        if batch.num_rows:
            yield columns_to_instances(batch.columns, cfg)


def _csv_error(exc: Exception) -> BadInput:
    text = str(exc)
    if "Expected" in text and "columns" in text:
        return BadInput("ragged_rows", f"rows have different lengths: {text}")
    if "conversion error" in text or "invalid value" in text:
        return BadInput("non_numeric", f"a cell is not a number: {text}")
    return BadInput("corrupt_csv", text)
