"""Bucket layout and the deterministic ids derived from an arriving object.

- arrivals:   gs://BUCKET/incoming/<dataset>/<any path>
- shards:     gs://BUCKET/tfrecords/<dataset>/<arrival-id>/part-00000-of-000NN.tfrecord + manifest.json
              (+ retracted.json once the arrival's object was overwritten or deleted)
- rejections: gs://BUCKET/rejected/<dataset>/<arrival-id>.json
- runs:       gs://BUCKET/runs/<job>/

Decision on object names: a path segment ``..`` or ``.`` is rejected (it cannot map to a path
unambiguously); spaces and non-ASCII characters in the file part are accepted and folded into a
safe arrival id with a hash. The dataset (first segment) must be a valid Kubernetes label value,
because it labels the training jobs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re

from landfall.core.config import Layout
from landfall.core.errors import BadInput

DATASET_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
INVALID_DATASET = "_invalid"
MANIFEST = "manifest.json"
RETRACTION = "retracted.json"


@dataclasses.dataclass(frozen=True)
class Arrival:
    bucket: str
    name: str
    generation: int
    dataset: str
    arrival_id: str


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
    if not DATASET_RE.match(dataset):
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


def retraction_name(layout: Layout, dataset: str, aid: str) -> str:
    return shards_prefix(layout, dataset, aid) + RETRACTION


def shard_name(index: int, total: int) -> str:
    return f"part-{index:05d}-of-{total:05d}.tfrecord"


def rejection_name(layout: Layout, dataset: str | None, aid: str) -> str:
    return f"{layout.rejected_prefix}{dataset or INVALID_DATASET}/{aid}.json"
