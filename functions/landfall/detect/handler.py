"""The scorer's stage: a committed arrival scored by its dataset's champion, the results written, the detection sent.

``handle(data, attributes, rt)`` takes one Pub/Sub message, a training request (every committed arrival publishes
one, quarantined arrivals included) or a ``landfall rescore`` score request (``landfall.core.artifacts.detections``),
and:

1. reads the arrival's manifest; an arrival retracted or gone is not scored (``gone``);
2. reads the dataset's champion; none yet: not scored (``no_champion``: a later champion does not go back to it
   unless ``landfall rescore`` asks);
3. if ``scores/<dataset>/<arrival>/<champion job>/summary.json`` exists, this (arrival, champion) was scored: its
   message is sent if it is not yet known to be (``published.json``), else nothing (``duplicate``);
4. else scores it exactly as ``landfall score`` does (``landfall.detect.score``): a series dataset's source object
   at the arrival's generation, located per row with the spec's window and stride (``count``, the scores and the
   ranges' ``first_row``/``last_row``/``peak_row`` in the source file's rows, as its sender wrote them, not the
   time-sorted series'); an instance dataset's records as its manifest lists them; the champion's own threshold;
5. writes the scores (``scores-<digest>.parquet``), then the summary (create-only, last), publishes the message on
   ``landfall-detections`` and writes ``published.json``.

Concurrent duplicates (a notification delivered twice, the same arrival republished): both may score, one creates
the summary; the other finds it without its marker and, while the summary is younger than ``publish_wait_s``, raises
a temporary error (redelivered later, it then finds the marker and sends nothing). So every (arrival, champion) is
announced once, except when a process dies between the publish and the marker (then the same message again,
``detection_id`` its key).

Retry classes, as every stage's: a malformed message, a manifest outside the configured bucket, a model that cannot
score (no threshold, another shape) or a file no window fits is permanent (logged, acknowledged: returns the
outcome); storage or Pub/Sub trouble is temporary (raised: the platform redelivers, and after 5 attempts the message
goes to ``landfall-scorer-dead-letter``).

The champion's model is loaded once per instance (``Models``: at most ``model_cache`` at a time), so a burst of one
dataset's arrivals costs one model load per instance, not one per arrival.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import socket
import tempfile
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Literal

from landfall.core import logs
from landfall.core.artifacts import champion as champion_mod
from landfall.core.artifacts import detections, retractions, specs
from landfall.core.artifacts.detections import ScoreRequest, Summary
from landfall.core.contracts import layout
from landfall.core.contracts.layout import Layout
from landfall.core.contracts.messages import Manifest, utc_now
from landfall.core.errors import BadInput, Invalid, NotFound, PermanentError, TemporaryError
from landfall.core.rules import timestamps
from landfall.core.rules.series_windows import MEAN
from landfall.core.runtime import Runtime
from landfall.core.services.pubsub import PubSub
from landfall.core.services.storage import Storage
from landfall.detect.config import DetectConfig
from landfall.detect.score import SeriesOptions, score_instances, score_series

log = logs.get("landfall.detect")


class Unscorable(Invalid):
    """The champion cannot score this arrival (no threshold, another shape, no window in the file): permanent."""

Outcome = Literal["published", "duplicate", "no_champion", "gone", "invalid", "unscorable"]
DetectRuntime = Runtime[DetectConfig]

STARTED_AT = time.time()
INSTANCE = f"{socket.gethostname()}-{os.getpid()}"


class Models:
    """The champions' scorers this instance holds, by model URI (least recently used dropped past ``size``), each
    loaded once even when concurrent requests ask for it together."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self.held: OrderedDict[str, Any] = OrderedDict()
        self.lock = threading.Lock()
        self.loading: dict[str, threading.Lock] = {}
        self.loads = 0
        self.cache_dir = tempfile.mkdtemp(prefix="landfall-scorer-")

    def get(self, storage: Storage, uri: str, files: dict[str, str] | None = None) -> tuple[Any, float]:
        """The scorer of ``uri`` (its ``files`` checked when it is loaded: the champion record's digests) and the
        seconds this call spent loading it (0 when held)."""
        from landfall.core import scoring

        with self.lock:
            if uri in self.held:
                self.held.move_to_end(uri)
                return self.held[uri], 0.0
            gate = self.loading.setdefault(uri, threading.Lock())
        with gate:
            with self.lock:
                if uri in self.held:
                    return self.held[uri], 0.0
            t0 = time.perf_counter()
            scorer = scoring.Scorer.load(storage, uri, self.cache_dir, files)
            took = time.perf_counter() - t0
            with self.lock:
                self.held[uri] = scorer
                self.loads += 1
                while len(self.held) > self.size:
                    self.held.popitem(last=False)
        log.info("champion loaded", extra={"fields": {"model": uri, "load_s": round(took, 3), "instance": INSTANCE}})
        return scorer, took


