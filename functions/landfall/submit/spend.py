"""Each dataset's recent jobs and their GPU spend: ``gs://B/requests/<D>/spend.json`` (``landfall.spend/v1``).

What the retrain policy's ``max_jobs_per_day`` and ``gpu_hours_per_day`` (``landfall.submit.policy``) and
``landfall status``'s spend over 24 h and 30 days are computed from, in one small object per dataset:

- ``jobs``: one entry per job released in the last 24 h (or not yet ended, or ended within the last 24 h):
  ``{job, seq, released_at, ended_at, gpu_seconds, estimated_cost, accelerator, cost_basis}``, times in
  seconds since the epoch on the submit stage's clock.
- ``days``: older jobs folded into one total per UTC day (``{day, jobs, gpu_seconds, estimated_cost}``), the
  last ``RETENTION_DAYS`` days only (so the 30-day spend is to the day, the 24 h one exact).

Bounded, whatever the history: the entries are the jobs of one day (a dataset runs at most one job at a
time, and ``max_jobs_per_day`` caps them further) plus at most ``RETENTION_DAYS + 1`` day totals; it is read
once per release decision, never listed. Rewritten read-modify-write with a generation precondition
(``Storage.write_if_generation``), so concurrent releasers and reconcilers never lose each other's entries.

Written at two moments: the releaser appends the job it released (after the release itself: a crash in
between leaves the head missing, and the next decision adds it from its ``inputs.json``); and the first
decision that finds the job ended records its GPU-seconds: the chief's ``metrics.json`` ``gpu_seconds`` when it
wrote them (``cost_basis: chief``), else estimated from the job object's start and end times, its workers and
GPUs (``job_object``), else, the object gone too, from the times in its ``metrics.json`` (``metrics_times``),
else from its release to now, never past its ``activeDeadlineSeconds`` (``released_to_found_ended``, an upper
bound). Policy ``allow`` (a job per request) keeps no such record and is not held.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from typing import Any

from landfall.core import logs
from landfall.core.contracts.layout import Layout, gs
from landfall.core.contracts.messages import JobInputs
from landfall.core.errors import AlreadyExists, Invalid, NotFound, TemporaryError
from landfall.core.rules import cost, timestamps
from landfall.core.services.storage import Storage
from landfall.submit import engine, jobmeta
from landfall.submit.config import JobConfig
from landfall.submit.policy import DAY_S, PastJob, RetrainPolicy

log = logs.get("landfall.submit.spend")

SPEND_SCHEMA = "landfall.spend/v1"
RETENTION_DAYS = 30
ATTEMPTS = 8
GPU_RESOURCE = "nvidia.com/gpu"
ACCELERATOR_ENV = "LANDFALL_ACCELERATOR"


@dataclasses.dataclass
class Record:
    dataset: str
    jobs: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    days: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def entry(self, job: str) -> dict[str, Any] | None:
        return next((e for e in self.jobs if e.get("job") == job), None)

    def past_jobs(self) -> list[PastJob]:
        return [PastJob(float(e["released_at"]), e.get("ended_at"), e.get("gpu_seconds")) for e in self.jobs]

    def to_json(self) -> bytes:
        return json.dumps({"schema": SPEND_SCHEMA, "dataset": self.dataset, "jobs": self.jobs, "days": self.days},
                          sort_keys=True).encode()


def uri(bucket: str, layout: Layout, dataset: str) -> str:
    return gs(bucket, f"{layout.requests_prefix}{dataset}/spend.json")


def read(storage: Storage, bucket: str, layout: Layout, dataset: str) -> tuple[Record, int]:
    """The record and its generation (0: none yet). An unreadable record is started afresh (logged): it is
    bookkeeping, and a dataset must never stick on it."""
    where = uri(bucket, layout, dataset)
    try:
        data, generation = storage.read_generation(where)
    except NotFound:
        return Record(dataset), 0
    try:
        raw = json.loads(data)
        if raw.get("schema") != SPEND_SCHEMA:
            raise Invalid(f"schema {raw.get('schema')!r}")
        return Record(dataset, [dict(e) for e in raw["jobs"]], [dict(d) for d in raw["days"]]), generation
    except (ValueError, TypeError, KeyError, AttributeError, Invalid) as exc:
        log.error("spend record %s unreadable (%s): started afresh", where, exc, extra={"dataset": dataset})
        return Record(dataset), generation


def update(storage: Storage, bucket: str, layout: Layout, dataset: str, change: Any, now: float) -> Record:
    """Applies ``change(record) -> bool`` (False: nothing to write), prunes to the window, writes if changed."""
    for _ in range(ATTEMPTS):
        record, generation = read(storage, bucket, layout, dataset)
        changed = change(record)
        changed = prune(record, now) or changed
        if not changed:
            return record
        try:
            storage.write_if_generation(uri(bucket, layout, dataset), record.to_json(), generation)
            return record
        except AlreadyExists:
            continue  # another releaser or reconciler wrote meanwhile: apply the change to theirs
    raise TemporaryError(f"spend record of {dataset} kept changing")


def prune(record: Record, now: float) -> bool:
    """Folds the entries that ended and were released over 24 h ago into day totals; drops days over 30."""
    keep, changed = [], False
    for e in record.jobs:
        ended = e.get("ended_at")
        if ended is not None and ended <= now - DAY_S and float(e["released_at"]) <= now - DAY_S:
            day = datetime.fromtimestamp(ended, UTC).date().isoformat()
            total = next((d for d in record.days if d["day"] == day), None)
            if total is None:
                total = {"day": day, "jobs": 0, "gpu_seconds": 0.0, "estimated_cost": 0.0}
                record.days.append(total)
            total["jobs"] += 1
            total["gpu_seconds"] = round(total["gpu_seconds"] + float(e.get("gpu_seconds") or 0.0), 3)
            total["estimated_cost"] = round(total["estimated_cost"] + float(e.get("estimated_cost") or 0.0), 6)
            changed = True
        else:
            keep.append(e)
    oldest = datetime.fromtimestamp(now - RETENTION_DAYS * DAY_S, UTC).date().isoformat()
    days = sorted((d for d in record.days if d["day"] >= oldest), key=lambda d: d["day"])
    changed = changed or len(days) != len(record.days)
    record.jobs, record.days = keep, days
    return changed


def released(storage: Storage, bucket: str, layout: Layout, inputs: JobInputs, at: float) -> None:
    """The releaser's entry for the job it released (idempotent)."""
    def change(record: Record) -> bool:
        if record.entry(inputs.job):
            return False
        record.jobs.append({"job": inputs.job, "seq": inputs.seq, "released_at": at, "ended_at": None,
                            "gpu_seconds": None, "estimated_cost": None, "accelerator": None, "cost_basis": None})
        return True

    update(storage, bucket, layout, inputs.dataset, change, at)


