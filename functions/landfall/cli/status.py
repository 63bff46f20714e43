"""``landfall status [--dataset NAME] [--json] [--reconcile]``: what the system holds and does, read from the bucket
and the jobs.

Arrivals per dataset (live, quarantined by their checks with each check, feature and measured value against its
threshold, converting on the Cloud Run job, failing (their event raised and is being retried, or was dead-lettered:
``landfall.core.artifacts.failing``, with the error), and retracted because their object was overwritten or deleted,
or rejected in quarantine), the requests waiting for the dataset's next job (how long, and whether the manifest
they name is missing: the next release rejects those, ``landfall.submit.coalesce``) and rejections,
with the latest few of each and their reasons; the jobs with their state, the requests each covers and
the latest metrics (``runs/<job>/metrics.json``), per dataset its retrain policy, why its next release is held
and until when, and its GPU spend over the last 24 h and 30 days against its budget (``landfall.submit.spend``),
per dataset the arrivals scored on arrival by its champion and those with anomalies
(``landfall.core.artifacts.detections``),
and the requests waiting in the dead-letter subscriptions of the training requests and of the scorer
(peeked, not consumed). Read-only: it changes nothing, unless ``--reconcile`` asks it to release the waiting
follow-ups whose predecessor ended (``landfall.submit.coalesce.reconcile``, what ``landfall reconcile`` does on a
cluster), and then reports what it released. Configuration comes from ``LANDFALL_*`` (``JobConfig``); flags win;
next to a ``landfall up`` stack it reads that stack unless a flag or variable names a target.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from landfall.cli.common import job_config, on_the_stack
from landfall.core.artifacts import champion, detections, failing, results, specs
from landfall.core.contracts import layout
from landfall.core.contracts import timeline as core_timeline
from landfall.core.contracts.layout import DISPATCH, FAILING, MANIFEST, RETRACTION, Layout
from landfall.core.contracts.messages import MISSHAPEN, JobInputs, dead_letters, loads_object, misshapen
from landfall.core.errors import LandfallError, MissingCRD, NotFound
from landfall.core.quality import quarantine
from landfall.core.rules import cost
from landfall.core.services.pubsub import PubSub
from landfall.core.services.storage import Storage
from landfall.submit import coalesce, engine, jobmeta
from landfall.submit.backends import open_backend
from landfall.submit.config import JobConfig
from landfall.views import arrivals, waiting

SCORER_DEAD_LETTER = detections.SCORER_DEAD_LETTER  # what the scorer (landfall.detect) dead-letters
LATEST_DETECTIONS = 3  # anomalous arrivals shown per dataset, the newest


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset")
    p.add_argument("--json", action="store_true")
    p.add_argument("--bucket", help="bucket (LANDFALL_BUCKET)")
    p.add_argument("--backend", choices=["local", "kubernetes"])
    p.add_argument("--state", dest="local_state", help="local backend state folder (LANDFALL_LOCAL_STATE)")
    p.add_argument("--namespace")
    p.add_argument("--project", help="Google Cloud project (GOOGLE_CLOUD_PROJECT)")
    p.add_argument("--no-dead-letter", action="store_true", help="do not peek at the dead-letter subscriptions")
    p.add_argument("--scorer-dead-letter", metavar="SUBSCRIPTION",
                   default=os.environ.get("LANDFALL_SCORER_DEAD_LETTER_SUBSCRIPTION", SCORER_DEAD_LETTER),
                   help="the scorer's dead-letter subscription (LANDFALL_SCORER_DEAD_LETTER_SUBSCRIPTION, default "
                        f"{SCORER_DEAD_LETTER})")
    p.add_argument("--reconcile", action="store_true",
                   help="also release waiting follow-ups whose predecessor ended (default: read-only)")


def run(args: argparse.Namespace) -> int:
    return on_the_stack(args, status)


# -- status ---------------------------------------------------------------------------------------------
LATEST = 5  # retractions and rejections shown per dataset, newest first
def shown_metrics(storage: Any, bucket: str, job: str, lay: Layout) -> dict[str, Any] | None:
    """A job's ``metrics.json`` as ``landfall status`` shows it (None: none yet; ``invalid``: why it is unreadable)."""
    uri = jobmeta.job_dir(bucket, job, lay.runs_prefix) + "/metrics.json"
    try:
        raw = loads_object(storage.read_bytes(uri), uri)
    except NotFound:
        return None
    except LandfallError as exc:  # Invalid: any body at all (#46)
        return {"invalid": str(exc)}
    try:
        return _metrics_of(raw)
    except MISSHAPEN as exc:  # fields of the wrong types: named, not shown
        return {"invalid": misshapen(uri, exc)}


