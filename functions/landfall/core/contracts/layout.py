"""Bucket layout and the deterministic ids derived from an arriving object.

- arrivals:   gs://BUCKET/incoming/<dataset>/<any path>
- shards:     gs://BUCKET/tfrecords/<dataset>/<arrival-id>/part-00000-of-000NN.tfrecord + manifest.json
              (+ retracted.json once the arrival's object was overwritten or deleted; failing.json while its event
              fails and is retried: landfall.core.artifacts.failing)
- rejections: gs://BUCKET/rejected/<dataset>/<arrival-id>.json
- runs:       gs://BUCKET/runs/<job>/

Decision on object names: a path segment ``..`` or ``.`` is rejected (it cannot map to a path
unambiguously); spaces and non-ASCII characters in the file part are accepted and folded into a
safe arrival id with a hash. The dataset (first segment) must be a valid Kubernetes label value,
because it labels the training jobs. Names are checked whole (``fullmatch``: ``$`` would accept a final
newline), at the edge of both stages, before any of them becomes part of an object name.

Cloud Storage object names (https://cloud.google.com/storage/docs/objects#naming): 1-1024 bytes of UTF-8,
no carriage return or line feed; the control characters it says to avoid (XML 1.0's illegal ones) are
refused too (``object_name_problem``). A dataset (at most 63 bytes) and a request id (at most 128 bytes,
``REQUEST_ID_RE``) keep every name the stages derive from them (``requests/<dataset>/pending/<id>.json``,
``rejected/<dataset>/request-<id>.json`` ...) well inside that limit.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re

from landfall.core.config import Settings
from landfall.core.errors import BadInput


@dataclasses.dataclass(frozen=True)
class Layout(Settings):
    """Where things live in the bucket. Defaults are documented in docs/contracts.md."""

    incoming_prefix: str = "incoming/"
    tfrecords_prefix: str = "tfrecords/"
    rejected_prefix: str = "rejected/"
    runs_prefix: str = "runs/"
    requests_prefix: str = "requests/"  # the submit stage's bookkeeping: pending requests, each dataset's head
    # One create-only record per training request ever received (landfall.submit.ledger); kept apart from
    # requests/ because that is listed and these are only ever read by name.
    received_prefix: str = "received/"
    # Compaction (landfall.arrival.compaction): compacted shards, and the snapshots that name them.
    compacted_prefix: str = "compacted/"
    snapshots_prefix: str = "snapshots/"
    # Dataset specs (landfall.core.artifacts.specs): config/datasets/<dataset>.json, one generation per `landfall
    # datasets
    # apply`; written by the deploy build, read by every stage.
    specs_prefix: str = "config/datasets/"
    # Detections on arrival (landfall.core.artifacts.detections): scores/<dataset>/<arrival>/<champion job>/,
    # create-only.
    scores_prefix: str = "scores/"


DATASET_RE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")  # fullmatch only
REQUEST_ID_RE = re.compile(r"[A-Za-z0-9][-A-Za-z0-9_.]{0,127}")  # fullmatch only
MAX_OBJECT_NAME_BYTES = 1024
# CR, LF, and what XML 1.0 forbids or Cloud Storage says to avoid (C0 but tab; #x7F-#x84, #x86-#x9F)
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x84\x86-\x9f]")
INVALID_DATASET = "_invalid"
MANIFEST = "manifest.json"
RETRACTION = "retracted.json"
# An arrival's profile (landfall.core.quality.profile), written before its manifest; the dataset's reference beside the
# arrival folders (a name no arrival id takes: ids end in -g<generation>-<hex>); the operator's admission of a
# quarantined arrival (landfall.core.quality.quarantine), create-only.
PROFILE = "profile.json"
REFERENCE = "_reference.json"
ADMISSION = "admitted.json"
FAILING = "failing.json"  # the arrival's event fails and is retried (landfall.core.artifacts.failing)
DISPATCH = "dispatch.json"  # the arrival went to the Cloud Run convert job (landfall.arrival.route's marker)


@dataclasses.dataclass(frozen=True)
class Arrival:
    bucket: str
    name: str
    generation: int
    dataset: str
    arrival_id: str


def valid_dataset(name: object) -> bool:
    """A dataset name, whole (``DATASET_RE``): a Kubernetes label value, safe in object names."""
    return isinstance(name, str) and DATASET_RE.fullmatch(name) is not None


def valid_request_id(rid: object) -> bool:
    """A request id, whole (``REQUEST_ID_RE``): 1-128 ASCII letters, digits, '-', '_' or '.'."""
    return isinstance(rid, str) and REQUEST_ID_RE.fullmatch(rid) is not None


def object_name_problem(name: str) -> str | None:
    """Why Cloud Storage would refuse ``name`` as an object name (None: it would not)."""
    size = len(name.encode("utf-8", "surrogatepass"))
    if not 1 <= size <= MAX_OBJECT_NAME_BYTES:
        return f"is {size} bytes of UTF-8 (Cloud Storage allows 1-{MAX_OBJECT_NAME_BYTES})"
    bad = _CONTROL.search(name)
    if bad:
        return f"holds the control character {bad.group()!r}"
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid UTF-8"
    return None


def split_gs(uri: str) -> tuple[str, str]:
    if not uri.startswith("gs://"):
        raise ValueError(f"not a gs:// URI: {uri}")
    bucket, _, name = uri[5:].partition("/")
    return bucket, name


def gs(bucket: str, name: str) -> str:
    return f"gs://{bucket}/{name}"


def is_arrival(name: str, layout: Layout) -> bool:
    return name.startswith(layout.incoming_prefix) and not name.endswith("/")


ARRIVAL_ID_RE = re.compile(r"^(?P<slug>.+)-g(?P<generation>[0-9]+)-[0-9a-f]{8}$")


def _slug(name: str) -> str:
    base = name.rsplit("/", 1)[-1]
    return re.sub(r"[^A-Za-z0-9._-]+", "_", base).strip("._")[:48] or "object"


def arrival_id(name: str, generation: int) -> str:
    """Readable, path-safe and unique per (object name, generation)."""
    digest = hashlib.sha256(f"{name}#{generation}".encode()).hexdigest()[:8]
    return f"{_slug(name)}-g{generation}-{digest}"


def generations_prefix(name: str) -> str:
    """What the arrival ids of every generation of ``name`` start with (other names may share it)."""
    return f"{_slug(name)}-g"


def generation_of(name: str, aid: str) -> int | None:
    """The generation of ``name`` that ``aid`` is the arrival id of, or ``None`` if it is another object's."""
    match = ARRIVAL_ID_RE.match(aid)
    if not match:
        return None
    generation = int(match["generation"])
    return generation if arrival_id(name, generation) == aid else None


