"""Detections on arrival: the contracts of the scorer (``landfall.detect``) and how every reader finds its results.

Every committed arrival of a dataset with a champion is scored by that champion (``landfall.detect.handler``), as
``landfall score`` scores it. The results of one arrival under one champion live in their own folder, create-only:

``scores/<dataset>/<arrival>/<champion job>/``

- ``scores-<digest>.parquet``: the scores (a series: one row per row of the file, in its order, ``row``, ``time``,
  ``score``, ``anomaly``; instances: ``index``, ``error``, ``anomaly``, ``index`` the record's position in the
  arrival, which is what the training job's champion view reuses: ``trainer.judging.champion_view``), named by their
  content's digest so a retry writes the same name with the same bytes;
- ``summary.json`` (``landfall.detections/v1``), written **last**, create-only: the detection message it announces
  (``message``), the full summary of the scoring (what ``landfall score --json`` prints), and how long it took;
- ``published.json``, create-only, once the message is on the topic (its message id).

So a folder without ``summary.json`` is an attempt in progress (readers ignore it), and one with a summary but no
``published.json`` is a message not yet known to be sent: whoever finds it publishes the message the summary holds
(not a new one) and then writes the marker. The message can therefore be sent twice only when a process dies
between the publish and the marker: consumers drop repeats by ``detection_id``, the idempotency key of
(arrival, champion job). A champion that comes back by a rollback is the same job, so the same results.

The message, ``landfall.detection/v1`` on the topic ``landfall-detections`` (attributes: ``schema``,
``detection_id``, ``dataset``, ``arrival``, ``champion_run``, ``anomalies``): ``dataset``, ``arrival``, ``manifest``,
``source`` (bucket, name, generation), ``check_status`` (the arrival's checks: a quarantined arrival is scored too),
``champion`` (``run``, ``model``, ``seq``), ``threshold``, ``kind`` (``series`` | ``instances``), ``count`` (rows or
instances scored), ``anomalies`` (rows or instances above the threshold), ``ranges`` (series: maximal runs of
anomalous rows with ``start``/``end``/``peak`` times, ``*_at`` as ISO-8601 for timestamped series; instances: runs of
consecutive anomalous instances, ``start``/``end`` being instance indices), at most ``RANGES_IN_MESSAGE`` of them,
strongest first by peak and then in time order (``ranges_total`` counts them all; the summary has every one),
``scores`` and ``summary`` (the result URIs) and ``scored_at``.

A score request, ``landfall.score_request/v1`` (topic ``landfall-score-requests``, from ``landfall rescore``), asks
for one arrival to be scored again by the current champion; the scorer also takes the training requests
(``landfall.request/v1``) every committed arrival publishes. Both name the arrival by its manifest.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from landfall.core.contracts import layout
from landfall.core.contracts.layout import Layout
from landfall.core.contracts.messages import REQUEST_SCHEMA, TrainingRequest, clip, decode, loads, utc_now
from landfall.core.errors import Invalid, NotFound
from landfall.core.services.storage import Storage, join

SUMMARY_SCHEMA = "landfall.detections/v1"
MESSAGE_SCHEMA = "landfall.detection/v1"
SCORE_REQUEST_SCHEMA = "landfall.score_request/v1"
DETECTIONS_TOPIC = "landfall-detections"
SCORE_REQUESTS_TOPIC = "landfall-score-requests"
SCORER_DEAD_LETTER = "landfall-scorer-dead-letter"  # topic and pull subscription: requests the scorer gave up on
SUMMARY = "summary.json"
PUBLISHED = "published.json"
RANGES_IN_MESSAGE = 200  # a message stays far below Pub/Sub's 10 MB whatever the arrival


def arrival_prefix(lay: Layout, dataset: str, arrival: str) -> str:
    """``scores/<dataset>/<arrival>/``: every champion's results for one arrival."""
    return f"{lay.scores_prefix}{dataset}/{arrival}/"


