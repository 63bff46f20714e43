"""A job's timeline: each phase the trainer names, its start and seconds, on every worker (issue #42).

The trainer records it (``trainer.stopwatch``: every ``trainer.errors.phase`` is timed, and so are the epochs and
the verdict's passes); the chief writes it into ``metrics.json`` as ``timeline``:

    {"origin": ISO time of the earliest worker's start (every ``start_s`` counts from it),
     "workers": [{"worker": i, "started_at": ISO, "offset_s": its start after the origin, "total_s",
                  "epochs_s", "outside_epochs_s" (total_s - epochs_s), "unaccounted_s" (outside every top-level
                  phase), "phases": [{"phase", "within" (the enclosing phase or null), "start_s", "seconds",
                  "epoch" (an epoch's number: metrics.json epochs[epoch - 1]), "failed" (when it raised)}]}
                 or {"worker": i, "missing": why}, ...],
     "summary": [{"phase", "within", "seconds" (the slowest worker's), "per_worker": [...], "count"}],
     "epochs_s", "outside_epochs_s": the job's, from the epochs' wall_s and its wall time (restarts included)}

Each worker's epochs are one summary row, ``epochs`` (their seconds summed); ``landfall.core.rules.cost``'s GPU-seconds
outside the epochs are ``outside_epochs_gpu_seconds`` beside ``gpu_seconds``. ``summary``, ``line`` and ``compact``
are what ``landfall status``, ``trace`` and the report show. Pure data: no clock is read here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from landfall.core.rules import cost, timestamps

FIELD = "timeline"
EPOCH = "epoch"  # an epoch's span: {"phase": "epoch", "epoch": n}
EPOCHS = "epochs"  # the summary's row of all of them
# Short names for one line (landfall status, trace); any other phase is shown by its own name.
SHORT = {
    "reading the manifests": "manifests",
    "reading the job dir": "job dir",
    "finding the warm start": "warm start",
    "staging the shards": "staging",
    "scoring new data with the champion": "champion's view",
    "leaving out what the champion flagged": "exclusion",
    "loading TensorFlow": "TensorFlow import",
    "creating the strategy": "strategy",
    "recording the attempt": "attempt",
    "restoring the backup": "backup restore",
    "building the model and broadcasting its variables": "model",
    "training": "fit with its epochs",
    "saving the model": "saving",
    "evaluating against the champion": "verdict",
    "recording the result": "result",
    "loading the challenger": "challenger load",
    "fitting the baselines": "baselines",
    "scoring the held-out windows": "held-out pass",
    "the threshold": "threshold",
    "the labelled check": "labelled check",
    "scoring the champion": "champion pass",
    "the verdict": "promotion",
}


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def merge(workers: list[dict[str, Any] | None], num_workers: int, doc: dict[str, Any] | None = None,
          missing: str = "not reported") -> dict[str, Any]:
    """One timeline from each worker's own (``trainer.stopwatch.Recorder.doc``; ``None`` for a worker that did not
    report), with every start counted from the earliest worker's. ``doc`` (metrics.json) gives the job's epochs and
    wall time for its ``epochs_s`` and ``outside_epochs_s``."""
    mine = {int(w["worker"]): w for w in workers if isinstance(w, dict) and isinstance(w.get("worker"), int)}
    starts = [timestamps.epoch(w.get("started_at")) for w in mine.values()]
    known = [s for s in starts if s is not None]
    origin = min(known) if known else None
    out: list[dict[str, Any]] = []
    for i in range(max(num_workers, max(mine, default=-1) + 1)):
        w = mine.get(i)
        if w is None:
            out.append({"worker": i, "missing": missing})
            continue
        began = timestamps.epoch(w.get("started_at"))
        offset = round(began - origin, 3) if began is not None and origin is not None else 0.0
        phases = [{**p, "start_s": round(float(p.get("start_s") or 0.0) + offset, 3)}
                  for p in w.get("phases") or [] if isinstance(p, dict)]
        out.append({**{k: v for k, v in w.items() if k != "phases"}, "offset_s": offset, "phases": phases})
    timeline: dict[str, Any] = {
        "origin": _iso(origin, mine), "workers": out, "summary": summary(out)}
    timeline.update(job_figures(doc or {}))
    return timeline


def _iso(origin: float | None, workers: dict[int, dict[str, Any]]) -> str | None:
    for w in workers.values():
        if origin is not None and timestamps.epoch(w.get("started_at")) == origin:
            return str(w["started_at"])
    return None


def job_figures(doc: dict[str, Any]) -> dict[str, Any]:
    """The job's seconds in its epochs (each epoch's wall_s: its slowest worker's) and outside them (its wall time,
    first start to end or to now, less those)."""
    walls = [_num(e.get("wall_s")) for e in doc.get("epochs") or [] if isinstance(e, dict)]
    inside = round(sum(w for w in walls if w is not None), 3)
    wall = cost.wall_s(doc.get("started_at"), doc.get("ended_at"))
    return {"epochs_s": inside, "outside_epochs_s": round(max(0.0, wall - inside), 3) if wall is not None else None}


def gpu_fields(doc: dict[str, Any], gpu_seconds: float | None) -> dict[str, Any]:
    """``epochs_gpu_seconds`` and ``outside_epochs_gpu_seconds``: a job's GPU-seconds (``cost.gpu_seconds``: GPUs
    held x wall time) split by the share of its wall time its epochs took; ``None`` without a cost."""
    wall = cost.wall_s(doc.get("started_at"), doc.get("ended_at"))
    if gpu_seconds is None or not wall:
        none = None if gpu_seconds is None else 0.0
        return {"epochs_gpu_seconds": none, "outside_epochs_gpu_seconds": none}
    per_second = gpu_seconds / wall  # GPUs held: workers x GPUs per worker
    inside = min(float(gpu_seconds), job_figures(doc)["epochs_s"] * per_second)
    return {"epochs_gpu_seconds": round(inside, 3), "outside_epochs_gpu_seconds": round(gpu_seconds - inside, 3)}


def summary(workers: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per phase in the order phases first started: the slowest worker's seconds and each worker's
    (``None`` where a worker did not run it); all epochs of a worker are one row, ``epochs``."""
    workers = list(workers)
    rows: dict[tuple[str, str | None], dict[str, Any]] = {}
    for i, w in enumerate(workers):
        seen: dict[tuple[str, str | None], int] = {}
        for p in w.get("phases") or []:
            name = EPOCHS if p.get("phase") == EPOCH else str(p.get("phase"))
            key = (name, None if name == EPOCHS else p.get("within"))
            row = rows.setdefault(key, {"phase": name, "within": key[1], "start_s": p.get("start_s"),
                                        "per_worker": [None] * len(workers), "count": 0})
            row["per_worker"][i] = round((row["per_worker"][i] or 0.0) + (_num(p.get("seconds")) or 0.0), 3)
            seen[key] = seen.get(key, 0) + 1
            row["count"] = max(row["count"], seen[key])
    out = []
    for row in sorted(rows.values(), key=lambda r: _num(r["start_s"]) or 0.0):
        values = [v for v in row["per_worker"] if v is not None]
        out.append({"phase": row["phase"], "within": row["within"], "seconds": max(values) if values else None,
                    "per_worker": row["per_worker"], "count": row["count"]})
    return out