def _metrics_of(raw: dict[str, Any]) -> dict[str, Any]:
    epochs = raw.get("epochs") if isinstance(raw.get("epochs"), list) else []
    last = epochs[-1] if epochs and isinstance(epochs[-1], dict) else {}
    return {"status": raw.get("status"), "epochs": len(epochs), "restarts": raw.get("restarts"),
            **{k: last.get(k) for k in ("loss", "val_loss", "wall_s", "examples_per_s") if k in last},
            **{k: raw.get(k) for k in ("verdict", "challenger_loss", "champion_loss", "gpu_seconds", "estimated_cost",
                                       *CONVERGENCE)
               if k in raw},
            **({"instances": _split_counts(raw["instances"])} if isinstance(raw.get("instances"), dict) else {}),
            **{k: raw.get(k) for k in ("started_at", "ended_at") if raw.get(k)},
            **({"timeline": core_timeline.compact(raw)} if core_timeline.of(raw) else {}),  # where its time went
            **({"reason": raw["evaluation"]["reason"]} if isinstance(raw.get("evaluation"), dict)
               and raw["evaluation"].get("reason") else {})}


def job_times(entry: dict[str, Any], clock: Any = None) -> dict[str, Any]:
    """A job's queued and training seconds (``landfall.core.rules.cost.queue_and_training``) from its status entry."""
    m = entry.get("metrics") or {}
    return cost.queue_and_training(entry.get("created"), m.get("started_at"), m.get("ended_at"),
                                   (clock or time.time)())


def _split_counts(found: dict[str, Any]) -> dict[str, Any]:
    """A job's instances as its plan split them (``metrics.json`` ``instances``): total, training, held out, and the
    gap the ``segment``/``blocks`` hold-outs leave unused."""
    out = {k: found.get(k) for k in ("total", "train", "validation")}
    if all(isinstance(out[k], int) for k in out):
        out["unused"] = out["total"] - out["train"] - out["validation"] - int(found.get("excluded") or 0)
    return out


# What the trainer records of its convergence, its skill and the labelled check.
CONVERGENCE = (*results.TRAINING_FIELDS, "labelled", "champion_view")


