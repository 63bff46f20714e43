"""``landfall render-job | render-tfjob | republish``: the submit stage's requests and jobs, by command line.

- ``render-job --manifest URI [--engine tfjob|jobset] [--workers N] [--gpus-per-worker G] [--image IMG]``:
  prints the YAML of the job (a TFJob, or a JobSet under ``--engine jobset`` / ``LANDFALL_ENGINE=jobset``)
  the consumer would create as the dataset's next job; ``render-tfjob`` is its old name and renders the same
  (the engine ``LANDFALL_ENGINE`` or ``--engine`` names, TFJob by default). Numbered from the bucket's
  records when it is reachable (``--offline``: as its first job), and from the dataset's spec then, as the
  release renders it (docs/datasets.md); the flags given win over both. The job names only its
  ``runs/<job>/inputs.json``, which the release writes; the manifests are resolved then, not here.
- ``republish --dataset NAME | --manifest URI | gs://BUCKET/incoming/...``: publishes a request with
  ``reason: "manual"`` and a fresh ``request_id``, so a rerun happens although the data did not change.
  ``--dataset`` takes the dataset's newest live (not retracted) manifest.

Configuration comes from ``LANDFALL_*`` (``landfall.submit.config.JobConfig``); flags win.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import uuid
from typing import Any

from landfall.cli.common import job_config, reporting_errors
from landfall.core.artifacts import retractions, specs
from landfall.core.contracts import layout
from landfall.core.contracts.layout import Layout
from landfall.core.contracts.messages import Manifest, TrainingRequest, utc_now
from landfall.core.errors import NotFound
from landfall.submit import coalesce, engine, jobmeta
from landfall.submit.config import JobConfig


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    common = {"bucket": "bucket (LANDFALL_BUCKET)", "project": "Google Cloud project (GOOGLE_CLOUD_PROJECT)"}
    if name in ("render-job", "render-tfjob"):
        p.add_argument("--manifest", required=True, help="gs://BUCKET/tfrecords/<dataset>/<arrival>/manifest.json")
        p.add_argument("--engine", choices=["tfjob", "jobset"], help="LANDFALL_ENGINE (default tfjob)")
        p.add_argument("--workers", type=int)
        p.add_argument("--gpus-per-worker", type=int)
        p.add_argument("--image", dest="trainer_image")
        p.add_argument("--namespace")
        p.add_argument("--epochs", type=int)
        p.add_argument("--request-id", help="default: the arrival's deterministic id, read from the manifest")
        p.add_argument("--offline", action="store_true", help="do not read the bucket")
        p.add_argument("--bucket", help=common["bucket"])
    elif name == "republish":
        g = p.add_mutually_exclusive_group(required=True)
        g.add_argument("--dataset")
        g.add_argument("--manifest")
        g.add_argument("object", nargs="?", help="gs://BUCKET/incoming/<dataset>/... (an arrived object)")
        p.add_argument("--bucket", help=common["bucket"])
        p.add_argument("--topic", dest="request_topic", help="default landfall-training-requests")
        p.add_argument("--project", help=common["project"])


def run(args: argparse.Namespace) -> int:
    from landfall.core import logs

    logs.setup()
    if args.command == "republish":
        from landfall.local.stack import use_running_stack

        use_running_stack(args=args)  # next to `landfall up`, unless a flag or variable names a target
    return reporting_errors(args, {"render-job": render_tfjob, "render-tfjob": render_tfjob,
                                   "republish": republish}[args.command])


# -- render-tfjob ---------------------------------------------------------------------------------------
def dataset_from_uri(uri: str, lay: Layout) -> str:
    _, name = layout.split_gs(uri)
    if name.startswith(lay.tfrecords_prefix):
        return name[len(lay.tfrecords_prefix):].split("/", 1)[0]
    raise NotFound(f"{uri} is not under {lay.tfrecords_prefix}<dataset>/")


def render_tfjob(args: argparse.Namespace) -> int:
    cfg = job_config(args, "workers", "gpus_per_worker", "trainer_image", "namespace", "epochs", "bucket", "engine")
    lay = Layout.load()
    bucket = cfg.bucket or layout.split_gs(args.manifest)[0]
    cfg = dataclasses.replace(cfg, bucket=bucket)
    dataset = dataset_from_uri(args.manifest, lay)
    request_id = args.request_id
    seq = 1
    if not args.offline:
        from landfall.core.services.storage import Storage
        from landfall.submit.ledger import Ledger

        storage = Storage(cfg.project)
        manifest = Manifest.from_json(storage.read_bytes(args.manifest), args.manifest)
        dataset = manifest.dataset
        request_id = request_id or layout.request_id(manifest.source.bucket, manifest.source.name,
                                                     manifest.source.generation)
        seq = Ledger(storage, bucket, lay).head_seq(dataset) + 1  # the dataset's next job
        # As the release renders it: the dataset's spec over the environment, then the flags given here.
        flags = {f: getattr(args, f) for f in ("workers", "gpus_per_worker", "trainer_image", "namespace", "epochs",
                                               "engine") if getattr(args, f, None) is not None}
        cfg = dataclasses.replace(coalesce.with_spec(cfg, dataset, specs.for_dataset(storage, bucket, dataset, lay)),
                                  **flags)
    request_id = request_id or "manual"
    name = coalesce.job_name_for(dataset, cfg.concurrency, request_id=request_id, seq=seq)
    inputs_uri = jobmeta.job_dir(bucket, name, lay.runs_prefix) + "/inputs.json"
    job = engine.render(cfg, name=name, dataset=dataset, request_id=request_id, inputs_uri=inputs_uri,
                        released_at=utc_now(), runs_prefix=lay.runs_prefix)
    sys.stdout.write(jobmeta.to_yaml(job))
    return 0


# -- republish ------------------------------------------------------------------------------------------
def manual_request(args: argparse.Namespace, cfg: JobConfig, storage: Any, lay: Layout) -> TrainingRequest:
    if args.manifest:
        manifest_uri = args.manifest
        dataset = Manifest.from_json(storage.read_bytes(manifest_uri), manifest_uri).dataset
    elif args.dataset:
        if not cfg.bucket:
            raise NotFound("--dataset needs --bucket or LANDFALL_BUCKET")
        dataset = args.dataset
        prefix = f"gs://{cfg.bucket}/{lay.tfrecords_prefix}{dataset}/"
        found = retractions.live_manifest_objects(storage, prefix)
        if not found:
            raise NotFound(f"dataset {dataset} has no live manifest under {prefix}")
        manifest_uri = max(found, key=lambda m: (m.generation, m.uri)).uri
    else:
        bucket, name = layout.split_gs(args.object)
        info = storage.stat(args.object)
        arrival = layout.parse_arrival(bucket, name, info.generation, lay)
        dataset = arrival.dataset
        manifest_uri = layout.gs(bucket, layout.manifest_name(lay, dataset, arrival.arrival_id))
        if not storage.exists(manifest_uri):
            raise NotFound(f"{args.object} has not been converted (no {manifest_uri})")
    return TrainingRequest(dataset=dataset, manifest=manifest_uri, request_id=uuid.uuid4().hex, reason="manual",
                           arrived_at=utc_now())


def republish(args: argparse.Namespace) -> int:
    from landfall.core.services.pubsub import PubSub
    from landfall.core.services.storage import Storage

    cfg = job_config(args, "bucket", "request_topic", "project")
    storage = Storage(cfg.project)
    request = manual_request(args, cfg, storage, Layout.load())
    message_id = PubSub(cfg.project).publish(cfg.request_topic, request.to_json(), request.attributes(),
                                             ordering_key=request.dataset)
    print(json.dumps({"published": message_id, "topic": cfg.request_topic, **dataclasses.asdict(request)}))
    return 0