def of(doc: Any) -> dict[str, Any] | None:
    """``metrics.json``'s timeline, if it has one."""
    found = doc.get(FIELD) if isinstance(doc, dict) else None
    return found if isinstance(found, dict) else None


def compact(doc: Any) -> dict[str, Any] | None:
    """What ``landfall status --json`` and ``trace --json`` carry: the summary rows (without their start), the job's
    seconds in and outside its epochs, its GPU-seconds outside them, and each worker's figures."""
    t = of(doc)
    if t is None:
        return None
    return {"phases": [{k: r.get(k) for k in ("phase", "within", "seconds", "per_worker", "count")}
                       for r in t.get("summary") or [] if isinstance(r, dict)],
            "epochs_s": t.get("epochs_s"), "outside_epochs_s": t.get("outside_epochs_s"),
            "outside_epochs_gpu_seconds": doc.get("outside_epochs_gpu_seconds"),
            "workers": [{k: w.get(k) for k in ("worker", "total_s", "epochs_s", "outside_epochs_s", "unaccounted_s",
                                               "missing") if k in w}
                        for w in t.get("workers") or [] if isinstance(w, dict)]}


def line(doc: Any) -> str:
    """One line: ``timeline: manifests 0.2 s, staging 1.6 s, ..., epochs 84.6 s (10), ..., verdict 12.3 s (...);
    outside the epochs 25.3 s (50.6 GPU-s)``; "" without a timeline (older jobs)."""
    t = of(doc)
    if t is None:
        return ""
    return _line(t.get("summary") or [], t.get("outside_epochs_s"), doc.get("outside_epochs_gpu_seconds"))


def compact_line(found: Any) -> str:
    """The same line from ``compact``'s figures (what ``landfall status --json`` holds)."""
    if not isinstance(found, dict):
        return ""
    return _line(found.get("phases") or [], found.get("outside_epochs_s"), found.get("outside_epochs_gpu_seconds"))


def _line(summary: list[Any], outside: Any, gpu: Any) -> str:
    rows = [r for r in summary if isinstance(r, dict) and _num(r.get("seconds")) is not None]
    parts = []
    for r in rows:
        if r.get("within") is not None:
            continue
        name = SHORT.get(str(r.get("phase")), str(r.get("phase")))
        text = f"{name} {r['seconds']:.1f} s" + (f" ({r['count']})" if r.get("phase") == EPOCHS else "")
        inner = [c for c in rows if c.get("within") == r.get("phase")]
        if inner and r.get("phase") != "training":  # the verdict's passes
            text += " (" + ", ".join(f"{SHORT.get(str(c['phase']), str(c['phase']))} {c['seconds']:.1f}"
                                     for c in inner) + ")"
        parts.append(text)
    out = "timeline: " + ", ".join(parts)
    if _num(outside) is not None:
        out += f"; outside the epochs {float(outside):.1f} s" + (f" ({float(gpu):.1f} GPU-s)" if _num(gpu) else "")
    return out