def _verdict_text(m: dict[str, Any]) -> str:
    """`` verdict=... skill=... epochs_run=7/20 (stopped early, best 4)``, and why a no-skill result kept the
    champion: the parts the metrics have."""
    out = f" verdict={m['verdict']}" if m.get("verdict") else ""
    if isinstance(m.get("skill"), int | float):
        out += f" skill={m['skill']:.3f}"
        if m.get("verdict") == "no_skill":
            below = isinstance(m.get("min_skill"), int | float) and m["skill"] < m["min_skill"]
            out += (f" (below min_skill {m.get('min_skill')}: not promoted)" if below or not m.get("reason")
                    else f" (not promoted: {m['reason']})")
    line = results.baselines_line(m)
    if line:
        out += f" [{line}]"
    line = results.detection_line(m)
    if line:  # the candidate that detects best (trainer.judging.selection): the model or a baseline
        out += f" [{line}]"
    counts = m.get("instances") if isinstance(m.get("instances"), dict) else None
    if counts and counts.get("train") is not None:
        out += f" instances={counts.get('train')} train/{counts.get('validation')} held out"
    labelled = m.get("labelled") if isinstance(m.get("labelled"), dict) else {}
    mine = labelled.get("challenger") if isinstance(labelled.get("challenger"), dict) else None
    if mine and isinstance(mine.get("average_precision"), int | float):
        theirs = labelled.get("champion") if isinstance(labelled.get("champion"), dict) else None
        out += (f" average_precision={mine['average_precision']:.3f} (champion "
                + (f"{theirs['average_precision']:.3f}" if theirs and isinstance(theirs.get("average_precision"),
                                                                                int | float) else "unknown") + ")")
        if labelled.get("beaten_by"):  # baselines that detect the labelled anomalies better (trainer.judging.baselines)
            out += f" (labelled set: BEATEN BY {', '.join(labelled['beaten_by'])})"
    if m.get("epochs_run") is not None:
        out += f" epochs_run={m['epochs_run']}/{m.get('epochs_ceiling')}"
        if m.get("stopped_early"):
            out += f" (stopped early, best epoch {m.get('best_epoch')})"
    return out


def _champion(storage: Any, bucket: str, ds: str) -> dict[str, Any] | None:
    """The dataset's champion (``models/<dataset>/champion.json``), or None."""
    try:
        current, _ = champion.read(storage, champion.bucket_root(bucket), ds)
    except (LandfallError, ValueError):
        return None
    if current is None:
        return None
    return {"run": current.run, "seq": current.seq, "reason": current.reason, "promoted_by": current.promoted_by,
            "promoted_at": current.promoted_at, "loss": current.loss, "model": current.model,
            "serves": current.serves}


def _datasets(storage: Any, bucket: str, lay: Layout, dataset: str | None) -> dict[str, dict[str, Any]]:
    """Per dataset: live and retracted arrivals, rejections, and the latest few of each with their reasons
    (``landfall.views.arrivals``: each arrival listed and classified once, as trace and report show it)."""
    out: dict[str, dict[str, Any]] = {}

    def entry(ds: str) -> dict[str, Any]:
        return out.setdefault(ds, {"arrivals": 0, "retracted": 0, "rejected": 0})

    rejected = arrivals.rejections(storage, bucket, lay, dataset)
    for ds, infos in rejected.items():
        entry(ds)["rejected"] += len(infos)
    retracted: dict[str, list[Any]] = {}
    converting: dict[str, list[Any]] = {}
    held: dict[str, list[Any]] = {}
    failed: dict[str, list[Any]] = {}
    for a in arrivals.listing(storage, bucket, lay, dataset, rejected):
        ds = a.dataset
        if a.failing:
            entry(ds)["failing"] = entry(ds).get("failing", 0) + 1  # its event raised: retried, or dead-lettered
            failed.setdefault(ds, []).append(a.records[FAILING])
        if a.state == arrivals.RETRACTED:
            entry(ds)["retracted"] += 1
            retracted.setdefault(ds, []).append(a.records[RETRACTION])
        elif a.state in (arrivals.CONVERTED, arrivals.QUARANTINED):
            entry(ds)["arrivals"] += 1
            if a.warned:  # flagged by a check, trained on
                entry(ds)["warned"] = entry(ds).get("warned", 0) + 1
            if a.state == arrivals.QUARANTINED:  # checks hold it: not trained on
                entry(ds)["quarantined"] = entry(ds).get("quarantined", 0) + 1
                held.setdefault(ds, []).append(a.records[MANIFEST])
        elif a.state == arrivals.CONVERTING:  # dispatched to the Cloud Run job, no manifest yet: or failed for good
            entry(ds)["converting"] = entry(ds).get("converting", 0) + 1
            converting.setdefault(ds, []).append(a.records[DISPATCH])
    qprefix = layout.gs(bucket, lay.requests_prefix)
    waiting: dict[str, list[Any]] = {}
    for info in storage.list_objects(qprefix + (f"{dataset}/" if dataset else ""), suffix=".json"):
        ds, _, rest = info.uri[len(qprefix):].partition("/")
        if rest.startswith("pending/"):  # requests waiting for the dataset's next job
            entry(ds)["pending"] = entry(ds).get("pending", 0) + 1
            waiting.setdefault(ds, []).append(info)
    for ds, infos in waiting.items():
        out[ds]["latest_pending"] = [_pending(storage, i) for i in _newest(infos)]
    for ds, infos in retracted.items():
        out[ds]["latest_retractions"] = [_summary(storage, i.uri, ("source", "reason", "by_generation", "retracted_at"))
                                         for i in _newest(infos)]
    for ds, infos in held.items():
        out[ds]["latest_quarantined"] = [quarantine.summary(storage, i.uri) for i in _newest(infos)]
    for ds, infos in converting.items():
        out[ds]["latest_converting"] = [_summary(storage, i.uri, ("source", "job", "execution", "task_count",
                                                                  "updated_at")) for i in _newest(infos)]
    for ds, infos in failed.items():
        out[ds]["latest_failing"] = [_failing(storage, i.uri) for i in _newest(infos)]
    for ds, infos in rejected.items():
        out[ds]["latest_rejections"] = [_summary(storage, i.uri, ("source", "reason", "detail", "rejected_at"))
                                        for i in _newest(infos)]
    return out


