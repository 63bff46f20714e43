"""``landfall trace OBJECT | ARRIVAL_ID | JOB [--dataset NAME] [--json]``: one arrival through every record, or one
job back to its arrivals, and where the chain stops and why.

- ``OBJECT``: ``gs://BUCKET/incoming/<dataset>/...`` or ``incoming/<dataset>/...`` (with ``--bucket``), optionally
  ``#GENERATION``; without one, its live generation (for a deleted object, its newest recorded one).
- ``ARRIVAL_ID``: ``<file>-g<generation>-<8 hex>`` (the folder name under ``tfrecords/<dataset>/``); with
  ``--dataset``, or found among the bucket's datasets (one listing of ``tfrecords/``).
- ``JOB``: a job name (``runs/<job>/inputs.json``).

For an arrival, in order: the object and its generation, its rejection (reason and detail), its retraction, its
Cloud Run dispatch, its failing event (``landfall.core.artifacts.failing``: the error its event raised, retried or
dead-lettered, while there is no manifest), its manifest, its request (``received/``,
``requests/<dataset>/pending/``, or the submit stage's rejection of it), the job that covered it (the newest-first
walk over the dataset's jobs that stops at the job whose ``inputs.json`` lists the request, or at one released
before the manifest existed, at most ``MAX_JOBS``), that job's state (the TFJob, or the bucket's records once it is
gone), ``metrics.json`` (epochs, losses, verdict, error), ``result.json`` (the published result) and the dataset's
champion; then, for any converted arrival (quarantined ones included), its detections
(``scores/<dataset>/<arrival>/``, ``landfall.core.artifacts.detections``): a step per champion that scored it
(anomalies of count, the first ranges with their times, the scores and summary, published or not), or why it is not
scored (no champion when it arrived, or the scorer has not scored it yet). For a job: its inputs, state, metrics,
verdict, result, champion, and each arrival it covered (at most ``MAX_ARRIVALS`` listed).

Read-only and bounded: named records only, and at most one listing per step (the datasets for a bare arrival id, the
generations of a deleted object, the arrival's detections). The last line (``stop`` in ``--json``) says where the
chain ends and why, for example ``converted, request pending behind job X (Running)``. Exit 1 when nothing at all is
recorded.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from landfall.cli.common import add_target_arguments, job_config, on_the_stack
from landfall.core.artifacts import champion, detections, failing, results
from landfall.core.contracts import layout
from landfall.core.contracts import timeline as core_timeline
from landfall.core.contracts.layout import DISPATCH, MANIFEST, Layout
from landfall.core.contracts.messages import MISSHAPEN, JobInputs, misshapen
from landfall.core.errors import LandfallError, NotFound
from landfall.core.quality import quarantine
from landfall.core.rules import timestamps
from landfall.core.services.storage import Storage
from landfall.submit import jobmeta
from landfall.views import arrivals
from landfall.views.reader import Reader

MAX_JOBS = 20  # jobs looked at, newest first, for the one that covered an arrival
MAX_ARRIVALS = 50  # arrivals of a job listed one by one


@dataclasses.dataclass
class Step:
    what: str  # object | rejection | retraction | dispatch | failing | manifest | request | job | metrics | timeline
    #   | result | champion | detections
    text: str
    at: str | None = None  # when it happened, from the record
    record: str | None = None  # the URI read
    detail: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Trace:
    subject: str
    kind: str  # arrival | job
    dataset: str | None
    steps: list[Step]
    stop: str
    found: bool = True
    arrivals: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # a job's

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# -- an arrival ---------------------------------------------------------------------------------------------
def _source_of(*records: dict[str, Any] | None) -> tuple[str | None, int | None]:
    for r in records:
        source = (r or {}).get("source") or {}
        if source.get("name"):
            return str(source["name"]), int(source.get("generation") or 0) or None
    return None, None


def trace_arrival(r: Reader, dataset: str, aid: str, name: str | None = None,
                  generation: int | None = None) -> Trace:
    """The chain of one arrival; once converted (a manifest, whatever its checks said), it ends at its
    detections (``_detections``)."""
    found = _trace_arrival(r, dataset, aid, name, generation)
    manifest = next((s for s in found.steps if s.what == "manifest"), None)
    if manifest is not None:
        retracted = any(s.what == "retraction" for s in found.steps)
        _detections(r, found, dataset, aid, manifest.at, retracted)
    return found


def _trace_arrival(r: Reader, dataset: str, aid: str, name: str | None = None,
                   generation: int | None = None) -> Trace:
    steps: list[Step] = []
    folder = layout.shards_prefix(r.lay, dataset, aid)
    rejection_uri = r.uri(layout.rejection_name(r.lay, dataset, aid))
    manifest_uri = r.uri(folder + layout.MANIFEST)
    retraction_uri = r.uri(folder + layout.RETRACTION)
    rejection, manifest = r.json(rejection_uri), r.json(manifest_uri)
    retraction = r.json(retraction_uri)
    listed = arrivals.one(r.storage, r.bucket, r.lay, dataset, aid)  # classified as status and report classify it
    if manifest is None and MANIFEST in listed.records:  # listed, and gone when read
        manifest = {"invalid": "listed, and not found when read"}
    if name is None:
        name, generation = _source_of(manifest, rejection, retraction)
    subject = f"{dataset}/{aid}"
    if name is None and rejection is None and manifest is None and retraction is None:
        found = r.json(r.uri(folder + DISPATCH)) or r.json(r.uri(folder + layout.FAILING))
        if found is None:
            return Trace(subject, "arrival", dataset, [], f"no record of arrival {aid} in dataset {dataset}",
                         found=False)
        name, generation = _source_of(found)
    # 1. the object
    if name:
        try:
            live = r.storage.stat(r.uri(name)).generation
        except NotFound:
            live = None
        state = ("the live generation" if live == generation else
                 f"overwritten by generation {live}" if live else "deleted (no live generation)")
        steps.append(Step("object", f"gs://{r.bucket}/{name} generation {generation}: {state}",
                          timestamps.of_generation(generation), r.uri(name), {"name": name, "generation": generation,
                                                               "live_generation": live}))
    # 2. rejected
    if rejection is not None:
        steps.append(Step("rejection", f"rejected at the {rejection.get('stage')} stage: {rejection.get('reason')}: "
                                       f"{rejection.get('detail')}", rejection.get("rejected_at"), rejection_uri,
                          {k: rejection.get(k) for k in ("stage", "reason", "detail")}))
        return Trace(subject, "arrival", dataset, steps,
                     f"rejected ({rejection.get('reason')}): nothing was converted or requested; fix the file and "
                     "upload it again")
    # 3. retracted
    retracted_note = ""
    if retraction is not None:
        by = (f" by generation {retraction['by_generation']}" if retraction.get("by_generation") else
              f" by {retraction['by']}" if retraction.get("by") else "")
        steps.append(Step("retraction", f"retracted: {retraction.get('reason')}{by}; no later job trains on it",
                          retraction.get("retracted_at"), retraction_uri,
                          {"reason": retraction.get("reason"), "by_generation": retraction.get("by_generation"),
                           "by": retraction.get("by")}))
        retracted_note = f"retracted ({retraction.get('reason')}{by})"
    # 4. converted?
    if manifest is None:
        dispatch_uri = r.uri(folder + DISPATCH)
        dispatch = r.json(dispatch_uri)
        failing_uri = r.uri(folder + layout.FAILING)
        failed = failing.read(r.storage, failing_uri) if retraction is None else None
        if failed is not None and (dispatch is None or str(failed.get("failed_at") or "")
                                   > str(dispatch.get("updated_at") or "")):
            steps.append(Step("failing", f"its event fails and is retried: {failed.get('error')} "
                                         f"({failed.get('attempts')} attempt(s) recorded since "
                                         f"{failed.get('first_failed_at')})", failed.get("failed_at"), failing_uri,
                              {k: failed.get(k) for k in ("kind", "error", "attempts", "first_failed_at")}))
            return Trace(subject, "arrival", dataset, steps,
                         f"not converted: its event fails ({failed.get('kind')}: {failed.get('error')}) and is "
                         "retried until the arrival subscription's dead letter takes it (landfall status shows it)")
        if dispatch is not None:
            steps.append(Step("dispatch", f"converting on the Cloud Run job: execution {dispatch.get('execution')} "
                                          f"({dispatch.get('task_count')} tasks)", dispatch.get("updated_at"),
                              dispatch_uri, {k: dispatch.get(k) for k in ("job", "execution", "task_count")}))
            return Trace(subject, "arrival", dataset, steps,
                         retracted_note or f"converting: Cloud Run execution {dispatch.get('execution')} has not "
                         "committed a manifest yet (if it failed for good, rerun it as docs/large-files.md says)")
        return Trace(subject, "arrival", dataset, steps,
                     retracted_note or "not converted: no manifest, rejection or dispatch record yet (its event may "
                     "still be retried, or was dead-lettered: landfall status shows the dead letters)")
    if "invalid" in manifest:
        steps.append(Step("manifest", f"its manifest cannot be read: {manifest['invalid']}", None, manifest_uri,
                          {"invalid": manifest["invalid"]}))
        held = "its manifest cannot be read: no job could load it"
    else:
        steps.append(Step("manifest", f"converted: {manifest.get('count')} instances in "
                                      f"{len(manifest.get('shards') or [])} shards", manifest.get("created_at"),
                          manifest_uri, {"count": manifest.get("count"), "shape": manifest.get("shape")}))
        held = _checks_steps(r, manifest, manifest_uri, steps)
    if listed.state == arrivals.QUARANTINED:
        return Trace(subject, "arrival", dataset, steps,
                     f"quarantined ({held or 'its checks hold it back'}): not trained on until "
                     f"`landfall admit {aid} --dataset {dataset}` (or `landfall reject`)")
    if not name or not generation:
        return Trace(subject, "arrival", dataset, steps, "converted; the manifest names no source object")
    # 5. the request
    rid = layout.request_id(r.bucket, name, generation)
    received_uri = r.uri(f"{r.lay.received_prefix}{dataset}/{rid}.json")
    received = r.json(received_uri)
    pending_uri = r.uri(f"{r.lay.requests_prefix}{dataset}/pending/{rid}.json")
    prefix = retracted_note + ", " if retracted_note else "converted, "
    if received is None:
        refused = r.json(r.uri(layout.rejection_name(r.lay, dataset, f"request-{rid}")))
        if refused is not None:
            steps.append(Step("request", f"request {rid} rejected by the submit stage: {refused.get('reason')}: "
                                         f"{refused.get('detail')}", refused.get("rejected_at")))
            return Trace(subject, "arrival", dataset, steps, f"{prefix}request {rid} rejected by the submit stage")
        steps.append(Step("request", f"request {rid}: not received by the submit stage", None, received_uri))
        return Trace(subject, "arrival", dataset, steps,
                     f"{prefix}request {rid} not received by the submit stage yet (still in Pub/Sub, or "
                     "dead-lettered: landfall status shows the dead letters)")
    steps.append(Step("request", f"request {rid} received", received.get("arrived_at"), received_uri,
                      {"request_id": rid, "reason": received.get("reason")}))
    if r.storage.exists(pending_uri):
        seq = r.ledger.head_seq(dataset)
        head = r.ledger.job_name(dataset, seq) if seq else None
        if head is None:
            return Trace(subject, "arrival", dataset, steps, f"{prefix}request pending; no job released yet")
        state, _ = r.job_state(head)
        steps.append(Step("request", f"pending: waits for the next job of {dataset}, after {head} ({state})", None,
                          pending_uri, {"pending": True, "behind": head, "behind_state": state}))
        return Trace(subject, "arrival", dataset, steps, f"{prefix}request pending behind job {head} ({state})")
    # 6. the job that covered it
    job, inputs, looked = _covering_job(r, dataset, rid, manifest_uri, str(manifest.get("created_at") or ""))
    if job is None or inputs is None:
        return Trace(subject, "arrival", dataset, steps,
                     f"{prefix}request {rid} received and no longer pending, but none of the newest {looked} jobs "
                     f"of {dataset} lists it")
    steps += _job_steps(r, job, inputs)
    return Trace(subject, "arrival", dataset, steps, (retracted_note + "; " if retracted_note else "")
                 + _job_stop(r, job, inputs, covered=True))


def _detections(r: Reader, t: Trace, dataset: str, aid: str, converted_at: str | None, retracted: bool) -> None:
    """The arrival's detections (``landfall.core.artifacts.detections``: one listing of
    ``scores/<dataset>/<arrival>/``): a
    step per champion that scored it, and the end of the chain; or why it is not scored."""
    prefix = r.uri(detections.arrival_prefix(r.lay, dataset, aid))
    found: list[detections.Summary] = []
    for uri in r.storage.list(prefix, suffix="/" + detections.SUMMARY):
        try:
            found.append(detections.Summary.from_json(r.storage.read_bytes(uri), uri))
        except (LandfallError, KeyError, TypeError, ValueError) as exc:  # one bad object does not stop the trace
            t.steps.append(Step("detections", f"unreadable detections summary: {exc}", None, uri,
                                {"error": str(exc)}))
    found.sort(key=lambda s: str(s.message.get("scored_at", "")))
    for s in found:
        t.steps.append(_detection_step(r, s))
    if found:
        d = t.steps[-1].detail  # the newest champion's
        t.stop = (f"{t.stop}; detections: {d['anomalies']} anomalous {d['unit']} of {d['count']} in "
                  f"{d['ranges_total']} range(s), by champion {d['run']}"
                  + ("" if d["published"] else " (not yet published)"))
        return
    if retracted:
        t.stop = f"{t.stop}; not scored (a retracted arrival is not scored)"
        return
    current = r.champion(dataset)
    first = current
    if current is not None and current.seq > 1:
        try:
            first = champion.read_history(r.storage, champion.bucket_root(r.bucket), dataset, 1)
        except (LandfallError, ValueError):
            first = current
    if current is None or first is None or (converted_at and first.promoted_at > converted_at):
        why = (f"no champion when it arrived (dataset {dataset} has none yet)" if current is None or first is None
               else f"no champion when it arrived (the first, {first.run}, was promoted at {first.promoted_at}, "
                    "after it was converted)")
        t.steps.append(Step("detections", f"not scored: {why}; a new champion scores old arrivals only when asked: "
                                          f"landfall rescore --dataset {dataset}", None, prefix,
                            {"scored": False, "champion": current.run if current else None}))
        t.stop = f"{t.stop}; not scored: {why}"
        return
    t.steps.append(Step("detections", f"not scored: the scorer has not scored it (yet) with the champion "
                                      f"{current.run} (#{current.seq}): its request may still be in Pub/Sub, or "
                                      "dead-lettered (landfall status shows the scorer's dead letters)", None, prefix,
                        {"scored": False, "champion": current.run}))
    t.stop = f"{t.stop}; not scored: the scorer has not scored it (yet)"


RANGES_SHOWN = 3  # the first few ranges of a detection, in the trace's text


def _detection_step(r: Reader, s: detections.Summary) -> Step:
    m = s.message
    kind = m.get("kind")
    unit = "rows" if kind == "series" else "instances"
    ranges = [x for x in m.get("ranges") or [] if isinstance(x, dict)]
    total = int(m.get("ranges_total") or len(ranges))
    sent = detections.published(r.storage, s)
    shown = ", ".join(_range_text(x, kind) for x in ranges[:RANGES_SHOWN])
    more = f" (+{total - RANGES_SHOWN} more)" if total > RANGES_SHOWN else ""
    champ = m.get("champion") or {}
    text = (f"scored by champion {s.run} (#{champ.get('seq')}): {s.anomalies} anomalous {unit} of {m.get('count')}"
            f" above {m.get('threshold')}, {total} range(s){': ' + shown + more if shown else ''}; "
            f"{'published' if sent else 'not yet published'}; scores {m.get('scores')}")
    return Step("detections", text, m.get("scored_at"), s.uri, {
        "run": s.run, "seq": champ.get("seq"), "kind": kind, "unit": unit, "count": m.get("count"),
        "anomalies": s.anomalies, "threshold": m.get("threshold"), "ranges_total": total,
        "ranges": ranges[:RANGES_SHOWN], "scores": m.get("scores"), "summary": s.uri, "published": sent,
        "detection_id": m.get("detection_id"), "check_status": m.get("check_status")})


def _range_text(x: dict[str, Any], kind: Any) -> str:
    if kind != "series":
        return f"instances {x.get('start')}-{x.get('end')}"
    if x.get("start_at"):
        return f"{x.get('start_at')} .. {x.get('end_at')} (peak {_g(x.get('peak_score'))} at {x.get('peak_at')})"
    return (f"rows {x.get('first_row')}-{x.get('last_row')} (time {x.get('start')} .. {x.get('end')}, peak "
            f"{_g(x.get('peak_score'))} at {x.get('peak')})")


def _g(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, int | float) else str(v)


def _covering_job(r: Reader, dataset: str, rid: str, manifest_uri: str,
                  created_at: str) -> tuple[str | None, JobInputs | None, int]:
    """The job whose inputs list request ``rid``: its own job (policy allow), else newest first from the head."""
    own = jobmeta.job_name(dataset, "request:" + rid)
    inputs = r.inputs(own)
    if inputs is not None:
        return own, inputs, 1
    seq, looked = r.ledger.head_seq(dataset), 0
    while seq > 0 and looked < MAX_JOBS:
        name = r.ledger.job_name(dataset, seq)
        inputs = r.inputs(name)
        looked += 1
        if inputs is not None:
            if rid in {q.get("request_id") for q in inputs.requests}:
                return name, inputs, looked
            if created_at and inputs.released_at < created_at:
                break  # released before the arrival was converted: neither it nor an older job covers it
        seq -= 1
    return None, None, looked


def _job_steps(r: Reader, job: str, inputs: JobInputs) -> list[Step]:
    steps = [Step("job", f"job {job} (#{inputs.seq} of {inputs.dataset}) released with {len(inputs.manifests)} "
                         f"manifests for {len(inputs.requests)} requests"
                  + (f", on snapshot {inputs.snapshot}" if inputs.snapshot else "")
                  + (f", after {inputs.after}" if inputs.after else ""), inputs.released_at,
                  r.ledger.inputs_uri(job), {"job": job, "seq": inputs.seq, "after": inputs.after,
                                             "manifests": len(inputs.manifests), "requests": len(inputs.requests)})]
    state, source = r.job_state(job)
    steps.append(Step("job", f"state: {state} (from {source})", None, None, {"state": state, "source": source}))
    metrics_uri = r.job_dir(job) + "/metrics.json"
    m = r.json(metrics_uri)
    if m is not None:
        steps += metrics_steps(m, metrics_uri)
    result_uri = r.job_dir(job) + "/result.json"
    marker = r.json(result_uri)
    if marker is not None:
        msg = marker.get("message") or {}
        sent = "published" if marker.get("published_at") else "decided, not yet published"
        steps.append(Step("result", f"result {sent}: {msg.get('status')}, {msg.get('verdict')} (by "
                                    f"{msg.get('published_by')})", marker.get("published_at"), result_uri,
                          {"status": msg.get("status"), "verdict": msg.get("verdict"),
                           "published": bool(marker.get("published_at"))}))
    current = r.champion(inputs.dataset)
    if current is not None:
        mine = current.run == job
        steps.append(Step("champion", f"champion of {inputs.dataset}: {current.run} (#{current.seq}, "
                                      f"{current.reason}){' - this job' if mine else ''}", current.promoted_at,
                          champion.champion_uri(champion.bucket_root(r.bucket), inputs.dataset),
                          {"run": current.run, "seq": current.seq, "reason": current.reason, "this_job": mine}))
    return steps


def metrics_steps(m: dict[str, Any], metrics_uri: str) -> list[Step]:
    """A job's ``metrics.json`` as steps: its metrics, baselines, the champion's view and its timeline; one step
    saying why when it is unreadable."""
    if "invalid" in m:
        return [Step("metrics", f"metrics unreadable: {m['invalid']}", None, metrics_uri, {"invalid": m["invalid"]})]
    try:
        return _metrics_steps(m, metrics_uri)
    except MISSHAPEN as exc:
        why = misshapen(metrics_uri, exc)
        return [Step("metrics", f"metrics {why}", None, metrics_uri, {"invalid": why})]


def _metrics_steps(m: dict[str, Any], metrics_uri: str) -> list[Step]:
    steps: list[Step] = []
    epochs = m.get("epochs") or []
    last = epochs[-1] if epochs else {}
    text = (f"metrics: {m.get('status')}, {len(epochs)}/{m.get('epochs_requested')} epochs, loss "
            f"{last.get('loss')}, val_loss {last.get('val_loss')}")
    if m.get("verdict"):
        text += (f"; verdict {m['verdict']} (challenger {m.get('challenger_loss')} vs champion "
                 f"{m.get('champion_loss')})")
    if m.get("error"):
        text += f"; error{' in ' + m['failed_phase'] if m.get('failed_phase') else ''}: {m['error']}"
    steps.append(Step("metrics", text, m.get("ended_at") or m.get("started_at"), metrics_uri,
                      {k: m.get(k) for k in ("status", "verdict", "challenger_loss", "champion_loss", "error",
                                             "failed_phase")} | {"epochs": len(epochs)}))
    if isinstance(m.get("baselines"), dict):  # the detectors to beat, on the same held-out windows
        steps.append(Step("baselines", results.baselines_line(m), m.get("ended_at"), metrics_uri,
                          {"baselines": {n: {k: v.get(k) for k in ("loss", "skill")}
                                         for n, v in m["baselines"].items() if isinstance(v, dict)},
                           "beaten_by": m.get("beaten_by"), "min_skill_over": m.get("min_skill_over"),
                           "instances": m.get("instances")}))
    if results.detection_line(m):  # which candidate detects best, and by what (trainer.judging.selection)
        found = m["detection"]
        steps.append(Step("detection", results.detection_line(m), m.get("ended_at"), metrics_uri,
                          {k: found.get(k) for k in ("basis", "chosen", "score", "order", "why", "model")}))
    if isinstance(m.get("champion_view"), dict):  # what the champion flagged in the job's new arrivals
        steps.append(Step("champion_view", results.champion_view_line(m["champion_view"]), m.get("started_at"),
                          metrics_uri, results.champion_view_summary(m["champion_view"]) or {}))
    if core_timeline.of(m):  # where the job's time went, phase by phase, on every worker
        steps.append(Step("timeline", core_timeline.line(m), m.get("started_at"), metrics_uri,
                          core_timeline.compact(m) or {}))
    return steps


def _job_stop(r: Reader, job: str, inputs: JobInputs, covered: bool) -> str:
    uri = r.job_dir(job) + "/metrics.json"
    try:
        return _job_stop_of(r, job, inputs, covered, r.json(uri) or {})
    except MISSHAPEN as exc:
        return f"{'trained by job' if covered else 'job'} {job}: metrics {misshapen(uri, exc)}"


def _job_stop_of(r: Reader, job: str, inputs: JobInputs, covered: bool, m: dict[str, Any]) -> str:
    state, _ = r.job_state(job)
    lead = f"trained by job {job}" if covered else f"job {job}"
    if state in ("Succeeded", "Failed", "Ended") or m.get("status") in ("succeeded", "failed"):
        if state == "Failed" or m.get("status") == "failed":
            why = m.get("error") or r.job_failure(job) or "no metrics: it died before writing any"
            return f"{lead}: Failed ({why})"
        current = r.champion(inputs.dataset)
        verdict = m.get("verdict")
        beaten = [b for b in (m.get("beaten_by") or []) if isinstance(b, str)]
        # A promoted model that a baseline outside the dataset's gate beats is named so (trainer.judging.baselines).
        caveat = (f"; BEATEN BY {', '.join(beaten)} (not in the dataset's gate, verdict.min_skill_over)"
                  if beaten else "")
        if verdict == "promoted":
            if current is not None and current.run == job:
                return f"{lead} (Succeeded): promoted, the champion of {inputs.dataset} (#{current.seq}){caveat}"
            return (f"{lead} (Succeeded): promoted, since replaced by {current.run} (#{current.seq}){caveat}"
                    if current else f"{lead} (Succeeded): promoted{caveat}")
        if verdict == "kept_champion":
            return (f"{lead} (Succeeded): kept the champion {current.run if current else '?'} (loss "
                    f"{m.get('challenger_loss')} against {m.get('champion_loss')})")
        if verdict == "no_skill":
            skill, why = m.get("skill"), (m.get("evaluation") or {}).get("reason")
            return (f"{lead} (Succeeded): not promoted, no skill: "
                    + (why if why else f"skill {skill:.3f} over the mean-window baseline, below min_skill "
                       f"{m.get('min_skill')}" if isinstance(skill, int | float)
                       else "the baseline reconstructs the data exactly")
                    + (f"; the champion stays {current.run}" if current else "; the dataset has no champion")
                    + (f"; {m.get('epochs_run')} of {m.get('epochs_ceiling')} epochs" if m.get("epochs_run") else ""))
        return f"{lead} ({state}): {verdict or 'no verdict'}"
    if not covered:
        return f"{lead} ({state})"
    return f"converted, {'training in' if state == 'Running' else 'covered by'} job {job} ({state})"


def _checks_steps(r: Reader, manifest: dict[str, Any], manifest_uri: str, steps: list[Step]) -> str:
    """The arrival's checks against its dataset's reference when they flagged it, and an operator's admission:
    steps; returns the findings that still hold it in quarantine ("" when it is not held)."""
    found = manifest.get("checks") or {}
    if not found.get("findings"):
        return ""  # admitted, or first: nothing to say beyond the manifest
    findings = "; ".join(quarantine.finding_line(f) for f in found.get("findings", []))
    reference = found.get("reference") or {}
    what = {"warned": f"trained on, flagged: {findings}",
            "quarantined": f"quarantined: {findings}"}.get(found.get("status"), str(found.get("status")))
    steps.append(Step("checks", f"checked against the reference of {reference.get('arrivals')} arrivals: {what}",
                      manifest.get("created_at"), manifest_uri.rsplit("/", 1)[0] + "/" + layout.PROFILE,
                      {"status": found.get("status"), "findings": found.get("findings", []), "reference": reference}))
    if found.get("status") != "quarantined":
        return ""
    admission_uri = quarantine.admission_uri(manifest_uri)
    admitted = r.json(admission_uri)
    if admitted is None:
        return findings
    steps.append(Step("admission", f"admitted by {admitted.get('by')}", admitted.get("admitted_at"), admission_uri,
                      {"by": admitted.get("by")}))
    return ""


# -- a job ----------------------------------------------------------------------------------------------------
def trace_job(r: Reader, job: str) -> Trace:
    inputs = r.inputs(job)
    if inputs is None:
        return Trace(job, "job", None, [], f"no job {job}: gs://{r.bucket}/{r.lay.runs_prefix}{job}/inputs.json "
                                            "does not exist", found=False)
    arrivals = []
    for q in inputs.requests[:MAX_ARRIVALS]:
        manifest_uri = str(q.get("manifest") or "")
        aid = manifest_uri.rstrip("/").rsplit("/", 2)[-2] if manifest_uri.endswith("/" + layout.MANIFEST) else None
        retracted = bool(manifest_uri) and r.storage.exists(manifest_uri.rsplit("/", 1)[0] + "/" + layout.RETRACTION)
        arrivals.append({"request_id": q.get("request_id"), "reason": q.get("reason"), "arrival_id": aid,
                         "manifest": manifest_uri, "arrived_at": q.get("arrived_at"), "retracted": retracted})
    steps = _job_steps(r, job, inputs)
    more = len(inputs.requests) - len(arrivals)
    stop = _job_stop(r, job, inputs, covered=False)
    if more > 0:
        stop += f"; {more} more requests in {r.ledger.inputs_uri(job)}"
    return Trace(job, "job", inputs.dataset, steps, stop, arrivals=arrivals)


# -- resolving the subject --------------------------------------------------------------------------------------
def trace(r: Reader, subject: str, dataset: str | None = None) -> Trace:
    name, generation = subject, None
    if "#" in subject:
        name, _, g = subject.rpartition("#")
        generation = int(g) if g.isdigit() else None
    if name.startswith("gs://"):
        bucket, name = layout.split_gs(name)
        if bucket != r.bucket:
            r = Reader(r.storage, bucket, r.lay, r.backend)
    if name.startswith(r.lay.incoming_prefix):
        return _trace_object(r, name, generation)
    if layout.ARRIVAL_ID_RE.match(subject):
        for ds in [dataset] if dataset else _datasets(r):
            found = trace_arrival(r, ds, subject)
            if found.found:
                return found
        where = f"dataset {dataset}" if dataset else "any dataset of the bucket"
        return Trace(subject, "arrival", dataset, [], f"no record of arrival {subject} in {where}", found=False)
    return trace_job(r, subject)


def _datasets(r: Reader) -> list[str]:
    """Every dataset with converted or rejected arrivals: one listing of ``tfrecords/`` and one of ``rejected/``."""
    out: set[str] = set()
    for prefix in (r.lay.tfrecords_prefix, r.lay.rejected_prefix):
        base = r.uri(prefix)
        out |= {u[len(base):].strip("/") for u in r.storage.list_prefixes(base)}
    return sorted(out)


def _trace_object(r: Reader, name: str, generation: int | None) -> Trace:
    dataset = layout.dataset_of(name, r.lay)
    if not dataset:
        return Trace(name, "arrival", None, [], f"{name} is not under {r.lay.incoming_prefix}<dataset>/", found=False)
    if generation is None:
        try:
            generation = r.storage.stat(r.uri(name)).generation
        except NotFound:
            generation = _newest_recorded_generation(r, name, dataset)
        if generation is None:
            return Trace(name, "arrival", dataset, [], f"gs://{r.bucket}/{name} does not exist and no arrival of it "
                                                       "is recorded", found=False)
    found = trace_arrival(r, dataset, layout.arrival_id(name, generation), name, generation)
    if not found.found and not found.steps:
        found.steps = [Step("object", f"gs://{r.bucket}/{name} generation {generation}",
                            timestamps.of_generation(generation), r.uri(name))]
        found.stop = ("arrived, and no stage has recorded anything for it yet (its event may still be retrying, or "
                      "was dead-lettered: landfall status shows the dead letters)")
        found.found = True
    return found


def _newest_recorded_generation(r: Reader, name: str, dataset: str) -> int | None:
    start = layout.generations_prefix(name)
    for prefix in (r.uri(layout.dataset_prefix(r.lay, dataset) + start),
                   r.uri(f"{r.lay.rejected_prefix}{dataset}/{start}")):
        generations = set()
        for uri in r.storage.list(prefix):
            aid = uri[len(prefix) - len(start):].split("/", 1)[0].removesuffix(".json")
            g = layout.generation_of(name, aid)
            if g is not None:
                generations.add(g)
        if generations:
            return max(generations)
    return None


# -- the command ----------------------------------------------------------------------------------------------
def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    p.add_argument("subject", help="gs://BUCKET/incoming/<dataset>/... (#GENERATION), an arrival id, or a job name")
    p.add_argument("--dataset", help="the dataset of a bare arrival id (default: look in every dataset)")
    p.add_argument("--json", action="store_true")
    add_target_arguments(p)


def run(args: argparse.Namespace) -> int:
    return on_the_stack(args, print_trace)


def open_reader(cfg: Any, bucket: str) -> Reader:
    """A reader of ``bucket`` with the configured backend; without a reachable backend, the bucket alone."""
    from landfall.submit.backends import open_backend

    try:
        backend = open_backend(cfg)
    except (LandfallError, ValueError, OSError) as exc:
        print(f"landfall: no job backend ({exc}); job states come from the bucket", file=sys.stderr)
        backend = None
    return Reader(Storage(cfg.project), bucket, Layout.load(), backend)


def print_trace(args: argparse.Namespace) -> int:
    """The command on its target (``run`` picks it): the subject's trace printed, text or JSON; 1 when not found."""
    cfg = job_config(args, "bucket", "backend", "local_state", "namespace", "project")
    bucket = cfg.bucket or (layout.split_gs(args.subject)[0] if args.subject.startswith("gs://") else "")
    if not bucket:
        raise NotFound("name the bucket: --bucket, LANDFALL_BUCKET or a gs:// object")
    result = trace(open_reader(cfg, bucket), args.subject, args.dataset)
    if args.json:
        print(json.dumps(result.as_dict(), indent=2))
    else:
        print(render(result))
    return 0 if result.found else 1


def render(t: Trace) -> str:
    lines = [f"{t.kind} {t.subject}" + (f" (dataset {t.dataset})" if t.dataset else "")]
    for s in t.steps:
        lines.append(f"  {(s.at or '')[:19]:<19}  {s.what:<10} {s.text}")
    for a in t.arrivals:
        lines.append(f"  {(a.get('arrived_at') or '')[:19]:<19}  {'arrival':<10} {a['arrival_id'] or '-'} "
                     f"(request {a['request_id']}, {a['reason']}){' retracted' if a['retracted'] else ''}")
    lines.append(f"=> {t.stop}")
    return "\n".join(lines)
