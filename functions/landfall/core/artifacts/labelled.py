"""Labelled evaluation sets (a dataset spec's ``verdict.labelled``): the stored format, read by the trainer.

``landfall datasets apply`` reads a spec's labelled file with the converter's readers
(``landfall.arrival.labelled_file``), checks its labels, and stores the set here before it stores the spec:

- ``gs://BUCKET/config/labelled/<dataset>/<sha256>.npz``: ``instances`` float32 ``[n, T, F]`` in original units
  and ``labels`` uint8 ``[n]`` (1: anomalous, 0: normal), written create-only. The bytes are deterministic (an
  uncompressed zip with fixed member dates), and the name is their sha256: the same set converted again is the
  same object, so re-applying an unchanged spec writes nothing and keeps the spec's generation.
- ``<sha256>.json`` (``landfall.labelled/v1``: ``dataset``, ``count``, ``positives``, ``shape``, ``sha256``,
  ``bytes``, ``source``, ``label``), written create-only after the ``.npz``: the commit point. An ``.npz``
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
from landfall.core.services.storage import Storage

SCHEMA = "landfall.labelled/v1"
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


def object_uri(bucket: str, dataset: str, sha256: str) -> str:
    if not valid_dataset(dataset):
        raise Invalid(f"dataset {dataset!r} is not a dataset name")
    return gs(bucket, f"{PREFIX}{dataset}/{sha256}.npz")


def manifest_uri(uri: str) -> str:
    if not uri.endswith(".npz"):
        raise Invalid(f"{uri}: a labelled set is an .npz object")
    return uri[: -len(".npz")] + ".json"


def encode(instances: np.ndarray, labels: np.ndarray) -> bytes:
    """The stored bytes: an uncompressed ``.npz`` (``numpy.load`` reads it) whose bytes depend only on the arrays."""
    x = np.ascontiguousarray(instances, dtype="<f4")
    y = np.ascontiguousarray(labels, dtype=np.uint8)
    if x.ndim != 3 or y.shape != (len(x),):
        raise Invalid(f"a labelled set is instances [n, T, F] and labels [n], not {x.shape} and {y.shape}")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for name, arr in (("instances", x), ("labels", y)):
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


def write(storage: Storage, bucket: str, dataset: str, instances: np.ndarray, labels: np.ndarray, *,
          source: str, label: str) -> str:
    """Stores the set create-only (``.npz``, then its manifest last) and returns the ``.npz`` URI. Idempotent:
    a set already committed is left as it is; an ``.npz`` left without its manifest gets it."""
    data = encode(instances, labels)
    if len(data) > MAX_BYTES:
        raise Invalid(f"labelled set of dataset {dataset}: {len(data)} bytes stored, more than {MAX_BYTES >> 20} MiB")
    digest = hashlib.sha256(data).hexdigest()
    uri = object_uri(bucket, dataset, digest)
    manifest = manifest_uri(uri)
    if storage.exists(manifest):
        return uri
    storage.create(uri, data)  # False: an earlier apply wrote these very bytes (the name is their digest)
    y = np.asarray(labels)
    doc = {"schema": SCHEMA, "dataset": dataset, "count": len(y), "positives": int(y.sum()),
           "shape": list(np.shape(instances)[1:]), "sha256": digest, "bytes": len(data), "source": source,
           "label": label}
    storage.create(manifest, (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode(),
                   content_type="application/json")
    return uri


def read(storage: Storage, uri: str) -> LabelledSet:
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
    x, y = decode(data, uri)
    if len(y) != manifest.get("count") or int(y.sum()) != manifest.get("positives"):
        raise Invalid(f"{uri}: {len(y)} instances, {int(y.sum())} positives; the manifest says "
                      f"{manifest.get('count')}, {manifest.get('positives')}")
    return LabelledSet(x, y, uri, manifest)