def ended(storage: Storage, bucket: str, layout: Layout, inputs: JobInputs, job: dict[str, Any] | None,
          defaults: JobConfig, now: float) -> Record:
    """Makes sure the ended head ``inputs.job`` is in the record with its GPU-seconds; returns the record."""
    def change(record: Record) -> bool:
        entry = record.entry(inputs.job)
        if entry and entry.get("ended_at") is not None:
            return False
        if entry is None:  # its releaser died before recording it
            at = timestamps.epoch(inputs.released_at)
            entry = {"job": inputs.job, "seq": inputs.seq, "released_at": min(now, at if at is not None else now)}
            record.jobs.append(entry)
        entry.update(measure(storage, bucket, layout, inputs.job, job, defaults, float(entry["released_at"]), now))
        return True

    return update(storage, bucket, layout, inputs.dataset, change, now)


def measure(storage: Storage, bucket: str, layout: Layout, name: str, job: dict[str, Any] | None, defaults: JobConfig,
            released_at: float, now: float) -> dict[str, Any]:
    """An ended job's ``ended_at`` and cost fields: the chief's record, else an estimate (module docstring)."""
    doc = job_metrics(storage, jobmeta.job_dir(bucket, name, layout.runs_prefix))
    ended_at = timestamps.epoch(doc.get("ended_at"))
    if isinstance(doc.get("gpu_seconds"), int | float) and not isinstance(doc.get("gpu_seconds"), bool):
        return {"ended_at": min(now, ended_at) if ended_at is not None else now,
                **{k: doc.get(k) for k in ("gpu_seconds", "accelerator", "estimated_cost")}, "cost_basis": "chief"}
    if job is not None:
        fields, end = estimate(job, defaults)
        return {"ended_at": min(now, end) if end is not None else now, **fields}
    wall = cost.wall_s(doc.get("started_at"), doc.get("ended_at"))
    if wall is not None and ended_at is not None:  # a chief that recorded its times, not its cost (older trainer)
        return {"ended_at": min(now, ended_at), **cost.fields(defaults.workers, defaults.gpus_per_worker, wall,
                                                              defaults.accelerator, "metrics_times")}
    # Nothing left to measure: at most from its release to now, and never past its deadline.
    end = min(now, released_at + defaults.active_deadline_seconds)
    return {"ended_at": end, **cost.fields(defaults.workers, defaults.gpus_per_worker, max(0.0, end - released_at),
                                           defaults.accelerator, "released_to_found_ended")}


