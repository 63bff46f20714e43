"""CSV arrivals, as pandas, the csv module, numpy, pyarrow and Excel write them.

Rules (docs/arrival.md repeats them):

- One instance per row: ``T*F`` numbers in C order (t-major), comma-separated. Quoted fields
  (``QUOTE_ALL``, ``QUOTE_NONNUMERIC``), a UTF-8 byte-order mark, CRLF line ends, a missing final
  newline and blank lines (leading ones too: counted in the manifest) are accepted. An empty cell, and
  what pyarrow reads as missing (``#N/A``, ``NA``, ``NaN``, ``null`` ...: Excel's and pandas' spellings), is
  a missing value (non-finite). A minus written as U+2212 (what some locales and spreadsheets export) is
  read as ``-``. A value beyond float32's range (``1e39``) is refused (``out_of_range``), never stored as Inf.
- What a number is, pyarrow's CSV parser decides, for the first row as for the others (``_kinds``).
- A line longer than ``MAX_LINE_BYTES`` (16 MiB), wherever it is, is refused (``line_too_long``) after
  reading at most twice that: memory stays bounded whatever the file holds.
- A quoted field that holds a line break is refused (``quoted_newline``): values are numbers, so such a
  file is not what we think it is, and rows could not be split safely in parallel.
- Header (``LANDFALL_CSV_HEADER``): ``present`` or ``absent`` say it; ``auto`` (the default) takes the
  first row for a header when its cells are text (no cell a number; missing ones aside), or when they
  are exactly ``0..W-1`` (what ``pandas.DataFrame.to_csv`` writes for unnamed columns); a first row of
  numbers and missing values is data. A first row mixing numbers and text is refused
  (``ambiguous_header``): it would be a data row lost, or a header read as data. A data row that is
  exactly ``0, 1, ..., W-1`` is taken for a header under ``auto``: say ``absent`` for such data.
- A header, once found, is skipped wherever it appears again (the header row of each export in
  concatenated exports, with or without a BOM); each such row is logged and counted in the manifest's
  ``csv.repeated_headers``.
- Index column: a file with ``W+1`` columns whose first one is a row index, as ``to_csv(index=True)``
  writes it, reads as ``W`` columns. With a header the first column is the index whatever it holds;
  without one it must count rows ``0, 1, 2, ...`` (checked on every row), else the file is refused.
- The decision is recorded in the manifest: ``{"header", "index_column", "dialect": {...},
  "leading_blank_lines", "repeated_headers"}``; a header taken from the first row is logged.
"""

from __future__ import annotations

import collections
import concurrent.futures
import csv
import dataclasses
import logging
import re
from collections.abc import Iterator
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from landfall.arrival.columns import F32_MAX, Chunks, columns_to_instances, out_of_range
from landfall.arrival.config import ConverterConfig
from landfall.core.errors import BadInput

log = logging.getLogger("landfall.arrival.csvfile")

BOM = b"\xef\xbb\xbf"
MINUS = "\u2212".encode()  # U+2212 MINUS SIGN, read as "-"
BLOCK_BYTES = 16 * 1024 * 1024
MAX_LINE_BYTES = 16 * 1024 * 1024  # at least BLOCK_BYTES: a line within one read is never too long
NULLS = frozenset(pacsv.ConvertOptions().null_values)  # what pyarrow reads as a missing value
PARSERS = 2  # blocks parsed at once; results are consumed in file order
IN_FLIGHT = 3  # blocks read ahead at most: bounds memory to a few blocks
INDEX = "index"


@dataclasses.dataclass
class CsvLayout:
    """What was decided about one file: recorded in its manifest as ``csv`` (``record``)."""

    header: bool
    index_column: bool
    bom: bool = False
    crlf: bool = False
    header_row: bytes = b""  # the header as written (no BOM, no line end): its repeats are skipped
    leading_blank_lines: int = 0
    repeated_headers: int = 0  # counted while parsing
    _record: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)

    def record(self) -> dict[str, Any]:
        """The manifest's ``csv`` field. The same dict, brought up to date, on every call: a reader that took
        it before parsing sees the repeated headers counted once parsing is done."""
        self._record.update({
            "header": "present" if self.header else "absent", "index_column": self.index_column,
            "dialect": {"delimiter": ",", "quotechar": '"', "lineterminator": "\r\n" if self.crlf else "\n",
                        "bom": self.bom},
            "leading_blank_lines": self.leading_blank_lines, "repeated_headers": self.repeated_headers})
        return self._record

    def count_repeats(self, n: int) -> None:
        self.repeated_headers += n
        self.record()


def _kinds(cells: list[str]) -> list[str]:
    """Each cell as pyarrow's CSV reader (the one that parses the data) sees it: ``number``, ``missing``
    (empty, or one of pyarrow's null spellings such as Excel's ``#N/A``) or ``text``."""
    whole = ",".join(_quoted(c) for c in cells).encode()
    if _floats(whole, len(cells)):  # the usual case: one parse says every cell is a number or missing
        return ["missing" if c in NULLS or not c.strip() else "number" for c in cells]
    return ["missing" if c in NULLS or not c.strip() else "number" if _floats(_quoted(c).encode(), 1) else "text"
            for c in cells]