def _failing(storage: Any, uri: str) -> dict[str, Any]:
    """A failing arrival's record (``landfall.core.artifacts.failing``): its source, error and attempts."""
    raw = failing.read(storage, uri) or {"record": uri, "error": "gone since it was listed"}
    source = raw.get("source") if isinstance(raw.get("source"), dict) else {}
    return {"record": uri, **({"name": source.get("name"), "generation": source.get("generation")} if source else {}),
            **{k: raw.get(k) for k in ("kind", "error", "attempts", "first_failed_at", "failed_at")}}


def _pending(storage: Any, info: Any) -> dict[str, Any]:
    """A waiting request: its id, manifest, how long it waits, and whether its manifest is missing (then the
    dataset's next release rejects it; one that exists but is not listed is retried ``LISTING_LAG_S``)."""
    try:
        raw = loads_object(storage.read_bytes(info.uri), info.uri)
    except LandfallError as exc:
        return {"record": info.uri, "error": str(exc)}
    manifest = str(raw.get("manifest") or "")
    try:
        missing = not storage.exists(manifest) if manifest.startswith("gs://") else True
    except LandfallError:
        missing = None
    return {"record": info.uri, "request_id": raw.get("request_id"), "reason": raw.get("reason"),
            "manifest": manifest, "waiting_s": round(max(0.0, time.time() - info.generation / 1e6)),
            "manifest_missing": missing, "listing_lag_bound_s": coalesce.LISTING_LAG_S}


def _inputs(storage: Any, job: dict[str, Any]) -> dict[str, Any]:
    """What the job trains on, from its ``inputs.json`` (the TFJob only names it)."""
    try:
        inputs = JobInputs.from_json(storage.read_bytes(jobmeta.inputs_of(job)))
    except (LandfallError, ValueError):
        return {"manifests": None, "requests": [], "seq": None}
    return {"manifests": len(inputs.manifests), "requests": [r["request_id"] for r in inputs.requests],
            "seq": inputs.seq, "snapshot": inputs.snapshot}  # with a snapshot, manifests is the delta


def _newest(infos: list[Any]) -> list[Any]:
    return sorted(infos, key=lambda i: (i.generation, i.uri))[-LATEST:][::-1]


