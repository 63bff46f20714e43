"""Labelled evaluation sets (a dataset spec's ``verdict.labelled``): the stored format, read by the trainer.

``landfall datasets apply`` reads a spec's labelled file with the converter's readers
(``landfall.arrival.labelled_file``), checks its labels, and stores the set here before it stores the spec:

- ``gs://BUCKET/config/labelled/<dataset>/<sha256>.npz``: ``instances`` float32 ``[n, T, F]`` in original units
  and ``labels`` uint8 ``[n]`` (1: anomalous, 0: normal), written create-only. A series dataset's set is a
  **recording** (``landfall.arrival.labelled_recording``): ``rows`` float32 ``[n, C]`` in time order, ``labels`` uint8
  ``[n]`` (one per row) and ``starts`` int64 (each segment's first row); the trainer cuts it into windows of the
  job's own length (``LabelledRecording.windows``, ``series_windows.labelled_windows``), since a spec's window may be
  ``auto``. The bytes are deterministic (an
  uncompressed zip with fixed member dates), and the name is their sha256: the same set converted again is the
  same object, so re-applying an unchanged spec writes nothing and keeps the spec's generation.
- ``<sha256>.json`` (``landfall.labelled/v1``: ``dataset``, ``count``, ``positives``, ``shape``, ``sha256``,
  ``bytes``, ``source``, ``label``; a recording's ``kind: recording``, ``count`` its rows, ``shape`` ``[C]`` and
  ``segments``), written create-only after the ``.npz``: the commit point. An ``.npz``
  without its manifest (a crash in between) is not a set; the next apply writes the manifest.

The stored spec records the ``.npz`` URI as ``verdict.labelled.uri``; the job rendered from that generation
passes it to the trainer (``--labelled``), which ``read``s it: manifest first, then the ``.npz``, checked
against the manifest's sha256 and counts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import zipfile
from typing import Any

import numpy as np

from landfall.core.contracts.layout import gs, valid_dataset
from landfall.core.errors import Invalid
from landfall.core.rules.series_windows import labelled_windows
from landfall.core.services.storage import Storage

SCHEMA = "landfall.labelled/v1"
RECORDING = "recording"  # the manifest's ``kind`` of a series dataset's labelled recording (no kind: instances)
PREFIX = "config/labelled/"
MAX_BYTES = 256 * 2**20  # an evaluation file, not a training set: the source and the stored set alike
_DATE = (1980, 1, 1, 0, 0, 0)  # zip's earliest date: fixed, so the same arrays give the same bytes


@dataclasses.dataclass(frozen=True)
class LabelledSet:
    """A stored labelled set: ``instances`` float32 ``[n, T, F]`` (original units), ``labels`` uint8 ``[n]``."""

    instances: np.ndarray
    labels: np.ndarray
    uri: str = ""
    manifest: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def count(self) -> int:
        return len(self.labels)

    @property
    def positives(self) -> int:
        return int(self.labels.sum())


@dataclasses.dataclass(frozen=True)
class LabelledRecording:
    """A stored labelled recording: ``rows`` float32 ``[n, C]`` in time order, ``labels`` uint8 ``[n]``, ``starts``
    int64 (each segment's first row)."""

    rows: np.ndarray
    labels: np.ndarray
    starts: np.ndarray
    uri: str = ""
    manifest: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def positives(self) -> int:
        return int(self.labels.sum())

    def windows(self, length: int) -> LabelledSet:
        """The set a job of windows ``length`` rows long is judged on (``series_windows.labelled_windows``);
        ``Invalid`` when no segment holds a window."""
        try:
            x, y, stride = labelled_windows(self.rows, self.labels, self.starts, length)
        except ValueError as exc:
            raise Invalid(f"{self.uri}: {exc}") from None
        return LabelledSet(x, y, self.uri, {**self.manifest, "windows": {"length": length, "stride": stride,
                                                                          "count": len(y), "positives": int(y.sum())}})


def object_uri(bucket: str, dataset: str, sha256: str) -> str:
    if not valid_dataset(dataset):
        raise Invalid(f"dataset {dataset!r} is not a dataset name")
    return gs(bucket, f"{PREFIX}{dataset}/{sha256}.npz")


def manifest_uri(uri: str) -> str:
    if not uri.endswith(".npz"):
        raise Invalid(f"{uri}: a labelled set is an .npz object")
    return uri[: -len(".npz")] + ".json"


def encode(instances: np.ndarray, labels: np.ndarray, starts: np.ndarray | None = None) -> bytes:
    """The stored bytes: an uncompressed ``.npz`` (``numpy.load`` reads it) whose bytes depend only on the arrays.
    With ``starts``, a recording: ``instances`` are its rows ``[n, C]``."""
    x = np.ascontiguousarray(instances, dtype="<f4")
    y = np.ascontiguousarray(labels, dtype=np.uint8)
    if starts is not None:
        first = np.ascontiguousarray(starts, dtype="<i8")
        if x.ndim != 2 or y.shape != (len(x),) or not _segments(first, len(x)):
            raise Invalid(f"a labelled recording is rows [n, C], labels [n] and segment starts from 0, not "
                          f"{x.shape}, {y.shape} and {first[:4].tolist()}")
        members = (("rows", x), ("labels", y), ("starts", first))
    elif x.ndim != 3 or y.shape != (len(x),):
        raise Invalid(f"a labelled set is instances [n, T, F] and labels [n], not {x.shape} and {y.shape}")
    else:
        members = (("instances", x), ("labels", y))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for name, arr in members:
            with zf.open(zipfile.ZipInfo(f"{name}.npy", date_time=_DATE), "w", force_zip64=True) as member:
                np.lib.format.write_array(member, arr, allow_pickle=False)
    return buf.getvalue()


def decode(data: bytes, where: str = "labelled set") -> tuple[np.ndarray, np.ndarray]:
    """``(instances float32 [n, T, F], labels uint8 [n])`` of ``encode``'s bytes; ``Invalid`` otherwise."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            x, y = npz["instances"], npz["labels"]
    except (KeyError, ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise Invalid(f"{where}: not a labelled set ({type(exc).__name__}: {exc})") from None
    if x.dtype != np.float32 or x.ndim != 3 or y.dtype != np.uint8 or y.shape != (len(x),) or (y > 1).any():
        raise Invalid(f"{where}: not a labelled set (instances {x.dtype} {x.shape}, labels {y.dtype} {y.shape})")
    return x, y


def _segments(starts: np.ndarray, n: int) -> bool:
    return starts.ndim == 1 and len(starts) >= 1 and starts[0] == 0 and bool((np.diff(starts) > 0).all()) and (
        int(starts[-1]) < n)


def decode_recording(data: bytes, where: str = "labelled recording") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rows float32 [n, C], labels uint8 [n], starts int64)`` of ``encode``'s bytes for a recording."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            x, y, first = npz["rows"], npz["labels"], npz["starts"]
    except (KeyError, ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise Invalid(f"{where}: not a labelled recording ({type(exc).__name__}: {exc})") from None
    if (x.dtype != np.float32 or x.ndim != 2 or y.dtype != np.uint8 or y.shape != (len(x),) or (y > 1).any()
            or first.dtype != np.int64 or not _segments(first, len(x))):
        raise Invalid(f"{where}: not a labelled recording (rows {x.dtype} {x.shape}, labels {y.dtype} {y.shape})")
    return x, y, first


def write(storage: Storage, bucket: str, dataset: str, instances: np.ndarray, labels: np.ndarray, *,
          source: str, label: str, starts: np.ndarray | None = None) -> str:
    """Stores the set create-only (``.npz``, then its manifest last) and returns the ``.npz`` URI. Idempotent:
    a set already committed is left as it is; an ``.npz`` left without its manifest gets it. With ``starts``, a
    labelled recording (``instances`` its rows ``[n, C]``)."""
    return write_under(storage, object_uri(bucket, dataset, "x")[: -len("x.npz")], dataset, instances, labels,
                       source=source, label=label, starts=starts)


def write_under(storage: Storage, folder: str, dataset: str, instances: np.ndarray, labels: np.ndarray, *,
                source: str, label: str, starts: np.ndarray | None = None) -> str:
    """``write`` into ``folder`` (a ``gs://`` prefix or a local directory, ending in ``/``): the set's name is its
    digest there. ``landfall bench detect --half labelled`` stores its sets beside its runs so."""
    data = encode(instances, labels, starts)
    if len(data) > MAX_BYTES:
        raise Invalid(f"labelled set of dataset {dataset}: {len(data)} bytes stored, more than {MAX_BYTES >> 20} MiB")
    digest = hashlib.sha256(data).hexdigest()
    uri = f"{folder}{digest}.npz"
    manifest = manifest_uri(uri)
    if storage.exists(manifest):
        return uri
    storage.create(uri, data)  # False: an earlier apply wrote these very bytes (the name is their digest)
    y = np.asarray(labels)
    doc = {"schema": SCHEMA, "dataset": dataset, "count": len(y), "positives": int(y.sum()),
           "shape": list(np.shape(instances)[1:]), "sha256": digest, "bytes": len(data), "source": source,
           "label": label}
    if starts is not None:
        doc |= {"kind": RECORDING, "segments": len(starts)}
    storage.create(manifest, (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode(),
                   content_type="application/json")
    return uri


def read(storage: Storage, uri: str) -> LabelledSet | LabelledRecording:
    """The set at ``uri`` (an ``.npz`` this module wrote): ``NotFound`` when it or its manifest is missing,
    ``Invalid`` when its bytes do not match the manifest."""
    manifest_bytes = storage.read_bytes(manifest_uri(uri))
    try:
        manifest = json.loads(manifest_bytes)
    except ValueError as exc:
        raise Invalid(f"{manifest_uri(uri)}: not JSON: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA:
        raise Invalid(f"{manifest_uri(uri)}: not a {SCHEMA} manifest")
    if int(manifest.get("bytes", 0)) > MAX_BYTES:
        raise Invalid(f"{uri}: {manifest['bytes']} bytes, more than a labelled set may have ({MAX_BYTES >> 20} MiB)")
    data = storage.read_bytes(uri)
    digest = hashlib.sha256(data).hexdigest()
    if digest != manifest.get("sha256") or not uri.endswith(f"/{digest}.npz"):
        raise Invalid(f"{uri}: its sha256 is {digest}, not the {manifest.get('sha256')} its manifest and name say")
    recording = manifest.get("kind") == RECORDING
    if recording:
        x, y, first = decode_recording(data, uri)
    else:
        x, y = decode(data, uri)
    if len(y) != manifest.get("count") or int(y.sum()) != manifest.get("positives"):
        raise Invalid(f"{uri}: {len(y)} {'rows' if recording else 'instances'}, {int(y.sum())} positives; the "
                      f"manifest says {manifest.get('count')}, {manifest.get('positives')}")
    return LabelledRecording(x, y, first, uri, manifest) if recording else LabelledSet(x, y, uri, manifest)