def _quoted(cell: str) -> str:
    return '"' + cell.replace('"', '""') + '"'


def _floats(line: bytes, width: int) -> bool:
    names = [f"c{i}" for i in range(width)]
    try:
        pacsv.read_csv(pa.py_buffer(line.replace(MINUS, b"-") + b"\n"),
                       read_options=pacsv.ReadOptions(column_names=names, use_threads=False),
                       convert_options=pacsv.ConvertOptions(column_types={n: pa.float32() for n in names}))
        return True
    except pa.ArrowInvalid:
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
    pandas = [c.strip() for c in values] == [str(i) for i in range(width)]  # to_csv's unnamed columns
    if header_mode == "auto" and not pandas:
        kinds = _kinds(cells)
        if "text" in kinds and "number" in kinds:
            num, txt = kinds.index("number"), kinds.index("text")
            raise BadInput("ambiguous_header", f"the first row mixes numbers (cell {num + 1}: {cells[num][:40]!r}) "
                           f"and text (cell {txt + 1}: {cells[txt][:40]!r}): neither a header nor a data row; set "
                           "LANDFALL_CSV_HEADER=present or absent")
        header = "text" in kinds
    else:
        header = header_mode == "present" or (header_mode == "auto" and pandas)
    if indexed and not header and cells[0].strip() != "0":
        raise BadInput("wrong_column_count", f"the CSV has {len(cells)} columns, expected T*F = {width}; "
                       f"its first column is not a row index 0, 1, 2, ... (the first row holds {cells[0]!r})")
    return CsvLayout(header=header, index_column=indexed)


def read_csv(fh: BinaryIO, cfg: ConverterConfig) -> tuple[Chunks, dict[str, Any]]:
    decided, head = decide_layout(fh, cfg)
    first = decided.leading_blank_lines + 2 if decided.header else decided.leading_blank_lines + 1
    chunks = parse_blocks(line_blocks(fh, b"" if decided.header else head, first), cfg, decided, RowIndex(0))
    return chunks, decided.record()


def decide_layout(fh: BinaryIO, cfg: ConverterConfig) -> tuple[CsvLayout, bytes]:
    """Reads the first row (``fh`` at the file's start; blank lines before it are skipped and counted) and
    decides the layout from it.

    Returns the layout and that row (without a BOM, with its line end); ``fh`` is left after it.
    """
    blank, skipped, bom = 0, 0, False
    while True:
        head = fh.readline(MAX_LINE_BYTES)
        if not skipped and head.startswith(BOM):
            bom, head = True, head[len(BOM):]
        if len(head) >= MAX_LINE_BYTES and not head.endswith(b"\n"):
            raise BadInput("line_too_long", f"line {blank + 1} is longer than {MAX_LINE_BYTES >> 20} MiB, the "
                           "limit for one row")
        if not head:
            raise BadInput("empty_file", "the CSV has no rows" + (f" (only {blank} blank lines)" if blank else ""))
        if head.strip():
            break
        blank, skipped = blank + 1, skipped + len(head)
        if skipped > MAX_LINE_BYTES:
            raise BadInput("empty_file", f"the CSV starts with more than {MAX_LINE_BYTES >> 20} MiB of blank lines")
    line = head.rstrip(b"\r\n")
    width = cfg.timesteps * cfg.features
    decided = decide(_first_row(line.replace(MINUS, b"-")), width, cfg.csv_header)
    decided.bom, decided.crlf, decided.leading_blank_lines = bom, head.endswith(b"\r\n"), blank
    if decided.header:
        # Its repeats are skipped unless it could be data (LANDFALL_CSV_HEADER=present on a row of numbers).
        if cfg.csv_header == "auto" or not _floats(line, len(_first_row(line))):
            decided.header_row = line
        log.info("took line %d for the CSV header: %s", blank + 1, line[:200].decode("utf-8", "replace"))
    decided.record()
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


def line_blocks(fh: BinaryIO, carry: bytes, first_line: int | None = None) -> Iterator[bytes]:
    """Blocks of about ``BLOCK_BYTES`` that end at a line break (values hold no line breaks).

    A line longer than ``MAX_LINE_BYTES`` is refused (``line_too_long``) as soon as that many of its bytes
    are read, so at most about ``BLOCK_BYTES + MAX_LINE_BYTES`` are held. ``first_line``: the file's line
    number of the first line of ``carry`` (or of ``fh``), for the message, when known."""
    done = 0  # lines yielded
    while True:
        data = fh.read(BLOCK_BYTES)
        if not data:
            if carry.strip():
                yield carry
            return
        partial = len(carry) - (carry.rfind(b"\n") + 1)  # bytes of an unfinished line carried over
        if partial:
            end = data.find(b"\n")
            if partial + (end + 1 if end >= 0 else len(data)) > MAX_LINE_BYTES:
                raise _too_long(None if first_line is None else first_line + done + carry.count(b"\n"))
        data = carry + data
        cut = data.rfind(b"\n") + 1
        carry = data[cut:]
        if cut:
            if first_line is not None:
                done += data.count(b"\n", 0, cut)
            data = data[:cut]
            yield data  # the only reference kept here: the parser frees it
        del data