def _summary(storage: Any, uri: str, keys: tuple[str, ...]) -> dict[str, Any]:
    try:
        raw = loads_object(storage.read_bytes(uri), uri)
    except LandfallError as exc:
        return {"record": uri, "error": str(exc)}
    source = raw.get("source") if isinstance(raw.get("source"), dict) else {}
    request = raw.get("request") if isinstance(raw.get("request"), dict) else {}  # a submit rejection's
    return {"record": uri, **({"name": source.get("name"), "generation": source.get("generation")} if source else {}),
            **({"request_id": request.get("request_id")} if not source and request.get("request_id") else {}),
            **{k: raw.get(k) for k in keys if k != "source"}}


def _retrain(cfg: JobConfig, storage: Any, backend: Any, ds: str, lay: Layout, clock: Any) -> dict[str, Any]:
    """The retrain policy, the spend over 24 h and 30 days against the budget, and why the next release waits
    (``landfall.views.waiting``)."""
    return waiting.explain(ds, cfg, backend, storage, lay, clock)


def _spec(storage: Any, bucket: str, ds: str, lay: Layout) -> dict[str, Any]:
    """Which spec the dataset's next conversion and release use (docs/datasets.md): its generation, or none."""
    try:
        spec = specs.for_dataset(storage, bucket, ds, lay)
    except LandfallError as exc:
        return {"error": str(exc)}
    return {"uri": specs.spec_uri(bucket, ds, lay) if spec.registered else None, "generation": spec.generation}


def _detections(storage: Any, bucket: str, lay: Layout, dataset: str | None) -> dict[str, dict[str, Any]]:
    """Per dataset: the arrivals scored on arrival and those with anomalies
    (``landfall.core.artifacts.detections.counts``,
    one listing of ``scores/``), and the newest anomalous ones."""
    by: dict[str, list[detections.Summary]] = {}
    for s in detections.listing(storage, bucket, lay, dataset):  # unreadable summaries are left out
        by.setdefault(s.dataset, []).append(s)
    out = {}
    for ds, summaries in by.items():
        newest: dict[str, detections.Summary] = {}
        for s in summaries:  # oldest first: an arrival's newest champion's summary wins, as in counts
            newest.pop(s.arrival, None)
            newest[s.arrival] = s
        anomalous = [s for s in newest.values() if s.anomalies][::-1][:LATEST_DETECTIONS]
        out[ds] = {**detections.counts(summaries), "latest_anomalous": [
            {"arrival": s.arrival, "champion": s.run, "anomalies": s.anomalies, "count": s.message.get("count"),
             "kind": s.message.get("kind"), "ranges": s.message.get("ranges_total"),
             "scored_at": s.message.get("scored_at"), "summary": s.uri} for s in anomalous]}
    return out


