"""``landfall render-tfjob | republish | status | operator``: the submit stage from the command line.

- ``render-tfjob --manifest URI [--workers N] [--gpus-per-worker G] [--image IMG]``: prints the YAML the
  consumer would submit for a request on that manifest when the dataset has no job yet (the manifests
  of the dataset resolved now when the bucket is reachable, else just this one; ``--offline`` skips it).
- ``republish --dataset NAME | --manifest URI | gs://BUCKET/incoming/...``: publishes a request with
  ``reason: "manual"`` and a fresh ``request_id``, so a rerun happens although the data did not change.
  ``--dataset`` takes the dataset's newest manifest.
- ``status [--dataset NAME] [--json]``: arrivals (manifests) and rejections per dataset, the jobs with
  their state, the requests each covers and the latest metrics (``runs/<job>/metrics.json``), and the
  requests waiting in the dead-letter subscription (peeked, not consumed). It also releases waiting
  follow-ups whose predecessor ended (``landfall.coalesce.reconcile``).
- ``operator [--state DIR] [--backend local|kubernetes]``: the local backend's controller
  (``landfall.operator``); with ``--backend kubernetes`` it only reconciles follow-ups next to a cluster.

Configuration comes from ``LANDFALL_*`` (``landfall.tfjob.JobConfig``); flags win.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import uuid
from typing import Any

from landfall import coalesce, layout, tfjob
from landfall.config import Layout
from landfall.errors import LandfallError, NotFound
from landfall.messages import Manifest, TrainingRequest, utc_now
from landfall.tfjob import JobConfig


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    common = {"bucket": "bucket (LANDFALL_BUCKET)", "project": "Google Cloud project (GOOGLE_CLOUD_PROJECT)"}
    if name == "render-tfjob":
        p.add_argument("--manifest", required=True, help="gs://BUCKET/tfrecords/<dataset>/<arrival>/manifest.json")
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
    elif name == "status":
        p.add_argument("--dataset")
        p.add_argument("--json", action="store_true")
        p.add_argument("--bucket", help=common["bucket"])
        p.add_argument("--backend", choices=["local", "kubernetes"])
        p.add_argument("--state", dest="local_state", help="local backend state folder (LANDFALL_LOCAL_STATE)")
        p.add_argument("--namespace")
        p.add_argument("--project", help=common["project"])
        p.add_argument("--no-dead-letter", action="store_true", help="do not peek at the dead-letter subscription")
    elif name == "operator":
        p.add_argument("--state", dest="local_state", help="state folder (LANDFALL_LOCAL_STATE)")
        p.add_argument("--backend", choices=["local", "kubernetes"])
        p.add_argument("--namespace")
        p.add_argument("--poll-s", type=float, default=0.5)
        p.add_argument("--bucket", help=common["bucket"])


def _config(args: argparse.Namespace, *fields: str) -> JobConfig:
    return JobConfig.load(**{f: getattr(args, f, None) for f in fields})


def run(args: argparse.Namespace) -> int:
    from landfall import logs

    logs.setup()
    if args.command in ("republish", "status"):
        from landfall.stack import use_running_stack

        use_running_stack()  # next to `landfall up`, no exports needed
    try:
        return {"render-tfjob": render_tfjob, "republish": republish, "status": status,
                "operator": operator}[args.command](args)
    except LandfallError as exc:
        print(f"landfall {args.command}: {exc}", file=sys.stderr)
        return 1


# -- render-tfjob ---------------------------------------------------------------------------------------
def dataset_from_uri(uri: str, lay: Layout) -> str:
    _, name = layout.split_gs(uri)
    if name.startswith(lay.tfrecords_prefix):
        return name[len(lay.tfrecords_prefix):].split("/", 1)[0]
    raise NotFound(f"{uri} is not under {lay.tfrecords_prefix}<dataset>/")


def render_tfjob(args: argparse.Namespace) -> int:
    cfg = _config(args, "workers", "gpus_per_worker", "trainer_image", "namespace", "epochs", "bucket")
    lay = Layout.load()
    bucket = cfg.bucket or layout.split_gs(args.manifest)[0]
    cfg = dataclasses.replace(cfg, bucket=bucket)
    dataset = dataset_from_uri(args.manifest, lay)
    request_id = args.request_id
    manifests = [args.manifest]
    if not args.offline:
        from landfall.storage import Storage

        storage = Storage(cfg.project)
        manifest = Manifest.from_json(storage.read_bytes(args.manifest), args.manifest)
        dataset = manifest.dataset
        request_id = request_id or layout.request_id(manifest.source.bucket, manifest.source.name,
                                                     manifest.source.generation)
        manifests = coalesce.resolve_manifests(dataset, bucket, cfg, storage, lay) or manifests
    request_id = request_id or "manual"
    name = tfjob.job_name(dataset, ("request:" if cfg.concurrency == "allow" else "first:") + request_id)
    job = tfjob.render(cfg, name=name, dataset=dataset, request_id=request_id, manifests=manifests,
                       released_at=utc_now(), runs_prefix=lay.runs_prefix)
    sys.stdout.write(tfjob.to_yaml(job))
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
        found = storage.list(prefix, suffix="/manifest.json")
        if not found:
            raise NotFound(f"dataset {dataset} has no manifest under {prefix}")
        manifest_uri = max(found, key=lambda u: (storage.stat(u).generation, u))
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
    from landfall.pubsub import PubSub
    from landfall.storage import Storage

    cfg = _config(args, "bucket", "request_topic", "project")
    storage = Storage(cfg.project)
    request = manual_request(args, cfg, storage, Layout.load())
    message_id = PubSub(cfg.project).publish(cfg.request_topic, request.to_json(), request.attributes(),
                                             ordering_key=request.dataset)
    print(json.dumps({"published": message_id, "topic": cfg.request_topic, **dataclasses.asdict(request)}))
    return 0


# -- status ---------------------------------------------------------------------------------------------
def _metrics(storage: Any, bucket: str, job: str, lay: Layout) -> dict[str, Any] | None:
    try:
        raw = json.loads(storage.read_bytes(tfjob.job_dir(bucket, job, lay.runs_prefix) + "/metrics.json"))
    except (LandfallError, ValueError):
        return None
    epochs = raw.get("epochs") or []
    last = epochs[-1] if epochs else {}
    return {"status": raw.get("status"), "epochs": len(epochs), "restarts": raw.get("restarts"),
            **{k: last.get(k) for k in ("loss", "val_loss", "wall_s", "examples_per_s") if k in last}}


def collect(cfg: JobConfig, storage: Any, backend: Any, dataset: str | None = None, pubsub: Any = None,
            lay: Layout | None = None) -> dict[str, Any]:
    """The status report as a dict (``landfall status --json`` prints it; the demo may call it)."""
    lay = lay or Layout()
    out: dict[str, Any] = {"bucket": cfg.bucket, "backend": cfg.backend, "datasets": {}, "jobs": [],
                           "dead_letter": None}
    released = coalesce.reconcile(backend, storage, cfg, lay, dataset)
    if released:
        out["released"] = released
    if cfg.bucket:
        prefix = f"gs://{cfg.bucket}/{lay.tfrecords_prefix}" + (f"{dataset}/" if dataset else "")
        for uri in storage.list(prefix, suffix="/manifest.json"):
            ds = uri[len(f"gs://{cfg.bucket}/{lay.tfrecords_prefix}"):].split("/", 1)[0]
            out["datasets"].setdefault(ds, {"arrivals": 0, "rejected": 0})["arrivals"] += 1
        rprefix = f"gs://{cfg.bucket}/{lay.rejected_prefix}" + (f"{dataset}/" if dataset else "")
        for uri in storage.list(rprefix, suffix=".json"):
            ds = uri[len(f"gs://{cfg.bucket}/{lay.rejected_prefix}"):].split("/", 1)[0]
            out["datasets"].setdefault(ds, {"arrivals": 0, "rejected": 0})["rejected"] += 1
    for job in backend.list(dataset):
        name = tfjob.name_of(job)
        bucket = cfg.bucket or coalesce._bucket_of(job)
        out["jobs"].append({
            "name": name,
            "dataset": job["metadata"]["labels"].get(tfjob.DATASET_LABEL),
            "state": tfjob.state(job),
            "created": tfjob.created_at(job),
            "after": tfjob.annotations(job).get(tfjob.AFTER_ANNOTATION),
            "manifests": len(tfjob.manifests_of(job)),
            "requests": [r.get("request_id") for r in tfjob.requests_of(job)],
            "conditions": [c["type"] for c in tfjob.conditions(job) if c.get("status") == "True"],
            "metrics": _metrics(storage, bucket, name, lay) if bucket else None,
        })
    if pubsub is not None:
        out["dead_letter"] = _peek_dead_letter(pubsub, cfg.dead_letter_subscription)
    return out


def _peek_dead_letter(pubsub: Any, subscription: str) -> dict[str, Any]:
    """Requests in the dead-letter subscription, left there (their ack deadline is reset to 0)."""
    try:
        got = pubsub.pull(subscription, max_messages=100, timeout_s=3.0)
    except LandfallError as exc:
        return {"error": str(exc)}
    if got:
        from landfall.pubsub import subscription_path

        pubsub.subscriber.modify_ack_deadline(request={
            "subscription": subscription_path(pubsub.project, subscription), "ack_ids": [m.ack_id for m in got],
            "ack_deadline_seconds": 0})
    items = []
    for m in got:
        try:
            body = json.loads(m.data)
        except ValueError:
            body = {}
        items.append({"request_id": body.get("request_id"), "dataset": body.get("dataset"),
                      "manifest": body.get("manifest"), "message_id": m.message_id})
    return {"count": len(items), "requests": items}


def status(args: argparse.Namespace) -> int:
    from landfall.backend import open_backend
    from landfall.pubsub import PubSub
    from landfall.storage import Storage

    cfg = _config(args, "bucket", "backend", "local_state", "namespace", "project")
    storage = Storage(cfg.project)
    pubsub = None if args.no_dead_letter else PubSub(cfg.project)
    report = collect(cfg, storage, open_backend(cfg), args.dataset, pubsub, Layout.load())
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    for ds, counts in sorted(report["datasets"].items()):
        print(f"dataset {ds}: {counts['arrivals']} arrivals, {counts['rejected']} rejected")
    print(f"{'JOB':<48} {'DATASET':<20} {'STATE':<11} {'MANIFESTS':>9} {'REQUESTS':>8}  METRICS")
    for j in report["jobs"]:
        m = j["metrics"] or {}
        metrics = (f"{m.get('status')} epochs={m.get('epochs')} loss={m.get('loss')} val_loss={m.get('val_loss')}"
                   if m else "-")
        print(f"{j['name']:<48} {j['dataset']:<20} {j['state']:<11} {j['manifests']:>9} {len(j['requests']):>8}  "
              f"{metrics}")
    dl = report["dead_letter"]
    if dl is not None:
        if "error" in dl:
            print(f"dead-letter: unavailable ({dl['error']})")
        else:
            print(f"dead-letter: {dl['count']} request(s)")
            for r in dl["requests"]:
                print(f"  {r['request_id']} {r['dataset']} {r['manifest']}")
    return 0


# -- operator -------------------------------------------------------------------------------------------
def operator(args: argparse.Namespace) -> int:
    from landfall.storage import Storage

    cfg = _config(args, "local_state", "backend", "namespace", "bucket")
    storage = Storage(cfg.project)
    if cfg.backend == "kubernetes":  # next to a cluster: only release follow-ups (coalesce.reconcile)
        return _reconcile_loop(cfg, storage, args.poll_s)
    from landfall.operator import Operator

    op = Operator(cfg.local_state, cfg.namespace, cfg, storage, poll_s=args.poll_s)
    op.install_signal_handlers()
    return op.run()


def _reconcile_loop(cfg: JobConfig, storage: Any, poll_s: float) -> int:
    import signal
    import threading

    from landfall.backend import open_backend

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    backend = open_backend(cfg)
    while not stop.is_set():
        try:
            coalesce.reconcile(backend, storage, cfg)
        except LandfallError as exc:
            print(f"reconcile: {exc}", file=sys.stderr)
        stop.wait(max(poll_s, 5.0))
    return 0
