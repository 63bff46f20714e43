"""The manifest, the training request, the rejection and the retraction: defined once, used by every stage.

``landfall.manifest/v1`` describes one converted arrival; shards are referenced only through it, and
it is written last, once, so a reader never sees partial data. ``landfall.request/v1`` asks for a
training run on a dataset; its ``request_id`` is deterministic for an arrival so consumers can drop
duplicate deliveries. ``landfall.rejection/v1`` records why a stage refused an input, for good.
``landfall.retraction/v1`` excludes an arrival whose object was overwritten or deleted (its manifest stays).

Every reader parses through ``loads``: JSON nested deeper than ``MAX_DEPTH`` (``json.loads`` would raise
``RecursionError`` at about 1,000) is ``Invalid`` before it is parsed. Values quoted in messages are
``clip``-ped, so a 10 MB field never becomes a 10 MB error line.
"""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import UTC, datetime
from typing import Any

from landfall.core.contracts import layout
from landfall.core.errors import Invalid
from landfall.core.rules import series_windows as windows

MANIFEST_SCHEMA = "landfall.manifest/v1"
REQUEST_SCHEMA = "landfall.request/v1"
METRICS_SCHEMA = "landfall.metrics/v1"
REJECTION_SCHEMA = "landfall.rejection/v1"
RETRACTION_SCHEMA = "landfall.retraction/v1"
INPUTS_SCHEMA = "landfall.inputs/v1"
INPUTS_SNAPSHOT_SCHEMA = "landfall.inputs/v2"  # v1 plus ``snapshot`` and ``skip``: ``manifests`` is the delta
REASONS = ("arrival", "manual")
MAX_DEPTH = 32  # the contracts nest 4 deep at most
CLIP = 120  # characters of a value quoted in a message
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')  # a string (skipped whole), or a bracket


def clip(value: Any, limit: int = CLIP) -> str:
    """``repr(value)``, cut to about ``limit`` characters, saying how long it was."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def _too_deep(text: str) -> bool:
    if text.count("[") + text.count("{") <= MAX_DEPTH:  # cannot nest deeper: the usual case, no scan
        return False
    depth = 0
    for token in _TOKENS.finditer(text):
        t = token.group()
        if t in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif t in "]}":
            depth -= 1
    return False


def loads(text: str | bytes, where: str) -> Any:
    """``json.loads`` with nesting bounded by ``MAX_DEPTH``; ``Invalid`` naming ``where`` otherwise."""
    try:
        if isinstance(text, bytes | bytearray):
            text = bytes(text).decode("utf-8")
        if not text.strip():
            raise Invalid(f"{where} is empty")
        if _too_deep(text):
            raise Invalid(f"{where} is JSON nested deeper than {MAX_DEPTH} levels")
        return json.loads(text)
    except Invalid:
        raise
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError, JSONDecodeError
        raise Invalid(f"{where} is not JSON: {clip(str(exc))}") from None


def loads_object(text: str | bytes, where: str) -> dict[str, Any]:
    """``loads``, and the document must be a JSON object: valid JSON of another type (``[]``, ``"x"``, ``42``,
    ``null``) is ``Invalid`` naming ``where`` too. Every reader of a record or a body that expects an object."""
    raw = loads(text, where)
    if not isinstance(raw, dict):
        raise Invalid(f"{where} is JSON but not an object (a {type(raw).__name__ if raw is not None else 'null'})")
    return raw


# What a record that breaks its contract raises when a view reads a field of the wrong type (a list for a number, a
# number for an object ...): the views (status, trace, report) name the record as unreadable in one line instead.
MISSHAPEN = (TypeError, AttributeError, ValueError, KeyError, IndexError)


def misshapen(uri: str, exc: Exception) -> str:
    """The one line a view shows for a record whose fields do not have their contract's types."""
    return f"unreadable: {uri} is not shaped as its contract says ({type(exc).__name__}: {clip(str(exc), 200)})"


def text_of(value: Any, limit: int = CLIP) -> str | None:
    """A field to show: a string, number or boolean as text (cut to ``limit``), anything else ``None``."""
    if isinstance(value, bool | int | float | str) and value != "":
        text = str(value)
        return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
    return None