def collect(cfg: JobConfig, storage: Any, backend: Any, dataset: str | None = None, pubsub: Any = None,
            lay: Layout | None = None, reconcile: bool = False, clock: Any = None,
            scorer_dead_letter: str | None = SCORER_DEAD_LETTER) -> dict[str, Any]:
    """The status report as a dict (``landfall status --json`` prints it). Read-only unless ``reconcile``:
    then it first releases waiting follow-ups and reports them (``released``, or ``reconcile_error``).
    ``clock``: the retrain policy's time (default ``time.time``). With ``pubsub``, the dead letters of the training
    requests and of the scorer (``scorer_dead_letter``, None: not looked at) are peeked."""
    lay = lay or Layout()
    out: dict[str, Any] = {"bucket": cfg.bucket, "backend": cfg.backend, "datasets": {}, "jobs": [],
                           "dead_letter": None, "scorer_dead_letter": None}
    if reconcile:
        try:
            out["released"] = coalesce.reconcile(backend, storage, cfg, lay, dataset, clock=clock)
        except Exception as exc:  # a black box: report it, and still show what is there
            out["reconcile_error"] = f"{type(exc).__name__}: {exc}"
    if cfg.bucket:
        out["datasets"] = _datasets(storage, cfg.bucket, lay, dataset)
        scored = _detections(storage, cfg.bucket, lay, dataset)
        for ds, entry in out["datasets"].items():
            entry["champion"] = _champion(storage, cfg.bucket, ds)
            entry["detections"] = scored.get(ds) or detections.counts([]) | {"latest_anomalous": []}
            entry["retrain"] = _retrain(cfg, storage, backend, ds, lay, clock)
            entry["spec"] = _spec(storage, cfg.bucket, ds, lay)
    try:
        jobs = backend.list(dataset)
    except MissingCRD as exc:  # the cluster lacks the engine's CRD: no jobs to show, and why (each refused request
        jobs = []              # says so among its dataset's rejections)
        out["jobs_error"] = f"{type(exc).__name__}: {exc}"
    for job in jobs:
        name = jobmeta.name_of(job)
        bucket = cfg.bucket or engine.bucket_of(job)
        out["jobs"].append({
            "name": name,
            "dataset": job["metadata"]["labels"].get(jobmeta.DATASET_LABEL),
            "state": engine.state(job),
            "created": jobmeta.created_at(job),
            "after": jobmeta.annotations(job).get(jobmeta.AFTER_ANNOTATION),
            **_inputs(storage, job),
            "conditions": [c["type"] for c in engine.conditions(job) if c.get("status") == "True"],
            "failure": engine.failure(job),
            "metrics": shown_metrics(storage, bucket, name, lay) if bucket else None,
        })
        try:
            out["jobs"][-1]["time"] = job_times(out["jobs"][-1], clock)
        except MISSHAPEN:  # times of the wrong type in its metrics: none shown
            out["jobs"][-1]["time"] = {}
    if pubsub is not None:
        out["dead_letter"] = _peek_dead_letter(pubsub, cfg.dead_letter_subscription)
        if scorer_dead_letter:
            out["scorer_dead_letter"] = {"subscription": scorer_dead_letter,
                                         **_peek_dead_letter(pubsub, scorer_dead_letter)}
    return out


def _peek_dead_letter(pubsub: Any, subscription: str) -> dict[str, Any]:
    """Requests in the dead-letter subscription, left there (their ack deadline is reset to 0)."""
    try:
        found = dead_letters(pubsub, subscription)
    except LandfallError as exc:
        return {"error": str(exc)}
    items = [{"request_id": d["request_id"], "dataset": d["dataset"], "manifest": d["manifest"],
              "message_id": d["message_id"], **({"unreadable": d["unreadable"]} if d["unreadable"] else {})}
             for d in found]
    return {"count": len(items), "requests": items}


def retrain_lines(r: dict[str, Any]) -> list[str]:
    """What ``landfall status`` prints of a dataset's ``retrain`` (from ``collect``): the next release's hold, spend."""
    if "error" in r:
        return [f"retrain   unavailable: {r['error']}"]
    lines = []
    state, why = (r.get("next") or {}).get("state"), waiting.why(r)
    if state == "held":
        lines.append(f"held      next release {why}")
    elif state == "waiting_for_job":
        lines.append(f"waiting   next release {why}")
    sp = r.get("spend") or {}
    day, month, budget = sp.get("last_24h") or {}, sp.get("last_30d") or {}, sp.get("budget") or {}
    if r.get("policy") or day.get("jobs_released") or month.get("jobs"):
        of = (f" of {budget['gpu_hours_per_day']:g} GPU-h/day" if budget.get("gpu_hours_per_day") else
              " (no GPU budget)")
        jobs = f", max {budget['max_jobs_per_day']}" if budget.get("max_jobs_per_day") else ""
        estimated = f"; estimated for: {', '.join(sp['estimated'])}" if sp.get("estimated") else ""
        lines.append(f"spend     24 h: {day.get('gpu_hours', 0):.3f} GPU-h{of}, ${_usd(day.get('estimated_cost'))}, "
                     f"{day.get('jobs_released', 0)} job(s) released{jobs}; 30 d: {month.get('gpu_hours', 0):.3f} "
                     f"GPU-h, ${_usd(month.get('estimated_cost'))}, {month.get('jobs', 0)} job(s){estimated}")
    return lines


