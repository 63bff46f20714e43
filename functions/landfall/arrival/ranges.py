"""One ranged task's share of a source object: the instances of its disjoint part, per format.

Task ``i`` of ``N`` (``landfall.arrival.ranged``) reads only its share; the shares of all ``N`` tasks,
in task order, are exactly the file's instances in file order:

- ``.npy``: instances ``[n*i//N, n*(i+1)//N)``, read from the header's data offset (every task checks the
  header as the in-process reader does).
- CSV (``.csv``): bytes. The nominal range is ``[size*i//N, size*(i+1)//N)``; a task starts after the
  first ``\\n`` at or past its nominal start (task 0 at 0) and ends after the first ``\\n`` at or past its
  nominal end (the last task at the end of the file), so every line belongs to exactly one task: a
  boundary on a ``\\n`` ends the line there, CRLF keeps its ``\\r`` with its line, a missing final newline
  ends the last line at the end of the file. Every task decides the layout (header, BOM, index column)
  from the file's first line, as ``landfall.arrival.csvfile`` does; only task 0, whose range holds that
  line, skips it as a header. A headerless index column is checked per task from its first row; the
  committer checks that the tasks' first indexes join up (``0``, then the rows before each range).
  Repeated header rows are skipped by whichever task holds them; the committer adds up their counts.
  A quoted field holding a line break is refused (``quoted_newline``), as in-process: a block cut inside
  quotes has an odd number of quotes, so whichever task sees it refuses the file, whatever the split.
- Parquet: whole row groups, ``[g*i//N, g*(i+1)//N)`` of the file's ``g``; a file with fewer row groups
  than tasks leaves some tasks without rows.
- ``.npz`` and ``.csv.gz`` cannot be split (a compressed stream): task 0 converts the whole file, the
  other tasks convert nothing and write an empty part.
"""

from __future__ import annotations

import dataclasses
from typing import Any, BinaryIO

from landfall.arrival import csvfile, format_registry, formats
from landfall.arrival.columns import Chunks
from landfall.arrival.config import ConverterConfig
from landfall.core.errors import BadInput

_SCAN = 64 * 1024


@dataclasses.dataclass
class Share:
    """A task's chunks, and what its part record needs to say about them."""

    chunks: Chunks
    where: str  # for messages: which part of the file this is
    first_row: int | None = 0  # the file's row number of the first instance, if known (not for CSV)
    csv: dict[str, Any] | None = None
    index: csvfile.RowIndex | None = None  # a headerless CSV index column: the first index the range held


def split(total: int, index: int, count: int) -> tuple[int, int]:
    """``[start, stop)`` of ``total`` items for task ``index`` of ``count``, as even as possible."""
    return total * index // count, total * (index + 1) // count


def share(fmt: str, fh: BinaryIO, size: int, cfg: ConverterConfig, index: int, count: int) -> Share:
    """Task ``index`` of ``count``'s share of an instance file, as its format splits it (``format_registry``:
    ``.npy`` by instances, CSV by lines, Parquet by row groups); a format that cannot be split is converted whole
    by task 0."""
    if size == 0:
        raise BadInput("empty_file", "the file is empty")
    src = formats.guarded(fh)
    split_by = format_registry.named(fmt).ranges
    try:
        if split_by is not None:
            return split_by(src, size, cfg, index, count)
        if index:
            return Share(iter(()), f"not splittable: task 0 converts the whole {fmt} file", None)
        reading = formats.read(fmt, fh, size, cfg)
        return Share(reading.chunks, f"the whole {fmt} file", 0, reading.csv)
    except MemoryError as exc:
        raise formats.out_of_memory(exc) from exc


def npy_share(fh: BinaryIO, size: int, cfg: ConverterConfig, index: int, count: int) -> Share:
    header = formats.npy_header(fh, size, cfg)
    start, stop = split(header.shape[0], index, count)
    fh.seek(header.offset + start * header.row_bytes)
    return Share(formats.npy_rows(fh, header, start, stop, cfg), f"instances {start}..{stop - 1}", start)


def parquet_share(fh: BinaryIO, size: int, cfg: ConverterConfig, index: int, count: int) -> Share:
    meta = formats.parquet_metadata(fh, size, cfg)
    g0, g1 = split(meta.num_row_groups, index, count)
    first = sum(meta.row_group(g).num_rows for g in range(g0))
    del meta  # read_parquet parses the footer again: not two copies at once
    fh.seek(0)
    chunks = formats.read_parquet(fh, size, cfg, groups=list(range(g0, g1)))
    return Share(chunks, f"row groups {g0}..{g1 - 1} (from instance {first})", first)


def csv_share(fh: BinaryIO, size: int, cfg: ConverterConfig, index: int, count: int) -> Share:
    decided, head = csvfile.decide_layout(fh, cfg)
    body = fh.tell()  # after the first line
    lo, hi = split(size, index, count)
    start = body if index == 0 else max(body, after_newline(fh, lo, size))
    end = size if index == count - 1 else max(body, after_newline(fh, hi, size))
    # Task 0 holds the first line: a header is skipped; a data row is parsed (without its BOM).
    carry = head if index == 0 and not decided.header else b""
    rows = csvfile.RowIndex(0 if index == 0 else None)
    first_line = decided.leading_blank_lines + (2 if decided.header else 1) if index == 0 else None
    blocks = csvfile.line_blocks(Bounded(fh, start, end), carry, first_line)
    chunks = csvfile.parse_blocks(blocks, cfg, decided, rows)
    first = 0 if index == 0 else None
    return Share(chunks, f"bytes {0 if index == 0 else start}..{end - 1}", first, decided.record(), rows)


def after_newline(fh: BinaryIO, pos: int, size: int) -> int:
    """The offset just after the first ``\\n`` at or past ``pos`` (``size`` if there is none)."""
    fh.seek(pos)
    while pos < size:
        data = fh.read(min(_SCAN, size - pos))
        if not data:
            break
        found = data.find(b"\n")
        if found >= 0:
            return pos + found + 1
        pos += len(data)
    return size


class Bounded:
    """Reads ``[start, end)`` of ``fh``."""

    def __init__(self, fh: BinaryIO, start: int, end: int):
        self.fh = fh
        self.left = max(0, end - start)
        fh.seek(start)

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        if n <= 0:
            return b""
        data = self.fh.read(n)
        self.left -= len(data)
        return data
