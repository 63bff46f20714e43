"""Real public series shipped with the package (``bench/data/``; sources and licences in its README.md).

Small loaders returning numpy arrays, for tests and benchmarks that must not rest on generated sines alone:

- :func:`basic_motions` : the UEA BasicMotions problem, 40 + 40 instances of shape (100, 6), four activities.
- :func:`daphnet` : one Daphnet Freezing of Gait recording (S06R02E0 as aeon ships it), 7,040 rows x 9 channels.
- :func:`sliding_windows` : cut a (length, features) series into windows of ``width`` rows every ``stride``.
- :func:`labelled_series` : the labelled anomaly-detection series (a normal training part, a test part with 0/1
  labels per row): ``kdd135`` (UCR InternalBleeding16), ``ecg3`` (GutenTAG ecg-diff-count-3) and
  ``basic_motions`` (BasicMotions' Walking recordings with Running ones put in as the anomalies).

No dependency beyond numpy: the ``.ts`` format (``#`` comment lines, ``@`` header lines, then one instance
per line, its dimensions separated by ``:``, each a comma-separated series, the class label last) is
parsed here rather than through aeon.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent / "data"

BASIC_MOTIONS_CLASSES = ("Standing", "Running", "Walking", "Badminton")
"""The activities as the ``.ts`` files' ``@classLabel`` line names them (in that order)."""

DAPHNET_CHANNELS = (
    "ankle_horiz_fwd", "ankle_vert", "ankle_horiz_lateral",
    "leg_horiz_fwd", "leg_vert", "leg_horiz_lateral",
    "trunk_horiz_fwd", "trunk_vert", "trunk_horiz_lateral",
)
"""The nine acceleration channels of the Daphnet CSV, in mg (1/1000 g), as its header names them."""


def read_ts(path: Path | str) -> tuple[np.ndarray, np.ndarray, dict[str, str]]:
    """Parse an equal-length ``.ts`` file: ``(X float32 [n, length, dimensions], labels str [n], header)``.

    ``header`` maps each ``@key`` to the rest of its line (``problemName``, ``seriesLength``, ``classLabel`` ...).
    Raises ``ValueError`` naming the file and line for a ragged instance or a missing label.
    """
    path = Path(path)
    header: dict[str, str] = {}
    rows: list[np.ndarray] = []
    labels: list[str] = []
    in_data = False
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if not in_data:
                if not line.startswith("@"):
                    raise ValueError(f"{path}:{number}: data before @data")
                key, _, value = line[1:].partition(" ")
                header[key] = value.strip()
                in_data = key.lower() == "data"
                continue
            *dims, label = line.split(":")
            if not dims:
                raise ValueError(f"{path}:{number}: no label")
            series = [np.array(d.split(","), dtype=np.float32) for d in dims]
            if len({len(s) for s in series}) != 1:
                raise ValueError(f"{path}:{number}: dimensions of different lengths")
            rows.append(np.stack(series, axis=1))  # (length, dimensions)
            labels.append(label.strip())
    if len({r.shape for r in rows}) > 1:
        raise ValueError(f"{path}: instances of different shapes")
    return np.stack(rows), np.array(labels), header