def runtime_from_env() -> DetectRuntime:
    config = DetectConfig.load()
    return Runtime(config, Layout.load(), Storage(config.project), PubSub(config.project))


@functools.cache
def runtime() -> DetectRuntime:
    """Built once per instance from the environment (``LANDFALL_*``, ``GOOGLE_CLOUD_PROJECT``)."""
    return runtime_from_env()


@functools.cache
def models(size: int) -> Models:
    return Models(size)


def handle(data: bytes | str | None, attributes: dict[str, Any] | None, rt: DetectRuntime) -> Outcome:
    """One message: the outcome; temporary trouble raises (module doc)."""
    try:
        request = detections.parse_request(data, attributes)
    except Invalid as exc:
        log.error("not a score request: %s", exc, extra={"fields": {"retry_class": "permanent"}})
        return "invalid"
    context = {"dataset": request.dataset, "request_id": request.request_id}
    try:
        return _handle(request, rt)
    except PermanentError as exc:
        outcome: Outcome = "unscorable" if isinstance(exc, Unscorable) else "invalid"
        log.error("not scored: %s", exc, extra={**context, "fields": {"retry_class": "permanent",
                                                                      "manifest": request.manifest,
                                                                      "outcome": outcome}})
        return outcome


def _handle(request: ScoreRequest, rt: DetectRuntime) -> Outcome:
    cfg, lay, storage = rt.config, rt.layout, rt.storage
    if not cfg.bucket:
        raise TemporaryError("LANDFALL_BUCKET is not set: the scorer reads and writes only its configured bucket")
    bucket, _ = layout.split_gs(request.manifest)
    if bucket != cfg.bucket:
        raise Invalid(f"manifest {request.manifest} is not in the bucket gs://{cfg.bucket}")
    aid = detections.arrival_of_manifest(request.manifest, lay, request.dataset)
    context = {"dataset": request.dataset, "arrival_id": aid}
    try:
        manifest = Manifest.from_json(storage.read_bytes(request.manifest), f"manifest {request.manifest}")
        arrival = layout.parse_arrival(manifest.source.bucket, manifest.source.name,
                                       int(manifest.source.generation), lay)
        if retractions.is_retracted(storage, lay, arrival):
            raise NotFound(f"arrival {aid} is retracted")
    except NotFound as exc:
        log.info("not scored: %s", exc, extra={**context, "fields": {"outcome": "gone"}})
        return "gone"
    root = champion_mod.bucket_root(cfg.bucket, cfg.models_prefix)
    current, _ = champion_mod.read(storage, root, request.dataset)
    if current is None:
        log.info("not scored: dataset %s has no champion yet", request.dataset,
                 extra={**context, "fields": {"outcome": "no_champion"}})
        return "no_champion"
    existing = detections.read(storage, cfg.bucket, lay, request.dataset, aid, current.run)
    if existing is not None:
        return announce(existing, rt, fresh=False)
    try:
        summary = _score(request, manifest, current, aid, rt)
    except (BadInput, Invalid, NotFound) as exc:
        raise Unscorable(f"arrival {aid} cannot be scored by {current.run}: {exc}") from None
    if not storage.create(summary.uri, summary.to_json(), content_type="application/json"):
        found = detections.read(storage, cfg.bucket, lay, request.dataset, aid, current.run)
        if found is None:  # pragma: no cover - created, then gone: nothing deletes summaries
            raise TemporaryError(f"{summary.uri} exists and cannot be read") from None
        return announce(found, rt, fresh=False)
    return announce(summary, rt, fresh=True)


