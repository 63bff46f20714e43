"""``landfall rescore --dataset D [--since T] [--dry-run]``: score a dataset's arrivals again with its current champion.

A new champion does not go back over old arrivals by itself: the scorer (``landfall.detect``) scores each arrival
once, when it is committed, with the champion of that moment. This asks it to: one ``landfall.score_request/v1``
message per arrival (live or quarantined, not retracted) committed at or after ``--since`` (the manifest's
``created_at``; an ISO-8601 date or time, UTC unless it says otherwise), on the topic ``landfall-score-requests``
(``LANDFALL_SCORE_REQUESTS_TOPIC``), which the scorer takes like the arrivals' own requests. Each (arrival, champion)
is still scored and announced once: an arrival this champion already scored is answered from its results, without a
new message. Prints one JSON line: how many requests were published, and the champion that will score them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from datetime import datetime

from landfall.core.artifacts import champion, detections, retractions
from landfall.core.contracts.layout import Layout
from landfall.core.contracts.messages import Manifest
from landfall.core.errors import Invalid, NotFound
from landfall.core.rules import timestamps


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", required=True, help="the dataset whose arrivals are scored again")
    p.add_argument("--since", help="only arrivals committed at or after this ISO-8601 date or time (UTC by default)")
    p.add_argument("--bucket", help="bucket (LANDFALL_BUCKET)")
    p.add_argument("--project", help="Google Cloud project (GOOGLE_CLOUD_PROJECT)")
    p.add_argument("--topic", help="score requests topic (LANDFALL_SCORE_REQUESTS_TOPIC, default "
                                   f"{detections.SCORE_REQUESTS_TOPIC})")
    p.add_argument("--dry-run", action="store_true", help="count the arrivals, publish nothing")


def parse_since(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return timestamps.parse(text)
    except ValueError:
        raise Invalid(f"--since {text!r} is not an ISO-8601 date or time (e.g. 2026-12-01 or 2026-12-01T08:00Z)") \
            from None


def run(args: argparse.Namespace) -> int:
    from landfall.cli.common import reporting_errors
    from landfall.local.stack import use_running_stack

    use_running_stack(args=args)
    return reporting_errors(args, rescore)


def rescore(args: argparse.Namespace) -> int:
    from landfall.core.services.pubsub import PubSub
    from landfall.core.services.storage import Storage
    from landfall.detect.config import DetectConfig

    cfg = DetectConfig.load(bucket=args.bucket, project=args.project)
    bucket, project = cfg.bucket, cfg.project
    if not bucket:
        raise NotFound("no bucket: pass --bucket or set LANDFALL_BUCKET")
    since = parse_since(args.since)
    storage, lay = Storage(project), Layout.load()
    current, _ = champion.read(storage, champion.bucket_root(bucket), args.dataset)
    if current is None:
        raise NotFound(f"dataset {args.dataset} has no champion: nothing would score its arrivals")
    listing = retractions.list_dataset(storage, f"gs://{bucket}/{lay.tfrecords_prefix}{args.dataset}/")
    chosen = []
    for listed in sorted(listing.live + listing.quarantined, key=lambda m: m.uri):
        if since is not None:
            created = Manifest.from_json(storage.read_bytes(listed.uri), listed.uri).created_at
            if timestamps.parse(created) < since:
                continue
        chosen.append(listed.uri)
    topic = args.topic or os.environ.get("LANDFALL_SCORE_REQUESTS_TOPIC", detections.SCORE_REQUESTS_TOPIC)
    published = 0
    if not args.dry_run:
        pubsub = PubSub(project)
        for uri in chosen:
            rid = "rescore-" + hashlib.sha256(f"{uri}\0{current.run}".encode()).hexdigest()[:24]
            request = detections.ScoreRequest(args.dataset, uri, rid)
            pubsub.publish(topic, request.to_json(), request.attributes())
            published += 1
    print(json.dumps({"dataset": args.dataset, "champion_run": current.run, "arrivals": len(chosen),
                      "published": published, "topic": topic, "since": args.since, "dry_run": args.dry_run}))
    return 0