def result_prefix(lay: Layout, dataset: str, arrival: str, run: str) -> str:
    """``scores/<dataset>/<arrival>/<champion job>/``."""
    return f"{arrival_prefix(lay, dataset, arrival)}{run}/"


def detection_id(dataset: str, arrival: str, run: str) -> str:
    """The idempotency key of (arrival, champion job)."""
    return hashlib.sha256(f"{dataset}\0{arrival}\0{run}".encode()).hexdigest()[:24]


@dataclasses.dataclass(frozen=True)
class ScoreRequest:
    """Score this arrival (its manifest) with the current champion: ``landfall rescore``'s message."""

    dataset: str
    manifest: str
    request_id: str
    reason: str = "rescore"
    requested_at: str = dataclasses.field(default_factory=utc_now)
    schema: str = SCORE_REQUEST_SCHEMA

    def to_json(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), sort_keys=True).encode()

    def attributes(self) -> dict[str, str]:
        return {"schema": self.schema, "dataset": self.dataset, "request_id": self.request_id}


def parse_request(data: bytes | str | None, attributes: dict[str, Any] | None = None) -> ScoreRequest:
    """The arrival a message asks to score: a training request (every committed arrival's) or a score request.
    ``Invalid`` (permanent) for anything else."""
    raw = loads(data, "score request") if data else dict(attributes or {})
    if not isinstance(raw, dict):
        raise Invalid("score request must be a JSON object")
    schema = raw.get("schema")
    if schema == REQUEST_SCHEMA:
        req = TrainingRequest.from_message(data, attributes)
        return ScoreRequest(req.dataset, req.manifest, req.request_id, req.reason, req.arrived_at)
    if schema != SCORE_REQUEST_SCHEMA:
        raise Invalid(f"score request schema is {clip(schema)}, expected {SCORE_REQUEST_SCHEMA!r} or "
                      f"{REQUEST_SCHEMA!r}")
    # The same checks as a training request's (dataset name, request id, a gs:// manifest).
    as_request = {"schema": REQUEST_SCHEMA, "dataset": raw.get("dataset"), "manifest": raw.get("manifest"),
                  "request_id": raw.get("request_id")}
    req = TrainingRequest.from_message(json.dumps(as_request))
    requested_at = raw.get("requested_at", "")
    if not isinstance(requested_at, str) or len(requested_at) > 64:
        raise Invalid(f"score request requested_at {clip(requested_at)} is not a timestamp")
    return ScoreRequest(req.dataset, req.manifest, req.request_id, "rescore", requested_at or utc_now())


def arrival_of_manifest(manifest_uri: str, lay: Layout, dataset: str) -> str:
    """The arrival id a manifest URI names (``Invalid`` when it is not a manifest of ``dataset``)."""
    _, name = layout.split_gs(manifest_uri)
    aid = layout.manifest_arrival(lay, dataset, name)
    if aid is None:
        raise Invalid(f"{clip(manifest_uri)} is not a manifest of dataset {dataset} "
                      f"({lay.tfrecords_prefix}{dataset}/<arrival>/manifest.json)")
    return aid


def message_ranges(ranges: list[dict[str, Any]], limit: int = RANGES_IN_MESSAGE) -> list[dict[str, Any]]:
    """At most ``limit`` ranges: the strongest by peak score, then in time order."""
    if len(ranges) <= limit:
        return list(ranges)
    strongest = sorted(ranges, key=lambda r: -float(r.get("peak_score") or 0.0))[:limit]
    return sorted(strongest, key=lambda r: (r.get("start", 0), r.get("first_row", 0)))  # time: rows follow the file


