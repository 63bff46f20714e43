"""The input formats, one module each (issue #56): what each format can do, looked up by the readers and the router.

Every reader of an arrival asks this registry, never a chain of ``if fmt == ...``: the instance reader
(``formats.read``), the series readers (``series.chunks``, ``series.header``, ``series.share``), the byte-range split
of a ranged conversion (``ranges.share``), the router's inline limit (``route``) and the labelled-file reader
(``labelled_file.read``).

**To add a format**, write one module (``landfall.arrival.format_npy`` is the smallest) that defines ``FORMAT``, a
``Format``:

- ``name`` and ``suffixes``: the object-name endings it is chosen by (lower-case; the longest match wins);
- ``rate``: the stored bytes per second per vCPU the converter reaches on it (``landfall bench convert --rates``), which
  sets the largest object the function converts in-process (``route.inline_limit``);
- ``instances(src, size, cfg) -> (chunks, csv)``: its instances, float32 ``[k, T, F]`` chunks (``csv``: what was
  decided about a CSV, recorded in the manifest, or None);
- ``ranges(src, size, cfg, index, count) -> ranges.Share``, or None: task ``index`` of ``count``'s share of the file,
  for a large file converted in ranged tasks (None: not splittable, task 0 converts it whole);
- ``series``, a ``SeriesReader``, or None: a series arrival (a time column and channels) in this format;
- ``labelled(fh, size, cfg, label) -> (instances, labels)``, or None with ``no_labels`` saying why (``{label}`` is
  the label's name).

then register it: its module name in ``MODULES`` below, or in ``LANDFALL_FORMATS`` (``module[,module]``, a plug-in
that ships outside the package), or ``register(FORMAT)``. Nothing else changes: the converter, the ranged tasks, the
router, ``landfall score`` and the labelled check read it through the registry. The modules are loaded by name on
first use, as the engines are (``landfall.submit.engine``), so a format module may use the readers that look it up.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from collections.abc import Callable
from typing import Any

from landfall.core.errors import BadInput

MODULES = ("landfall.arrival.format_npy", "landfall.arrival.format_npz", "landfall.arrival.format_csv",
           "landfall.arrival.format_csv_gz", "landfall.arrival.format_parquet")
ENV_PLUGINS = "LANDFALL_FORMATS"


@dataclasses.dataclass(frozen=True)
class SeriesReader:
    """How a series arrives in a format: ``chunks(src, cfg, extra)`` its (times, values) in file order;
    ``head(src, cfg) -> (column names, the first row's time value or None)``; ``share(fh, size, cfg, index, count)``
    task ``index`` of ``count``'s share (``landfall.arrival.series.Share``)."""

    chunks: Callable[..., Any]
    head: Callable[..., tuple[list[str], Any]]
    share: Callable[..., Any]


@dataclasses.dataclass(frozen=True)
class Format:
    """What one input format can do (the module docstring)."""

    name: str
    suffixes: tuple[str, ...]
    rate: float
    instances: Callable[..., tuple[Any, dict[str, Any] | None]]
    ranges: Callable[..., Any] | None = None
    series: SeriesReader | None = None
    labelled: Callable[..., tuple[Any, Any]] | None = None
    no_labels: str = "a labelled set cannot arrive in this format"


_FORMATS: dict[str, Format] = {}
_LOADED: list[bool] = []


def register(fmt: Format) -> Format:
    """Adds ``fmt`` (idempotent by name; a later registration replaces an earlier one); returns it."""
    _FORMATS[fmt.name] = fmt
    return fmt


def unregister(name: str) -> None:
    """Removes the format called ``name`` (a test's own format, once the test is done); a no-op if absent."""
    _load().pop(name, None)


def _load() -> dict[str, Format]:
    if not _LOADED:
        plugins = [m.strip() for m in os.environ.get(ENV_PLUGINS, "").split(",") if m.strip()]
        for name in (*MODULES, *plugins):
            register(importlib.import_module(name).FORMAT)
        _LOADED.append(True)
    return _FORMATS


def known() -> list[Format]:
    """Every registered format, in registration order."""
    return list(_load().values())


def _listed(formats: list[Format]) -> str:
    names = [f.suffixes[0] for f in formats]
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else "".join(names)


def named(name: str) -> Format:
    """The format called ``name``; ``BadInput`` (``unsupported_format``) for one not registered."""
    found = _load().get(name)
    if found is None:
        raise BadInput("unsupported_format", f"no input format {name!r} (use {_listed(known())})")
    return found


def of_file(name: str) -> Format:
    """The format an object name's ending chooses (the longest suffix that matches); ``BadInput``
    (``unsupported_format``) naming the endings there are."""
    lower = name.lower()
    matches = [(len(s), f) for f in known() for s in f.suffixes if lower.endswith(s)]
    if not matches:
        raise BadInput("unsupported_format", f"{name!r} has an unsupported extension (use {_listed(known())})")
    return max(matches, key=lambda m: m[0])[1]


def series_reader(name: str) -> SeriesReader:
    """The series reader of format ``name``; ``BadInput`` naming the formats a series can arrive in."""
    found = named(name).series
    if found is None:
        raise BadInput("unsupported_format", f"a series arrives as {_listed([f for f in known() if f.series])}, "
                       f"not .{name}")
    return found