def _too_long(line: int | None) -> BadInput:
    where = f"line {line}" if line is not None else "a line of this task's range"
    return BadInput("line_too_long", f"{where} is longer than {MAX_LINE_BYTES >> 20} MiB, the limit for one row "
                    "(is a line break missing?)")


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


def _repeats(header_row: bytes) -> re.Pattern[bytes] | None:
    """A header row again, as a whole line (with or without a BOM): what concatenated exports hold."""
    if not header_row:
        return None
    return re.compile(rb"(?m)^(?:" + re.escape(BOM) + rb")?" + re.escape(header_row) + rb"\r?(?:\n|\Z)")


def _parse_block(block: bytes, names: list[str], types: dict[str, pa.DataType],
                 repeats: re.Pattern[bytes] | None = None, header_row: bytes = b"") -> tuple[pa.Table, int]:
    """The block's table, and how many repeated header rows were left out of it."""
    dropped = 0
    if repeats is not None and header_row in block:
        block, dropped = repeats.subn(b"", block)
    if quoted_newline(block):
        raise BadInput("quoted_newline", "a quoted field holds a line break (values must be numbers on one line)")
    if MINUS in block:
        block = block.replace(MINUS, b"-")
    if dropped and not block.strip():  # it held only repeated headers (strip copies: only then)
        return pa.table({n: pa.array([], t) for n, t in types.items()}), dropped
    table = _read(block, names, types)
    if _has_inf(table, types):
        _check_range(block, names, types)
    return table, dropped


def _read(block: bytes, names: list[str], types: dict[str, pa.DataType]) -> pa.Table:
    try:
        return _arrow_csv(block, names, types, None)
    except pa.ArrowInvalid as exc:
        if "straddling" not in str(exc):
            raise _csv_error(exc) from None
    # A row longer than pyarrow's block (1 MiB): parsed as one block (rows are at most MAX_LINE_BYTES), rather
    # than failing with "straddling object straddles two block boundaries". Not by default: parsing 16 MiB
    # at once holds several times what 1 MiB blocks do.
    try:
        return _arrow_csv(block, names, types, len(block) + 1)
    except pa.ArrowInvalid as exc:
        raise _csv_error(exc) from None


def _arrow_csv(block: bytes, names: list[str], types: dict[str, pa.DataType], block_size: int | None) -> pa.Table:
    options = pacsv.ReadOptions(column_names=names, use_threads=False, **({"block_size": block_size}
                                                                           if block_size else {}))
    return pacsv.read_csv(pa.py_buffer(block), read_options=options,
                          convert_options=pacsv.ConvertOptions(column_types=types, include_columns=list(types)))


def _has_inf(table: pa.Table, types: dict[str, pa.DataType]) -> bool:
    return any(pc.any(pc.is_inf(table.column(n))).as_py() for n, t in types.items() if t == pa.float32())


def _check_range(block: bytes, names: list[str], types: dict[str, pa.DataType]) -> None:
    """An Inf in float32: written as ``inf`` (non-finite, as usual), or a finite number past float32's range."""
    wide = _read(block, names, {n: pa.float64() if t == pa.float32() else t for n, t in types.items()})
    for n, t in types.items():
        if t != pa.float32():
            continue
        column = wide.column(n).to_numpy(zero_copy_only=False)
        over = np.flatnonzero(np.isfinite(column) & (np.abs(column) > F32_MAX))
        if len(over):
            raise out_of_range(float(column[over[0]]), f" (column {names.index(n) + 1})")


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
    pending: collections.deque[concurrent.futures.Future[tuple[pa.Table, int]]] = collections.deque()
    pool = concurrent.futures.ThreadPoolExecutor(PARSERS, thread_name_prefix="landfall-csv")
    index = rows if counted else None
    repeats = _repeats(decided.header_row)

    def parsed() -> pa.Table:
        table, dropped = pending.popleft().result()
        if dropped:
            decided.count_repeats(dropped)
            log.warning("skipped %d more CSV header rows (concatenated exports?): %s", dropped,
                        decided.header_row[:200].decode("utf-8", "replace"))
        return table

    try:
        for block in blocks:
            pending.append(pool.submit(_parse_block, block, names, types, repeats, decided.header_row))
            if len(pending) >= IN_FLIGHT:
                yield from _table_chunks(parsed(), cfg, index)
        while pending:
            yield from _table_chunks(parsed(), cfg, index)
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