@dataclasses.dataclass(frozen=True)
class Summary:
    """``summary.json``: the message, the scoring's own summary, timings and where the results are."""

    message: dict[str, Any]
    scoring: dict[str, Any]
    timing: dict[str, Any]
    uri: str = ""
    schema: str = SUMMARY_SCHEMA

    @property
    def dataset(self) -> str:
        return str(self.message["dataset"])

    @property
    def arrival(self) -> str:
        return str(self.message["arrival"])

    @property
    def run(self) -> str:
        return str(self.message["champion"]["run"])

    @property
    def anomalies(self) -> int:
        return int(self.message.get("anomalies") or 0)

    def to_json(self) -> bytes:
        doc = dataclasses.asdict(self)
        doc.pop("uri")
        return json.dumps(doc, indent=2, sort_keys=True, default=float).encode()

    @classmethod
    def from_json(cls, text: str | bytes, uri: str = "") -> Summary:
        where = f"detections summary {uri}".strip()
        summary: Summary = decode(cls, text, SUMMARY_SCHEMA, where, lambda raw: cls(
            raw["message"], raw.get("scoring") or {}, raw.get("timing") or {}, uri))
        if not isinstance(summary.message, dict) or summary.message.get("schema") != MESSAGE_SCHEMA:
            raise Invalid(f"{where}: its message is not a {MESSAGE_SCHEMA} message")
        return summary


def read(storage: Storage, bucket: str, lay: Layout, dataset: str, arrival: str, run: str) -> Summary | None:
    """The summary of (arrival, champion job), or ``None`` while there is none."""
    uri = layout.gs(bucket, result_prefix(lay, dataset, arrival, run) + SUMMARY)
    try:
        return Summary.from_json(storage.read_bytes(uri), uri)
    except NotFound:
        return None


def marker_uri(summary: Summary) -> str:
    """``published.json`` beside the summary."""
    return join(summary.uri.rsplit("/", 1)[0], PUBLISHED)


def published(storage: Storage, summary: Summary) -> bool:
    return storage.exists(marker_uri(summary))


def for_arrival(storage: Storage, bucket: str, lay: Layout, dataset: str, arrival: str) -> list[Summary]:
    """Every champion's summary of one arrival, oldest first."""
    prefix = layout.gs(bucket, arrival_prefix(lay, dataset, arrival))
    return _summaries(storage, prefix)


def listing(storage: Storage, bucket: str, lay: Layout, dataset: str | None = None) -> list[Summary]:
    """Every summary of ``dataset`` (or of the bucket), oldest first by ``scored_at``. Unreadable summaries are
    left out (a reader must not stop at one bad object)."""
    prefix = layout.gs(bucket, lay.scores_prefix + (f"{dataset}/" if dataset else ""))
    return _summaries(storage, prefix)


def _summaries(storage: Storage, prefix: str) -> list[Summary]:
    out = []
    for uri in storage.list(prefix, suffix="/" + SUMMARY):
        try:
            out.append(Summary.from_json(storage.read_bytes(uri), uri))
        except (Invalid, NotFound, KeyError, TypeError):
            continue
    return sorted(out, key=lambda s: str(s.message.get("scored_at", "")))


def counts(summaries: list[Summary]) -> dict[str, Any]:
    """What ``landfall status`` shows: arrivals scored (by any champion), those with anomalies, the newest."""
    arrivals: dict[tuple[str, str], Summary] = {}
    for s in summaries:  # oldest first: the newest champion's summary of an arrival wins
        arrivals[(s.dataset, s.arrival)] = s
    newest = max(arrivals.values(), key=lambda s: str(s.message.get("scored_at", "")), default=None)
    return {"scored": len(arrivals), "anomalous": sum(1 for s in arrivals.values() if s.anomalies),
            "anomalies": sum(s.anomalies for s in arrivals.values()),
            "newest": None if newest is None else newest.message.get("scored_at")}


def loads_message(data: bytes | str) -> dict[str, Any]:
    """A ``landfall.detection/v1`` message's body (``Invalid`` otherwise)."""
    raw = loads(data, "detection message")
    if not isinstance(raw, dict) or raw.get("schema") != MESSAGE_SCHEMA:
        raise Invalid(f"not a {MESSAGE_SCHEMA} message")
    return raw