def peeked(data: bytes | str | None, attributes: dict[str, str] | None, where: str) -> dict[str, Any]:
    """What a view shows of a body it only peeks at (a dead letter): its ``dataset``, ``request_id`` and
    ``manifest`` when it is a JSON object that has them (else the attributes'), and ``unreadable``, the one line
    saying why not, when it is not an object (invalid UTF-8, not JSON, another JSON type, empty)."""
    attributes = attributes or {}
    try:
        body, why = loads_object(data or b"", where), None
    except Invalid as exc:
        body, why = {}, str(exc)
    return {"dataset": text_of(body.get("dataset")) or text_of(attributes.get("dataset")),
            "request_id": text_of(body.get("request_id")),
            "manifest": text_of(body.get("manifest"), 300),
            "arrival": text_of(body.get("arrival")) or text_of(attributes.get("objectId"), 300),
            "unreadable": why}


def dead_letters(pubsub: Any, subscription: str, max_messages: int = 100,
                 timeout_s: float = 3.0) -> list[dict[str, Any]]:
    """The messages waiting in a dead-letter ``subscription``, peeked (``PubSub.peek``: left there), each as the views
    show one (``landfall status``, ``landfall report``): ``message_id``, ``attempts`` and what ``peeked`` reads of its
    body, whatever the body is (a poison message is what dead-letters). The peek's ``LandfallError`` is raised."""
    return [{"message_id": m.message_id, "attempts": m.delivery_attempt,
             **peeked(m.data, m.attributes, f"dead letter {m.message_id}")}
            for m in pubsub.peek(subscription, max_messages=max_messages, timeout_s=timeout_s)]


def decode(cls: Any, text: str | bytes, schema: str | tuple[str, ...], where: str, build: Any = None) -> Any:
    """Every contract's reader: JSON, the expected ``schema``, then ``build(raw)`` (default: the dataclass
    from the fields it knows, so a newer writer's extra fields are ignored); anything malformed is one
    ``Invalid`` naming ``where`` and the reason."""
    raw = loads(text, where)
    try:
        found = raw.get("schema") if isinstance(raw, dict) else None
        if found not in (schema if isinstance(schema, tuple) else (schema,)):
            raise Invalid(f"{where}: schema is {clip(found)}, expected {schema!r}")
        if build is not None:
            return build(raw)
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in fields})
    except Invalid:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise Invalid(f"{where}: not a valid {schema}: {clip(str(exc))}") from None


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclasses.dataclass(frozen=True)
class Source:
    bucket: str
    name: str
    generation: int
    size: int
    crc32c: str | None = None


@dataclasses.dataclass(frozen=True)
class Shard:
    uri: str
    count: int
    bytes: int
    crc32c: str  # base64 of the big-endian CRC32C, as Cloud Storage reports it


@dataclasses.dataclass(frozen=True)
class FeatureStats:
    mean: list[float]
    std: list[float]
    min: list[float]
    max: list[float]


@dataclasses.dataclass(frozen=True)
class Manifest:
    dataset: str
    arrival_id: str
    source: Source
    shape: list[int]  # per instance: [T, F]
    count: int
    shards: list[Shard]
    stats: FeatureStats
    dtype: str = "float32"
    dropped_nonfinite: int = 0
    created_at: str = dataclasses.field(default_factory=utc_now)
    converter_version: str = ""
    csv: dict[str, Any] | None = None  # CSV arrivals: the header and dialect decided (landfall.arrival.csvfile)
    schema: str = MANIFEST_SCHEMA
    # The dataset spec it was converted under (landfall.core.artifacts.specs); None: none.
    spec_generation: int | None = None
    # A series arrival (landfall.core.rules.series_windows): stored as rows, ``count`` is its windows; None: instances.
    series: dict[str, Any] | None = None
    # The arrival's checks against its dataset's reference (landfall.core.quality.checks, landfall.arrival.screen):
    # {status: first|admitted|warned|quarantined, reference: {arrivals, rows, generation}, findings: [...],
    # profile: "profile.json"}; None: not profiled (LANDFALL_PROFILE=false, or written before profiles).
    checks: dict[str, Any] | None = None

    @property
    def quarantined(self) -> bool:
        """Held back by a check until an operator admits it (``landfall admit``)."""
        return bool(self.checks) and self.checks.get("status") == "quarantined"

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes, where: str = "manifest") -> Manifest:
        manifest: Manifest = decode(cls, text, MANIFEST_SCHEMA, where, lambda raw: cls(**{
            **raw, "source": Source(**raw["source"]), "shards": [Shard(**s) for s in raw["shards"]],
            "stats": FeatureStats(**raw["stats"])}))
        manifest.check(where)
        return manifest

    def check(self, where: str = "manifest") -> None:
        if len(self.shape) != 2 or any(not isinstance(d, int) or d <= 0 for d in self.shape):
            raise Invalid(f"{where}: shape {self.shape} must be two positive integers [T, F]")
        if not _count(self.count) or self.count <= 0:
            raise Invalid(f"{where}: count {clip(self.count)} must be a positive integer")
        bad = [s.count for s in self.shards if not _count(s.count) or not _count(s.bytes)]
        if bad:
            raise Invalid(f"{where}: shard count {clip(bad[0])} (or its bytes) is not a non-negative integer")
        if sum(s.count for s in self.shards) != self.count:
            raise Invalid(f"{where}: shard counts do not add up to count={self.count}")
        if len(self.stats.mean) != self.shape[1]:
            raise Invalid(f"{where}: stats have {len(self.stats.mean)} features, shape says {self.shape[1]}")
        if self.series is not None:
            problem = windows.check(self.series, self.shape, self.count, where)
            if problem:
                raise Invalid(problem)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclasses.dataclass(frozen=True)