def request_id(bucket: str, name: str, generation: int) -> str:
    """Deterministic for an arrival, so duplicate publishes carry the same id."""
    return hashlib.sha256(f"gs://{bucket}/{name}#{generation}".encode()).hexdigest()[:20]


def dataset_of(name: str, layout: Layout) -> str:
    rest = name[len(layout.incoming_prefix) :]
    return rest.split("/", 1)[0] if "/" in rest else ""


def parse_arrival(bucket: str, name: str, generation: int, layout: Layout) -> Arrival:
    """Raises ``BadInput`` for a name the system cannot accept; callers checked ``is_arrival``."""
    aid = arrival_id(name, generation)
    dataset = dataset_of(name, layout)
    rest = name[len(layout.incoming_prefix) :]
    if any(seg in ("..", ".") for seg in rest.split("/")):
        raise BadInput("bad_object_name", f"object name {name!r} has a '.' or '..' path segment")
    if not dataset:
        raise BadInput("bad_object_name", f"object {name!r} is not under {layout.incoming_prefix}<dataset>/")
    if not valid_dataset(dataset):
        raise BadInput(
            "bad_dataset_name",
            f"dataset {dataset!r} must be 1-63 ASCII letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit",
        )
    return Arrival(bucket=bucket, name=name, generation=generation, dataset=dataset, arrival_id=aid)


def dataset_prefix(layout: Layout, dataset: str) -> str:
    """Where the dataset's arrivals are converted to: one folder per arrival id below it."""
    return f"{layout.tfrecords_prefix}{dataset}/"


def shards_prefix(layout: Layout, dataset: str, aid: str) -> str:
    return f"{dataset_prefix(layout, dataset)}{aid}/"


def manifest_name(layout: Layout, dataset: str, aid: str) -> str:
    return shards_prefix(layout, dataset, aid) + MANIFEST


def manifest_arrival(layout: Layout, dataset: str, name: str) -> str | None:
    """The arrival id whose manifest ``name`` is (``tfrecords/<dataset>/<arrival-id>/manifest.json``), else None."""
    prefix, suffix = dataset_prefix(layout, dataset), "/" + MANIFEST
    if not (name.startswith(prefix) and name.endswith(suffix)):
        return None
    aid = name[len(prefix) : -len(suffix)]
    return aid if aid and "/" not in aid and aid not in (".", "..") else None


def retraction_name(layout: Layout, dataset: str, aid: str) -> str:
    return shards_prefix(layout, dataset, aid) + RETRACTION


def failing_name(layout: Layout, dataset: str, aid: str) -> str:
    return shards_prefix(layout, dataset, aid) + FAILING


def dispatch_name(layout: Layout, dataset: str, aid: str) -> str:
    return shards_prefix(layout, dataset, aid) + DISPATCH


def reference_name(layout: Layout, dataset: str) -> str:
    """The dataset's reference profile (``landfall.reference/v1``): the merge of its admitted arrivals' profiles."""
    return dataset_prefix(layout, dataset) + REFERENCE


def shard_name(index: int, total: int) -> str:
    return f"part-{index:05d}-of-{total:05d}.tfrecord"


def rejection_name(layout: Layout, dataset: str | None, aid: str) -> str:
    return f"{layout.rejected_prefix}{dataset or INVALID_DATASET}/{aid}.json"