def announce(summary: Summary, rt: DetectRuntime, *, fresh: bool) -> Outcome:
    """Sends the summary's message unless it is known to be sent (module doc: who sends, and when)."""
    storage = rt.storage
    context = {"dataset": summary.dataset, "arrival_id": summary.arrival}
    if detections.published(storage, summary):
        log.info("already scored by %s: nothing to send", summary.run,
                 extra={**context, "fields": {"outcome": "duplicate", "champion_run": summary.run}})
        return "duplicate"
    if not fresh:
        age = time.time() - _timestamp(summary.message.get("scored_at"))
        if age < rt.config.publish_wait_s:
            raise TemporaryError(f"{summary.uri} is {age:.0f} s old and not yet published: the attempt that wrote "
                                 f"it is sending it (retried; after {rt.config.publish_wait_s:g} s any attempt sends)")
    message = summary.message
    assert rt.pubsub is not None, "the scorer publishes detections"
    attributes = {"schema": detections.MESSAGE_SCHEMA, "detection_id": message["detection_id"],
                  "dataset": summary.dataset, "arrival": summary.arrival, "champion_run": summary.run,
                  "anomalies": str(summary.anomalies)}
    message_id = rt.pubsub.publish(rt.config.detections_topic, json.dumps(message, sort_keys=True).encode(),
                                   attributes)
    marker = detections.marker_uri(summary)
    storage.create(marker, json.dumps({"message_id": message_id, "published_at": utc_now(),
                                           "by": INSTANCE}).encode(), content_type="application/json")
    anomalous = summary.anomalies > 0
    (log.warning if anomalous else log.info)(
        "detections published", extra={**context, "fields": {
            "anomalies": summary.anomalies, "ranges": int(message.get("ranges_total") or 0),
            "champion_run": summary.run, "detection_id": message["detection_id"], "message_id": message_id,
            "outcome": "published", "scoring_s": summary.timing.get("scoring_s")}})
    return "published"


def _timestamp(text: Any) -> float:
    return timestamps.epoch(text) or 0.0


def _score(request: ScoreRequest, manifest: Manifest, current: champion_mod.Champion, aid: str,
           rt: DetectRuntime) -> Summary:
    """Scores the arrival and uploads its scores; the summary to create (not yet written)."""
    from landfall.core import scoring

    cfg, lay, storage = rt.config, rt.layout, rt.storage
    t0 = time.perf_counter()
    scorer, load_s = models(cfg.model_cache).get(storage, current.model, current.files)
    spec = specs.for_dataset(storage, cfg.bucket, request.dataset, lay)
    combine = scorer.combine(spec.combine if spec.series else MEAN)  # its own unit, else the spec's row score
    threshold = scoring.threshold_of(scorer, combine)
    source = layout.gs(manifest.source.bucket, manifest.source.name)
    folder = layout.gs(cfg.bucket, detections.result_prefix(lay, request.dataset, aid, current.run))
    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="landfall-scores-") as tmp:
        out = Path(tmp) / "scores.parquet"
        if spec.series:
            kind = "series"
            doc = score_series(storage, source, spec, current.model, scorer, threshold, out,
                               SeriesOptions(combine=combine), int(manifest.source.generation))
            count = int(doc["rows"])
        else:
            kind = "instances"
            doc = score_instances(storage, request.manifest, current.model, scorer, threshold, out)
            count = int(doc["count"])
        scoring_s = time.perf_counter() - t1
        data = out.read_bytes()
    digest = hashlib.sha256(data).hexdigest()[:16]
    scores_uri = f"{folder}scores-{digest}.parquet"
    storage.create(scores_uri, data, content_type="application/vnd.apache.parquet")  # False: a retry's, same bytes
    ranges = list(doc.get("ranges") or [])
    message = {
        "schema": detections.MESSAGE_SCHEMA,
        "detection_id": detections.detection_id(request.dataset, aid, current.run),
        "dataset": request.dataset, "arrival": aid, "manifest": request.manifest,
        "source": dataclasses.asdict(manifest.source),
        "check_status": (manifest.checks or {}).get("status"),
        "champion": {"run": current.run, "model": current.model, "seq": current.seq},
        "threshold": float(threshold), "kind": kind, "count": count, "anomalies": int(doc["anomalies"]),
        "ranges": detections.message_ranges(ranges), "ranges_total": len(ranges),
        "time": doc.get("time", "index"), "scores": scores_uri, "summary": folder + detections.SUMMARY,
        "reason": request.reason, "scored_at": utc_now(),
    }
    scoring_doc = {k: v for k, v in doc.items() if k not in ("out", "ranges")} | {"ranges": ranges,
                                                                                  "out": scores_uri}
    timing = {"model_load_s": round(load_s, 4), "scoring_s": round(scoring_s, 4),
              "total_s": round(time.perf_counter() - t0, 4), "instance": INSTANCE,
              "instance_started_at": STARTED_AT, "model_loads": models(cfg.model_cache).loads}
    return Summary(message, scoring_doc, timing, folder + detections.SUMMARY)
