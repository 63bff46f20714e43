"""A series dataset's labelled evaluation file: a recording with one 0/1 label per row (issue #55).

A series dataset (spec ``shape.window`` with ``arrival.series``) is a recording of a time column and channels, and its
labels are a column of it, as every labelled recording is published (TSB-AD's CSVs, the Server Machine Dataset's
``is_anomaly``) and as ``landfall score`` reads one. So its ``verdict.labelled.file`` is such a recording: any series
format the converter reads (CSV, CSV.gz, Parquet), with the spec's time column, channels and series rules
(``duplicate_times``, ``max_gap``, dropped columns), plus the label column (``verdict.labelled.label``, default
``label``), 1 anomalous. Windows of instances are not asked for: a spec with ``window.length: auto`` has no length
until its first arrival, and a user has rows, not windows. (An ``.npz`` of windows, for a fixed length, is still read as
instances: ``read_as_recording``.)

Read here whole (at most ``landfall.core.artifacts.labelled.MAX_BYTES``, the file and its rows as float32), sorted by
time (stable), each time once by the spec's ``duplicate_times`` (a merged row is anomalous if any of its rows was), and
cut into segments where a step is longer than ``max_gap`` (unset: ``series_windows.default_max_gap`` of its times).
Checks, one line each (``BadInput``): the converter's own reasons (``missing_column``, ``non_numeric``,
``non_finite`` ...), ``no_label``, ``label_values``, ``no_positives``, ``no_negatives``, ``too_large``, ``too_short``
(fewer than two rows). The trainer cuts the windows, with the job's own length
(``landfall.core.artifacts.labelled.LabelledRecording.windows``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from landfall.arrival import format_registry, formats, series
from landfall.arrival.config import ConverterConfig
from landfall.arrival.labelled_file import check
from landfall.core.artifacts.labelled import MAX_BYTES
from landfall.core.errors import BadInput
from landfall.core.rules import duplicates
from landfall.core.rules.series_windows import default_max_gap
from landfall.core.services.storage import Storage


@dataclasses.dataclass(frozen=True)
class Recording:
    rows: np.ndarray  # float32 [n, C], original units, sorted by time, each time once
    labels: np.ndarray  # uint8 [n], 0/1
    starts: np.ndarray  # int64 [k]: the first row of each segment (0 first)

    @property
    def positives(self) -> int:
        return int(self.labels.sum())


def read_as_recording(source: str) -> bool:
    """Whether a series dataset's labelled file ``source`` is read as a recording: a format a series arrives in (CSV,
    CSV.gz, Parquet). An ``.npz`` of windows (instances of a fixed ``window.length``) is read as instances, as
    before recordings were read."""
    try:
        return format_registry.named(formats.format_of(source)).series is not None
    except BadInput:
        return False


def load(storage: Storage, source: str, cfg: ConverterConfig, label: str) -> Recording:
    """Reads and checks ``source`` (a local path or ``gs://`` URI) as a recording of ``cfg``'s series."""
    size = storage.stat(source).size
    if size == 0:
        raise BadInput("empty_file", "the file is empty")
    if size > MAX_BYTES:
        raise BadInput("too_large", f"{size} bytes, more than a labelled evaluation file may have "
                       f"({MAX_BYTES >> 20} MiB)")
    fmt = formats.format_of(source)
    with storage.open_read(source) as fh:
        names, stamped = series.header(fmt, fh, cfg)
    if label not in names:
        raise BadInput("no_label", f"no label column {label!r} among the columns {names[:12]}: name it with "
                       "verdict.labelled.label")
    if label in cfg.series_channels or label == cfg.series_time_column:
        raise BadInput("no_label", f"the label column {label!r} is a channel (or the time) of the series")
    if not cfg.series_channels and label not in cfg.series_drop_columns:  # every other column is a channel
        cfg = dataclasses.replace(cfg, series_drop_columns=(*cfg.series_drop_columns, label))
    times, values, held = [], [], 0
    try:
        with storage.open_read(source) as fh:
            for t, v in series.chunks(fmt, fh, size, cfg, (label,)):
                held += t.nbytes + v.nbytes
                if held > 2 * MAX_BYTES:
                    raise BadInput("too_large", f"its rows hold more than {MAX_BYTES >> 20} MiB as float32, more "
                                   "than a labelled evaluation set may")
                times.append(t)
                values.append(v)
    except MemoryError as exc:
        raise formats.out_of_memory(exc) from exc
    if not times:
        raise BadInput("too_short", "no row: a labelled recording needs rows")
    t, v = np.concatenate(times), np.concatenate(values)
    order = np.argsort(t, kind="stable")
    features = v.shape[1] - 1
    raw = v[order, features]
    if not np.isfinite(raw).all() or ((raw != 0) & (raw != 1)).any():
        check(v[order, :features], raw, unit="row")  # names the first bad label, one line
    merger = duplicates.Merger(cfg.series_duplicate_times, stamped, labels_from=features)
    merged = list(merger.chunks([(t[order], v[order])]))
    t = np.concatenate([m[0] for m in merged])
    v = np.concatenate([m[1] for m in merged])
    if len(t) < 2:
        raise BadInput("too_short", f"{len(t)} row: a labelled recording needs rows to cut windows from")
    got = check(v[:, :features], v[:, features], unit="row")
    gap = cfg.series_max_gap if cfg.series_max_gap is not None else default_max_gap(t)
    starts = np.concatenate([[0], np.flatnonzero(np.diff(t) > gap) + 1]).astype(np.int64)
    return Recording(got.instances, got.labels, starts)