def _usd(value: Any) -> str:
    return "?" if value is None else f"{float(value):.2f}"


def status(args: argparse.Namespace) -> int:
    cfg = job_config(args, "bucket", "backend", "local_state", "namespace", "project")
    storage = Storage(cfg.project)
    pubsub = None if args.no_dead_letter else PubSub(cfg.project)
    report = collect(cfg, storage, open_backend(cfg), args.dataset, pubsub, Layout.load(), reconcile=args.reconcile,
                     scorer_dead_letter=args.scorer_dead_letter)
    code = 1 if "reconcile_error" in report else 0
    if code:
        print(f"landfall status: reconcile failed: {report['reconcile_error']}", file=sys.stderr)
    if args.json:
        print(json.dumps(report, indent=2))
        return code
    for ds, counts in sorted(report["datasets"].items()):
        held = f", {counts['quarantined']} quarantined (not trained on until admitted)" if counts.get("quarantined") \
            else ""
        held += f", {counts['warned']} flagged by a check and trained on (warn)" if counts.get("warned") else ""
        held += f", {counts['failing']} failing (their event retried)" if counts.get("failing") else ""
        print(f"dataset {ds}: {counts['arrivals']} arrivals, {counts['retracted']} retracted, "
              f"{counts['rejected']} rejected, {counts.get('converting', 0)} converting on Cloud Run, "
              f"{counts.get('pending', 0)} request(s) waiting for the next job{held}")
        for r in counts.get("latest_converting", []):
            print(f"  converting {r.get('name')}#{r.get('generation')}: Cloud Run execution {r.get('execution')} "
                  f"({r.get('task_count')} tasks, dispatched {r.get('updated_at')}; no manifest yet: if the "
                  f"execution failed for good, rerun it as docs/large-files.md says)")
        for r in counts.get("latest_failing", []):
            print(f"  failing   {r.get('name')}#{r.get('generation')}: {r.get('error')} ({r.get('kind')}; "
                  f"{r.get('attempts')} attempt(s) recorded, the first at {r.get('first_failed_at')}, the last at "
                  f"{r.get('failed_at')}; retried until it converts, or the arrival subscription's dead letter takes "
                  "it)")
        for r in counts.get("latest_pending", []):
            state = ("its manifest is missing: the next release rejects it" if r.get("manifest_missing")
                     else "for the next job")
            print(f"  pending   {r.get('request_id')} ({r.get('reason')}) {r.get('manifest')}: waiting "
                  f"{r.get('waiting_s')} s, {state}")
        for r in counts.get("latest_quarantined", []):
            checks = "; ".join(quarantine.finding_line(f) for f in r.get("findings", [])) or r.get("error")
            print(f"  quarantined {r.get('name')}#{r.get('generation')} ({r.get('arrival_id')}): {checks}; not "
                  f"trained on until `landfall admit {r.get('arrival_id')} --dataset {ds}` (or `landfall reject`)")
        for r in counts.get("latest_rejections", []):
            what = (f"{r.get('name')}#{r.get('generation')}" if "name" in r or "request_id" not in r
                    else f"request {r['request_id']}")  # an arrival's object, or a training request
            print(f"  rejected  {what}: {r.get('reason')}: {r.get('detail')}")
        for r in counts.get("latest_retractions", []):
            by = f" by generation {r['by_generation']}" if r.get("by_generation") else ""
            print(f"  retracted {r.get('name')}#{r.get('generation')}: {r.get('reason')}{by}")
        sp = counts.get("spec") or {}
        if "error" in sp:
            print(f"  spec      unreadable: {sp['error']}")
        elif sp:
            print(f"  spec      generation {sp['generation']} ({sp['uri']})" if sp.get("generation") is not None
                  else "  spec      none: the deployment's settings")
        for line in retrain_lines(counts.get("retrain") or {}):
            print(f"  {line}")
        if counts.get("champion"):
            c = counts["champion"]
            print(f"  champion  {c['run']} #{c['seq']} ({c['reason']} by {c['promoted_by']} at {c['promoted_at']}, "
                  f"loss {c['loss']})" + (f": {c['serves']}" if c.get("serves") else ""))
        found = counts.get("detections") or {}
        if found.get("scored") or counts.get("champion"):
            print(f"  detections {found.get('scored', 0)} arrival(s) scored on arrival, {found.get('anomalous', 0)} "
                  f"anomalous ({found.get('anomalies', 0)} anomalies)"
                  + (f", newest scored at {found['newest']}" if found.get("newest") else ""))
            for d in found.get("latest_anomalous", []):
                print(f"  anomalous {d['arrival']}: {d['anomalies']} of {d['count']} {_unit(d)} in {d['ranges']} "
                      f"range(s), champion {d['champion']}, scored at {d['scored_at']}")
    if report.get("jobs_error"):
        print(f"jobs unavailable: {report['jobs_error']}")
    print(f"{'JOB':<48} {'DATASET':<20} {'STATE':<11} {'MANIFESTS':>9} {'REQUESTS':>8}  METRICS")
    for j in report["jobs"]:
        try:
            lines = job_lines(j)
        except MISSHAPEN as exc:  # a field of the wrong type met while printing it
            lines = job_lines({**j, "metrics": {"invalid": misshapen(f"the metrics of {j['name']}", exc)},
                                "time": {}})
        for line in lines:
            print(line)
    _print_dead_letter("dead-letter", report["dead_letter"], "")
    sdl = report.get("scorer_dead_letter")
    _print_dead_letter("scorer dead-letter", sdl, f" not scored ({sdl['subscription']})" if sdl else "")
    if "released" in report:
        print(f"released: {', '.join(report['released']) or 'nothing'}")
    return code