class TrainingRequest:
    dataset: str
    manifest: str  # gs:// URI of the newest manifest this request is about
    request_id: str
    reason: str = "arrival"
    arrived_at: str = dataclasses.field(default_factory=utc_now)
    schema: str = REQUEST_SCHEMA

    def to_json(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), sort_keys=True).encode()

    def attributes(self) -> dict[str, str]:
        return {k: str(v) for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_message(cls, data: bytes | str | None, attributes: dict[str, Any] | None = None) -> TrainingRequest:
        """Parses the JSON body (attributes are a fallback for an empty body). Raises ``Invalid``."""
        raw: Any = loads(data, "training request") if data else dict(attributes or {})
        if not isinstance(raw, dict):
            raise Invalid("training request must be a JSON object")
        if raw.get("schema") != REQUEST_SCHEMA:
            raise Invalid(f"training request schema is {clip(raw.get('schema'))}, expected {REQUEST_SCHEMA!r}")
        fields = {f.name for f in dataclasses.fields(cls)}
        missing = [k for k in ("dataset", "manifest", "request_id") if not raw.get(k)]
        if missing:
            raise Invalid(f"training request lacks {', '.join(missing)}")
        if raw.get("reason", "arrival") not in REASONS:
            raise Invalid(f"training request reason {clip(raw.get('reason'))} is not one of {REASONS}")
        if not layout.valid_dataset(raw["dataset"]):
            raise Invalid(f"training request dataset {clip(raw['dataset'])} is not a dataset name (1-63 ASCII "
                          "letters, digits, '-', '_' or '.', starting and ending with a letter or digit)")
        if not layout.valid_request_id(raw["request_id"]):
            raise Invalid(f"training request request_id {clip(raw['request_id'])} is not 1-128 ASCII letters, "
                          "digits, '-', '_' or '.' starting with a letter or digit")
        manifest = raw["manifest"]
        if not isinstance(manifest, str) or not manifest.startswith("gs://"):
            raise Invalid(f"training request manifest {clip(manifest)} is not a gs:// URI")
        bucket, name = layout.split_gs(manifest)
        problem = layout.object_name_problem(name)
        if problem or not bucket:
            raise Invalid(f"training request manifest {clip(manifest)} is not a Cloud Storage object: its name "
                          f"{problem or 'is empty'}")
        if not isinstance(raw.get("arrived_at", ""), str) or len(raw.get("arrived_at", "")) > 64:
            raise Invalid(f"training request arrived_at {clip(raw.get('arrived_at'))} is not a timestamp")
        return cls(**{k: str(v) for k, v in raw.items() if k in fields})


@dataclasses.dataclass(frozen=True)
class Rejection:
    """Why a stage refused an input for good. Written by ``landfall.core.artifacts.rejections`` for both stages.

    ``reason`` is a short code: the arrival stage's ``BadInput`` reasons (``corrupt_npy``, ...) or, for the
    submit stage, the error class (``Invalid``, ``NotFound``). ``source`` is the arrived object (arrival
    stage); ``request`` the training request as received (submit stage).
    """

    stage: str  # arrival | submit
    reason: str
    detail: str
    dataset: str | None = None
    source: dict[str, Any] | None = None
    request: dict[str, Any] | str | None = None
    rejected_at: str = dataclasses.field(default_factory=utc_now)
    schema: str = REJECTION_SCHEMA

    def to_json(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True).encode()


@dataclasses.dataclass(frozen=True)
class Retraction:
    """An arrival no job may train on any more: its object was overwritten (``superseded``, by generation
    ``by_generation``) or deleted (``deleted``), or an operator rejected it in quarantine (``rejected``, ``by``
    whom: ``landfall reject``). Written next to the arrival's manifest, once, for good."""

    dataset: str
    arrival_id: str
    source: dict[str, Any]  # {bucket, name, generation}
    reason: str  # superseded | deleted | rejected
    by_generation: int | None = None
    retracted_at: str = dataclasses.field(default_factory=utc_now)
    schema: str = RETRACTION_SCHEMA
    by: str | None = None  # who rejected it (reason rejected)

    def to_json(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True).encode()


@dataclasses.dataclass(frozen=True)
class InputManifest:
    uri: str
    generation: int
    count: int | None = None  # from the manifest object's metadata, when the converter recorded it


@dataclasses.dataclass(frozen=True)
class JobInputs:
    """What one training job trains on, fixed when it is released: ``gs://BUCKET/runs/<job>/inputs.json``.

    Written once (create-only) before the TFJob exists; the TFJob names only this URI, so its size does
    not grow with the arrivals or requests it covers. ``seq`` numbers a dataset's jobs 1, 2, 3...; ``after``
    is the job it follows. ``requests`` are the requests it covers: ``{request_id, reason, manifest}``.
    With a ``snapshot`` (``landfall.inputs/v2``, ``landfall.core.artifacts.snapshots``) the job trains on that
    snapshot's compacted shards, less the arrivals in ``skip`` (retracted since), plus ``manifests``,
    the arrivals the snapshot does not hold; without one (v1) on ``manifests`` alone.
    """

    dataset: str
    job: str
    seq: int
    manifests: list[InputManifest]
    requests: list[dict[str, str]]
    after: str | None = None
    window: int = 0
    released_at: str = dataclasses.field(default_factory=utc_now)
    schema: str = INPUTS_SCHEMA
    snapshot: str | None = None
    skip: list[str] = dataclasses.field(default_factory=list)  # arrival ids in the snapshot, retracted since
    spec_generation: int | None = None  # the dataset spec the job was released under (landfall.core.artifacts.specs)

    def to_json(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), sort_keys=True).encode()

    @property
    def manifest_uris(self) -> list[str]:
        return [m.uri for m in self.manifests]

    @classmethod
    def from_json(cls, text: str | bytes, where: str = "inputs") -> JobInputs:
        return decode(cls, text, (INPUTS_SCHEMA, INPUTS_SNAPSHOT_SCHEMA), where,  # type: ignore[no-any-return]
                      lambda raw: cls(**{**raw, "manifests": [InputManifest(**m) for m in raw["manifests"]]}))


def holds_back(storage: Any, info: Any) -> bool:
    """Whether a listed manifest object (``info``: ``uri``, ``metadata``; ``storage``: what lists and reads it) holds
    its arrival back from training because its checks quarantined it: Cloud Storage keeps that in the object's
    metadata (``quarantined: "true"``, written with the manifest); where no metadata is kept (local disk), the
    manifest's own ``checks`` say it. The one answer every reader gives (the training listing, the reference's
    refresh, ``landfall status``, ``trace`` and ``report``; issue #56). **A manifest that cannot be read or parsed holds
    its arrival back too**: no job could load it, so counting it live would fail every job of its dataset, and the
    views list it as held instead of live. Whether an operator admitted it is the caller's (its admission record)."""
    if info.metadata is not None or str(info.uri).startswith("gs://"):
        return (info.metadata or {}).get("quarantined") == "true"
    from landfall.core.errors import LandfallError

    try:
        return Manifest.from_json(storage.read_bytes(info.uri), info.uri).quarantined
    except LandfallError:
        return True