def basic_motions(split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """BasicMotions, ``split`` "train" or "test": ``(X float32 [40, 100, 6], labels str [40])``.

    Each instance is ten seconds of a smart watch's 3-D accelerometer (channels 0-2) and 3-D gyroscope (3-5)
    at 10 Hz; labels are :data:`BASIC_MOTIONS_CLASSES`, ten instances of each in either split.
    """
    if split.lower() not in ("train", "test"):
        raise ValueError(f"basic_motions: split must be 'train' or 'test', not {split!r}")
    x, y, _ = read_ts(DATA / f"BasicMotions_{split.upper()}.ts")
    return x, y


def daphnet() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Daphnet S06R02E0: ``(timestamps datetime64[ms] [7040], values float32 [7040, 9], labels uint8 [7040])``.

    Values are :data:`DAPHNET_CHANNELS` in mg, sampled every 15.6 ms (64 Hz); labels are the file's
    ``is_anomaly`` column (freezing of gait), all 0 in this excerpt (see bench/data/README.md).
    """
    stamps, values, labels = [], [], []
    with (DATA / "S06R02E0.csv").open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        head = next(reader)
        if tuple(head[1:-1]) != DAPHNET_CHANNELS:
            raise ValueError(f"S06R02E0.csv: unexpected header {head}")
        for row in reader:
            stamps.append(row[0].replace(" ", "T"))
            values.append(row[1:-1])
            labels.append(row[-1])
    return (np.array(stamps, dtype="datetime64[ms]"),
            np.array(values, dtype=np.float32), np.array(labels, dtype=np.uint8))


def sliding_windows(series: np.ndarray, width: int, stride: int = 1) -> np.ndarray:
    """Windows of ``width`` consecutive rows every ``stride`` rows: ``[(len - width) // stride + 1, width, ...]``.

    A copy (not a strided view), so the windows can be written or changed freely; a series shorter than
    ``width`` gives no window.
    """
    if width < 1 or stride < 1:
        raise ValueError(f"sliding_windows: width and stride must be >= 1, not {width}, {stride}")
    series = np.asarray(series)
    if len(series) < width:
        return np.empty((0, width, *series.shape[1:]), dtype=series.dtype)
    view = np.lib.stride_tricks.sliding_window_view(series, width, axis=0)[::stride]
    # sliding_window_view puts the window axis last: (n, features..., width) -> (n, width, features...)
    return np.ascontiguousarray(np.moveaxis(view, -1, 1))


LABELLED = ("kdd135", "ecg3", "basic_motions")
"""The labelled series :func:`labelled_series` builds (``landfall bench detect`` runs on all three)."""


def _value_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """A TimeEval-format CSV (``timestamp``, value columns, ``is_anomaly`` last): ``(values [n, k], labels [n])``."""
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))[1:]
    table = np.array([[float(v) for v in r[1:]] for r in rows], dtype=np.float64)
    return table[:, :-1].astype(np.float32), table[:, -1].astype(np.uint8)


def labelled_series(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(train float32 [n, k], test float32 [m, k], test labels uint8 [m])`` for one of :data:`LABELLED`.

    - ``kdd135``: UCR anomaly archive series 135, InternalBleeding16 (KDD Cup 2021), as aeon 1.6.0 ships it: the
      first 1,200 points are the normal training part (the TRAIN file); the test part is the rest of the series
      (6,301 points) with one labelled anomaly of 12 points.
    - ``ecg3``: GutenTAG's ecg-diff-count-3 (TimeEval's synthetic ECG-like series, shipped by aeon 1.6.0 under
      ``UnitTest``): a normal training series (TRAIN_NA, 10,000 points) and a test series of 10,000 points with three
      labelled anomalies of 100 points.
    - ``basic_motions``: a multichannel (6) real recording made labelled: BasicMotions' ten Walking training
      recordings end to end are the training part; the test part is the ten Walking test recordings with two Running
      test recordings put in after the third and the seventh (the 200 Running points are the anomalies). The classes
      are the recordings' own labels, so no label here was made up, only the order.
    """
    if name == "kdd135":
        train, _ = _value_csv(DATA / "135_UCR_Anomaly_InternalBleeding16_TRAIN.csv")
        test, labels = _value_csv(DATA / "135_UCR_Anomaly_InternalBleeding16_TEST.csv")
        return train, test[len(train):], labels[len(train):]
    if name == "ecg3":
        train, _ = _value_csv(DATA / "ecg-diff-count-3_TRAIN_NA.csv")
        test, labels = _value_csv(DATA / "ecg-diff-count-3_TEST.csv")
        return train, test, labels
    if name == "basic_motions":
        x_train, y_train = basic_motions("train")
        x_test, y_test = basic_motions("test")
        walking, running = x_test[y_test == "Walking"], x_test[y_test == "Running"]
        parts, marks = [], []
        for k, rec in enumerate(walking):
            parts.append(rec)
            marks.append(np.zeros(len(rec), np.uint8))
            if k in (2, 6):
                parts.append(running[len(marks) % len(running)])
                marks.append(np.ones(len(parts[-1]), np.uint8))
        return np.concatenate(x_train[y_train == "Walking"]), np.concatenate(parts), np.concatenate(marks)
    raise ValueError(f"labelled_series: {name!r} is not one of {', '.join(LABELLED)}")