def job_lines(j: dict[str, Any]) -> list[str]:
    """One job's lines in the text view: its row, its queueing, the champion's view and its timeline."""
    m = j["metrics"] or {}
    metrics = (f"unreadable: {m['invalid']}" if "invalid" in m else
               f"{m.get('status')} epochs={m.get('epochs')} loss={m.get('loss')} val_loss={m.get('val_loss')}"
               + _verdict_text(m) if m else "-")
    manifests = "-" if j["manifests"] is None else j["manifests"]
    lines = [f"{j['name']:<48} {j['dataset']:<20} {j['state']:<11} {manifests:>9} {len(j['requests']):>8}  {metrics}"]
    if j.get("failure"):
        lines.append(f"  failed: {j['failure']}")
    t = j.get("time") or {}
    if t.get("queued_s") is not None:
        then = " so far, waiting for capacity (no worker started)" if t["waiting"] else \
            f", then training {t['training_s']:.0f} s"
        lines.append(f"  queued {t['queued_s']:.0f} s{then}")
    if m.get("champion_view"):
        lines.append(f"  {results.champion_view_line(m['champion_view'])}")
    if m.get("timeline"):
        lines.append(f"  {core_timeline.compact_line(m['timeline'])}")
    return lines


def _print_dead_letter(label: str, dl: dict[str, Any] | None, after_count: str) -> None:
    """One dead-letter subscription's peek: its count and requests, or why it is unavailable (None: not peeked)."""
    if dl is None:
        return
    if "error" in dl:
        print(f"{label}: unavailable ({dl['error']})")
        return
    print(f"{label}: {dl['count']} request(s){after_count}")
    for r in dl["requests"]:
        print(f"  {r['message_id']} unreadable: {r['unreadable']}" if r.get("unreadable") else
              f"  {r['request_id']} {r['dataset']} {r['manifest']}")


def _unit(d: dict[str, Any]) -> str:
    return "rows" if d.get("kind") == "series" else "instances"