def estimate(job: dict[str, Any], defaults: JobConfig) -> tuple[dict[str, Any], float | None]:
    """Cost fields for a job object that ended (its start to its end, its workers and GPUs), and its end."""
    status = job.get("status") or {}
    start = (timestamps.epoch(status.get("startTime"))
             or timestamps.epoch(job.get("metadata", {}).get("creationTimestamp")))
    end = timestamps.epoch(status.get("completionTime"))
    if end is None:
        stamps = [timestamps.epoch(c.get("lastTransitionTime")) for c in engine.conditions(job)
                  if c.get("status") == "True" and c.get("type") in ("Succeeded", "Failed", "Completed")]
        end = max((s for s in stamps if s is not None), default=None)
    containers = engine.containers_of(job)
    gpus = 0
    accelerator = defaults.accelerator
    for c in containers[:1]:
        limit = ((c.get("resources") or {}).get("limits") or {}).get(GPU_RESOURCE)
        try:
            gpus = int(limit or 0)
        except (TypeError, ValueError):
            gpus = 0
        for env in c.get("env") or []:
            if env.get("name") == ACCELERATOR_ENV and env.get("value"):
                accelerator = str(env["value"])
    wall = (end - start) if start is not None and end is not None else 0.0
    return cost.fields(engine.workers_of(job), gpus, wall, accelerator, "job_object"), end


def job_metrics(storage: Storage, job_dir: str) -> dict[str, Any]:
    """A job's ``metrics.json`` as a dict; empty when it has none (a job that died early) or it is not JSON."""
    try:
        raw = json.loads(storage.read_bytes(job_dir + "/metrics.json"))
    except (NotFound, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


def summary(record: Record, policy: RetrainPolicy, now: float) -> dict[str, Any]:
    """Spend over the last 24 h (exact) and 30 days (to the day), with the budget, for ``landfall status``."""
    day = [e for e in record.jobs if e.get("ended_at") is not None and e["ended_at"] > now - DAY_S]
    older = [e for e in record.jobs if e.get("ended_at") is not None and e["ended_at"] <= now - DAY_S]

    def total(entries: list[dict[str, Any]], key: str) -> float:
        return round(sum(float(e.get(key) or 0.0) for e in entries), 6)

    gpu_24h, cost_24h = total(day, "gpu_seconds"), total(day, "estimated_cost")
    return {
        "last_24h": {"jobs_released": sum(1 for e in record.jobs if float(e["released_at"]) > now - DAY_S),
                     "gpu_hours": round(gpu_24h / 3600, 6), "estimated_cost": cost_24h},
        "last_30d": {"jobs": len(day) + len(older) + sum(int(d["jobs"]) for d in record.days),
                     "gpu_hours": round((gpu_24h + total(older, "gpu_seconds") + total(record.days, "gpu_seconds"))
                                        / 3600, 6),
                     "estimated_cost": round(cost_24h + total(older, "estimated_cost")
                                             + total(record.days, "estimated_cost"), 6)},
        "running": [e["job"] for e in record.jobs if e.get("ended_at") is None],
        "budget": {"gpu_hours_per_day": policy.gpu_hours_per_day or None,
                   "max_jobs_per_day": policy.max_jobs_per_day or None},
        "estimated": sorted({str(e.get("cost_basis")) for e in record.jobs
                             if e.get("cost_basis") not in (None, "chief")}),
    }
