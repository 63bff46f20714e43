"""``landfall report``: one self-contained HTML page of what a bucket holds (no server, no external assets).

Per dataset: its arrivals over time (converted, quarantined, retracted, converting, rejected), the newest quarantined
arrivals with each check, feature and measured value against its threshold and a before/after histogram of the
feature (the dataset's reference against the arrival, on the reference's deciles), the champion and its history,
the recent jobs with their loss curves (inline SVG) and verdicts, and the champion's anomaly threshold with the
histogram of its held-out errors. Then the newest ``DETECTIONS`` detections (arrivals scored on arrival by their
dataset's champion, ``landfall.core.artifacts.detections``: dataset, arrival, champion, anomalies of count, ranges,
when), newest
first, with the located scores of the newest ``DETECTION_PLOTS`` series among them (score per row over time, the
threshold, the anomalous ranges shaded; read from their Parquet in the bucket); the rejections by reason, the dead
letters and the pending requests with why they wait. Every plot names its axes and, when it draws more than one
series, has a legend. Built by ``collect`` (reads, never writes) and ``render`` (a string of HTML); ``make demo`` writes
it next to ``training.png``.

Reads: one listing each of ``tfrecords/``, ``rejected/``, ``requests/`` and ``scores/``; then named records: the newest
``RECENT_JOBS`` jobs of each dataset (found from its head, ``landfall.submit.ledger``: their inputs and metrics),
each rejection (the newest ``MAX_REJECTIONS``), each pending request, the champion, ``HISTORY`` entries of its
history and its ``threshold.json``. Dead letters are peeked (left in their subscription). Nothing lists
``runs/``, which holds every job's model and checkpoints; so jobs of policy ``allow`` (named by their request, not
numbered) are not shown.

Decision: ``threshold.json`` keeps the champion's held-out error quantiles, not the errors, so the "histogram" is
drawn from them: each bar spans two neighbouring quantiles and its height is the share of instances between them
over its width (an exact density histogram at the quantiles' resolution; the first bar starts at 0, as a squared
error cannot be negative, and the 0.1 % above p99.9 is left out).
"""

from __future__ import annotations

import html
import io
import itertools
import json
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from landfall.core.artifacts import champion, detections, results
from landfall.core.contracts import layout
from landfall.core.contracts import timeline as core_timeline
from landfall.core.contracts.layout import MANIFEST, PROFILE, REFERENCE
from landfall.core.contracts.messages import MISSHAPEN, dead_letters, misshapen, utc_now
from landfall.core.errors import LandfallError
from landfall.core.quality import checks, quarantine
from landfall.core.quality.profile import Profile
from landfall.core.rules import cost, timestamps
from landfall.core.rules.series_windows import SAYS
from landfall.submit.config import JobConfig
from landfall.views import arrivals, waiting
from landfall.views.reader import Reader

RECENT_JOBS = 8
MAX_REJECTIONS = 200
HISTORY = 20
QUARANTINED = 5  # quarantined arrivals shown per dataset, the newest
DETECTIONS = 20  # the newest detections shown (landfall.core.artifacts.detections), all datasets together
DETECTION_PLOTS = 5  # of which the newest series detections drawn (their scores read from the bucket)
# landfall.core.scoring.QUANTILES, the names threshold.json keeps its quantiles under
QUANTILE_LEVELS = {"p50": 0.5, "p95": 0.95, "p99": 0.99, "p99.9": 0.999}


# -- collecting ------------------------------------------------------------------------------------------------
def collect(r: Reader, pubsub: Any = None, dead_letter_subscriptions: tuple[str, ...] = ()) -> dict[str, Any]:
    datasets: dict[str, dict[str, Any]] = {}

    def ds(name: str) -> dict[str, Any]:
        return datasets.setdefault(name, {"name": name, "arrivals": [], "jobs": [], "champion": None,
                                          "history": [], "threshold": None, "pending": []})

    found = arrivals.rejections(r.storage, r.bucket, r.lay)
    held: dict[str, list[Any]] = {}
    for a in arrivals.listing(r.storage, r.bucket, r.lay, rejected=found):  # classified once, as status and trace
        if a.state is None:
            continue  # an admission or a failing record alone: not an arrival to show
        if a.state == arrivals.QUARANTINED:
            held.setdefault(a.dataset, []).append(a.records[MANIFEST])
        ds(a.dataset)["arrivals"].append({"arrival_id": a.arrival_id, "state": a.state, "at": a.at})
    for name, infos in held.items():
        ds(name)["quarantined"] = _quarantined(r, name, infos)
    rprefix = r.uri(r.lay.rejected_prefix)
    rejected = sorted((i for infos in found.values() for i in infos), key=lambda i: i.generation)[-MAX_REJECTIONS:]
    rejections = []
    for info in rejected:
        name = info.uri[len(rprefix):].split("/", 1)[0]
        doc = r.json(info.uri) or {}
        rejections.append({"dataset": name, "record": info.uri, "stage": doc.get("stage"),
                           "reason": doc.get("reason") or doc.get("invalid"), "detail": doc.get("detail"),
                           "name": (doc.get("source") or {}).get("name"), "at": doc.get("rejected_at")})
    qprefix = r.uri(r.lay.requests_prefix)
    for uri in r.storage.list(qprefix, suffix=".json"):
        name, _, rest = uri[len(qprefix):].partition("/")
        if rest.startswith("pending/"):
            doc = r.json(uri) or {}
            ds(name)["pending"].append({"request_id": doc.get("request_id"), "reason": doc.get("reason"),
                                        "manifest": doc.get("manifest"), "arrived_at": doc.get("arrived_at")})
    for name, entry in datasets.items():
        head = r.ledger.head_seq(name)
        for seq in range(head, max(0, head - RECENT_JOBS), -1):  # the newest jobs, by name
            inputs = r.inputs(r.ledger.job_name(name, seq))
            if inputs is not None:
                entry["jobs"].append(_job(r, inputs))
        _champion(r, name, entry)
        if entry["pending"]:  # the one explanation status gives (landfall.views.waiting)
            try:
                explained = waiting.explain(name, JobConfig.load(bucket=r.bucket), r.backend, r.storage, r.lay)
            except ValueError as exc:  # a malformed LANDFALL_* setting: said, and the page still written
                explained = {"error": str(exc)}
            entry["pending_reason"] = waiting.why(explained)
        entry["arrivals"].sort(key=lambda a: a["at"] or "")
    dead = [_peek(pubsub, sub) for sub in dead_letter_subscriptions] if pubsub is not None else []
    found, plots = _detections(r)
    return {"bucket": r.bucket, "generated_at": utc_now(), "datasets": [datasets[k] for k in sorted(datasets)],
            "rejections": rejections, "rejections_by_reason": _by_reason(rejections), "dead_letters": dead,
            "detections": found, "detection_plots": plots}


def _detections(r: Reader) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The newest ``DETECTIONS`` detections of every dataset, newest first (one listing of ``scores/``; unreadable
    summaries left out), and the located scores of the newest ``DETECTION_PLOTS`` series among them, read from
    their Parquet in the bucket (``scored_series``)."""
    newest = detections.listing(r.storage, r.bucket, r.lay)[::-1][:DETECTIONS]
    rows, plots = [], []
    for s in newest:
        m = s.message
        row = {"dataset": s.dataset, "arrival": s.arrival, "champion": s.run,
               "seq": (m.get("champion") or {}).get("seq"), "kind": m.get("kind"), "count": m.get("count"),
               "anomalies": s.anomalies, "ranges_total": m.get("ranges_total"),
               "ranges": [x for x in m.get("ranges") or [] if isinstance(x, dict)][:3],
               "threshold": m.get("threshold"), "check_status": m.get("check_status"), "scored_at": m.get("scored_at"),
               "scores": m.get("scores"), "summary": s.uri}
        rows.append(row)
        if m.get("kind") == "series" and len(plots) < DETECTION_PLOTS and m.get("scores"):
            try:
                import pyarrow.parquet as pq

                table = pq.read_table(io.BytesIO(r.storage.read_bytes(str(m["scores"]))),
                                      columns=["time", "score"] + (["label"] if s.scoring.get("label") else []))
                plot = scored_series(table, s.scoring | {"threshold": m.get("threshold"),
                                                         "ranges": s.scoring.get("ranges") or m.get("ranges") or []},
                                     name=f"{s.dataset}/{s.arrival}")
            except (LandfallError, ValueError, KeyError, OSError) as exc:  # one bad object does not stop the page
                row["plot_error"] = str(exc)
                continue
            plots.append(plot | {"arrival": s.arrival, "champion": s.run, "scored_at": m.get("scored_at")})
    return rows, plots


def _quarantined(r: Reader, dataset: str, infos: list[Any]) -> list[dict[str, Any]]:
    """The newest quarantined arrivals: each finding with the flagged feature's share of values per bin of the
    reference's deciles, in the reference and in the arrival (``landfall.core.quality.checks.coarse``)."""
    try:
        reference, _ = Profile.from_json(r.storage.read_bytes(r.uri(layout.dataset_prefix(r.lay, dataset) + REFERENCE)))
    except LandfallError:
        reference = None
    out = []
    for info in sorted(infos, key=lambda i: (i.generation, i.uri))[-QUARANTINED:][::-1]:
        entry = quarantine.summary(r.storage, info.uri)
        try:
            arrival, _ = Profile.from_json(r.storage.read_bytes(info.uri.rsplit("/", 1)[0] + "/" + PROFILE))
        except LandfallError:
            arrival = None
        for finding in entry.get("findings", []):
            index = int(finding.get("index", -1)) if str(finding.get("index", "")).lstrip("-").isdigit() else -1
            bins = (checks.coarse(arrival, index, reference, index) if arrival is not None and reference is not None
                    and 0 <= index < min(arrival.features, reference.features) else None)
            if bins is not None:
                edges, got, ref = bins
                finding["bins"] = {"edges": [float(e) for e in edges],
                                   "arrival": (got / got.sum()).round(4).tolist(),
                                   "reference": (ref / ref.sum()).round(4).tolist()}
        out.append(entry)
    return out


def _by_reason(rejections: list[dict[str, Any]]) -> list[dict[str, Any]]:
    counts = Counter((x["stage"], x["reason"]) for x in rejections)
    return [{"stage": s, "reason": k, "count": n} for (s, k), n in counts.most_common()]


def _job(r: Reader, inputs: Any) -> dict[str, Any]:
    state, source = r.job_state(inputs.job)
    uri = r.job_dir(inputs.job) + "/metrics.json"
    m = r.json(uri) or {}
    try:
        if "invalid" in m:
            raise ValueError(m["invalid"])
        return _job_of(inputs, state, source, m)
    except MISSHAPEN as exc:  # the job is shown, its metrics named as unreadable (#46)
        return {**_job_of(inputs, state, source, {}), "unreadable": misshapen(uri, exc)}


def _job_of(inputs: Any, state: str, source: str, m: dict[str, Any]) -> dict[str, Any]:
    epochs = [e for e in (m.get("epochs") or []) if isinstance(e, dict)]
    return {"job": inputs.job, "seq": inputs.seq, "after": inputs.after, "released_at": inputs.released_at,
            "state": state, "state_from": source, "requests": len(inputs.requests), "manifests": len(inputs.manifests),
            "status": m.get("status"), "verdict": m.get("verdict"), "challenger_loss": m.get("challenger_loss"),
            "champion_loss": m.get("champion_loss"), "error": m.get("error"), "workers": m.get("num_workers"),
            **{k: m.get(k) for k in (*results.TRAINING_FIELDS, "gpu_seconds", "labelled", "champion_view",
                                     "outside_epochs_gpu_seconds", core_timeline.FIELD)},
            "curve": [{"epoch": e.get("epoch"), "loss": e.get("loss"), "val_loss": e.get("val_loss")}
                      for e in epochs],
            "time": cost.queue_and_training(inputs.released_at, m.get("started_at"), m.get("ended_at"), time.time())}


def _champion(r: Reader, name: str, entry: dict[str, Any]) -> None:
    current = r.champion(name)
    if current is None:
        return
    entry["champion"] = {"run": current.run, "seq": current.seq, "reason": current.reason, "loss": current.loss,
                         "promoted_by": current.promoted_by, "promoted_at": current.promoted_at,
                         "model": current.model}
    root = champion.bucket_root(r.bucket)
    for seq in range(current.seq, max(0, current.seq - HISTORY), -1):
        try:
            past = champion.read_history(r.storage, root, name, seq)
        except (LandfallError, ValueError):
            continue
        entry["history"].append({"seq": past.seq, "run": past.run, "reason": past.reason, "loss": past.loss,
                                 "promoted_at": past.promoted_at, "promoted_by": past.promoted_by})
    threshold = r.json(current.model.rstrip("/") + "/" + champion.THRESHOLD)
    if threshold and "value" in threshold:
        entry["threshold"] = {"value": threshold.get("value"), "quantile": threshold.get("quantile"),
                              "quantiles": threshold.get("quantiles") or {}, "instances": threshold.get("instances")}


def _peek(pubsub: Any, subscription: str) -> dict[str, Any]:
    try:
        found = dead_letters(pubsub, subscription)
    except LandfallError as exc:
        return {"subscription": subscription, "error": str(exc), "messages": []}
    return {"subscription": subscription, "messages": [
        {"message_id": d["message_id"], "dataset": d["dataset"],
         "what": d["request_id"] or d["arrival"] or d["unreadable"] or "(unreadable)", "attempts": d["attempts"]}
        for d in found]}


def read_scored(path: Any, points: int = 1200) -> dict[str, Any]:
    """A scored series (``landfall score``'s Parquet of a series file and its summary beside it,
    ``landfall.cli.score_series``) for drawing (``scored_series``)."""
    from pathlib import Path

    import pyarrow.parquet as pq

    path = Path(path)
    summary = json.loads(path.with_name(path.name.removesuffix(".parquet") + ".json").read_text())
    columns = ["time", "score"] + (["label"] if summary.get("label") else [])
    return scored_series(pq.read_table(path, columns=columns), summary, points, summary.get("src") or path.name)


def scored_series(table: Any, summary: dict[str, Any], points: int = 1200, name: str | None = None) -> dict[str, Any]:
    """A scored series' Parquet table (``time``, ``score``[, ``label``]) and its summary (``landfall score``'s, or
    the scoring of a detection, ``landfall.core.artifacts.detections``) for drawing: at most ``points`` points, each
    the largest
    score of its share of the rows (so no peak is lost), the threshold, the anomalous ranges and the labelled ranges
    (runs of label 1)."""
    import numpy as np

    times = table.column("time").to_numpy()
    if len(times) > 1 and (np.diff(times) < 0).any():  # the file's rows in its order (an unsorted export): by time
        table = table.take(np.argsort(times, kind="stable"))
        times = table.column("time").to_numpy()
    scores = table.column("score").to_numpy(zero_copy_only=False)
    labelled = []
    if "label" in table.column_names:
        flags = table.column("label").to_numpy().astype(bool)
        edges = np.flatnonzero(np.diff(np.concatenate([[False], flags, [False]]).astype(np.int8)))
        labelled = [{"start": float(times[a]), "end": float(times[b - 1])} for a, b in
                    zip(edges[0::2].tolist(), edges[1::2].tolist(), strict=True)]
    step = max(1, -(-len(times) // points))
    if step > 1:
        pad = -len(times) % step
        t = np.concatenate([times, np.full(pad, times[-1])]).reshape(-1, step)[:, 0]
        blocks = np.concatenate([scores, np.full(pad, np.nan)]).reshape(-1, step)
        seen = ~np.isnan(blocks).all(axis=1)
        s = np.full(len(blocks), np.nan)
        s[seen] = np.nanmax(blocks[seen], axis=1)
        times, scores = t, s
    return {"name": name or summary.get("src"), "dataset": summary.get("dataset"), "model": summary.get("model"),
            "threshold": summary["threshold"], "time": summary.get("time"), "combine": summary.get("combine"),
            "rows": summary.get("rows"), "times": times.tolist(), "scores": [None if np.isnan(v) else float(v)
                                                                            for v in scores],
            "ranges": summary.get("ranges") or [], "labelled_ranges": labelled, "labelled": summary.get("labelled")}


# -- rendering ---------------------------------------------------------------------------------------------------
def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _num(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) else _e(value if value is not None else "-")


def _legend(entries: list[tuple[str, str, str]], x: float, y: float) -> str:
    """A legend: per series (its key, as its marks' ``data-series`` or class, its colour, its name) a swatch and the
    name, in a row from (x, y)."""
    parts = ['<g class="legend">']
    for key, colour, name in entries:
        parts.append(f'<rect x="{x:.1f}" y="{y - 7:.1f}" width="10" height="8" fill="{colour}"/>'
                     f'<text x="{x + 13:.1f}" y="{y:.1f}" class="tick" data-for="{_e(key)}">{_e(name)}</text>')
        x += 13 + 5.6 * len(name) + 12
    parts.append("</g>")
    return "".join(parts)


def _axis_label(axis: str, text: str, x: float, y: float, anchor: str = "middle", rotate: bool = False) -> str:
    """An axis's name: ``axis`` x or y; a y label is drawn upwards along the axis when ``rotate``."""
    turn = f' transform="rotate(-90 {x:.1f} {y:.1f})"' if rotate else ""
    return (f'<text class="axis-label tick" data-axis="{axis}" x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"'
            f"{turn}>{_e(text)}</text>")


def loss_svg(curve: list[dict[str, Any]], width: int = 320, height: int = 140) -> str:
    """Train and validation loss per epoch as inline SVG (a polyline and a dot per epoch and series), its axes named
    and a legend below."""
    series = {k: [(e["epoch"], e[k]) for e in curve if isinstance(e.get(k), (int, float))
                  and isinstance(e.get("epoch"), (int, float))] for k in ("loss", "val_loss")}
    points = [p for s in series.values() for p in s]
    if not points:
        return '<p class="muted">no epoch finished yet</p>'
    x0, x1 = min(p[0] for p in points), max(p[0] for p in points)
    y0, y1 = min(p[1] for p in points), max(p[1] for p in points)
    x1, y1 = (x1 if x1 > x0 else x0 + 1), (y1 if y1 > y0 else y0 + abs(y0) * 0.1 + 1e-9)
    pad = 28

    def xy(p: tuple[float, float]) -> tuple[float, float]:
        return (pad + (p[0] - x0) / (x1 - x0) * (width - 2 * pad),
                height - pad - (p[1] - y0) / (y1 - y0) * (height - 2 * pad))

    parts = [f'<svg class="curve" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 16}" '
             f'viewBox="0 0 {width} {height + 16}" role="img" aria-label="loss per epoch">',
             f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" class="axis"/>',
             f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" class="axis"/>',
             f'<text x="{pad}" y="{pad - 8}" class="tick">{y1:.3g}</text>',
             f'<text x="{pad}" y="{height - 8}" class="tick">{y0:.3g} (epoch {x0:g}-{x1:g})</text>',
             _axis_label("x", "epoch", width - pad, height - 8, "end"),
             _axis_label("y", "loss (MSE)", 10, height / 2, rotate=True),
             _legend([(k, c, n) for k, c, n in (("loss", "#1f77b4", "train loss"),
                                                ("val_loss", "#ff7f0e", "validation loss")) if series[k]],
                     pad, height + 10)]
    for key, s in series.items():
        if not s:
            continue
        coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in map(xy, s))
        parts.append(f'<polyline class="{key}" data-series="{key}" points="{coords}"/>')
        parts += [f'<circle class="{key}" cx="{x:.1f}" cy="{y:.1f}" r="2.5"/>' for x, y in map(xy, s)]
    parts.append("</svg>")
    return "".join(parts)


STATE_COLOURS = {"converted": "#2ca02c", "retracted": "#999", "converting": "#1f77b4", "rejected": "#d62728",
                 "quarantined": "#ff7f0e"}  # as the CSS colours the arrivals' dots
WORKER_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf")


def timeline_svg(timeline: dict[str, Any], width: int = 330) -> str:
    """A job's timeline (``landfall.core.contracts.timeline``) as inline SVG: one row per phase (the verdict's passes
    indented,
    all epochs in one row), a bar per phase and worker at its start and as long as it took, on an axis of seconds
    from the job's start; a legend names each worker's colour."""
    summary = [r for r in timeline.get("summary") or [] if isinstance(r, dict)]
    workers = [w for w in timeline.get("workers") or [] if isinstance(w, dict)]
    if not summary or not workers:
        return '<p class="muted">no timeline recorded</p>'
    bars = []  # (row, worker, start, seconds, title)
    rows = {(r.get("phase"), r.get("within")): i for i, r in enumerate(summary)}
    for w in workers:
        n = int(w.get("worker") or 0)
        for p in w.get("phases") or []:
            epoch = p.get("phase") == core_timeline.EPOCH
            key = (core_timeline.EPOCHS, None) if epoch else (p.get("phase"), p.get("within"))
            if key in rows and isinstance(p.get("start_s"), int | float) and isinstance(p.get("seconds"), int | float):
                name = f"epoch {p.get('epoch')}" if epoch else str(p.get("phase"))
                bars.append((rows[key], n, float(p["start_s"]), float(p["seconds"]),
                             f"{name}, worker {n}: from {p['start_s']:.2f} s for {p['seconds']:.2f} s"))
    end = max([s + d for _, _, s, d, _ in bars] + [1e-9])
    lanes = max(len(workers), 1)
    lane, label, pad, top = 5, 112, 8, 18
    band = lane * lanes + 4
    height = top + band * len(summary) + 30

    def x(t: float) -> float:
        return label + t / end * (width - label - pad)

    parts = [f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="seconds per phase and worker">']
    parts.append(_legend([(f"worker-{i}", WORKER_COLOURS[i % 8], f"worker {i}") for i in range(lanes)], label, 12))
    parts.append(_axis_label("y", "phase", 2, 12, "start"))
    for i, r in enumerate(summary):
        y = top + i * band
        name = core_timeline.SHORT.get(str(r.get("phase")), str(r.get("phase")))
        name = ("  " + name if r.get("within") else name) + (f" ({r['count']})" if r.get("phase") ==
                                                              core_timeline.EPOCHS else "")
        parts.append(f'<text x="2" y="{y + band - 4}" class="tick" xml:space="preserve" '
                     f'data-phase="{_e(r.get("phase"))}">{_e(name[:22])}</text>')
    for row, n, start, seconds, title in bars:
        y = top + row * band + 2 + (n % lanes) * lane
        wide = max(x(start + seconds) - x(start), 1)
        parts.append(f'<rect class="phase" x="{x(start):.1f}" y="{y}" width="{wide:.1f}" '
                     f'height="{lane - 1}" fill="{WORKER_COLOURS[n % 8]}" data-worker="{n}" data-series="worker-{n}">'
                     f'<title>{_e(title)}</title>'
                     "</rect>")
    base = top + band * len(summary)
    parts += [f'<line x1="{label}" y1="{base}" x2="{width - pad}" y2="{base}" class="axis"/>',
              f'<line x1="{label}" y1="{top}" x2="{label}" y2="{base}" class="axis"/>',
              f'<text x="{label}" y="{base + 12}" class="tick">0</text>',
              f'<text x="{width - pad}" y="{base + 12}" class="tick" text-anchor="end">{end:.1f}</text>',
              _axis_label("x", "seconds from the job's start", label, base + 25, "start"),
              "</svg>"]
    return "".join(parts)


def _timeline_html(j: dict[str, Any]) -> str:
    """Where the job's time went: one line and the bars per phase (``landfall.core.contracts.timeline``)."""
    found = j.get(core_timeline.FIELD)
    if not isinstance(found, dict):
        return ""
    return (f'<br><span class="timeline">{_e(core_timeline.line(j))}</span>' + timeline_svg(found))


def histogram_svg(threshold: dict[str, Any], width: int = 320, height: int = 140) -> str:
    """The champion's held-out errors as a density histogram between neighbouring quantiles, and the threshold."""
    levels = sorted((QUANTILE_LEVELS[k], float(v)) for k, v in (threshold.get("quantiles") or {}).items()
                    if k in QUANTILE_LEVELS and isinstance(v, (int, float)))
    levels = [(0.0, 0.0), *levels] if levels else []  # a squared error is never below 0: the first bar's floor
    bars = [(a, b, (q2 - q1) / (b - a)) for (q1, a), (q2, b) in itertools.pairwise(levels) if b > a]
    if not bars:
        return '<p class="muted">no error quantiles recorded</p>'
    lo, hi = bars[0][0], max(bars[-1][1], float(threshold.get("value") or 0))
    top = max(d for _, _, d in bars)
    pad = 20

    def x(v: float) -> float:
        return pad + (v - lo) / ((hi - lo) or 1) * (width - 2 * pad)

    parts = [f'<svg class="histogram" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 30}" '
             f'viewBox="0 0 {width} {height + 30}" role="img" aria-label="held-out error histogram">',
             _axis_label("x", "held-out reconstruction error (MSE)", width / 2, height + 10),
             _axis_label("y", "density", 9, height / 2, rotate=True),
             _legend([("bar", "#9ecae1", "held-out errors (between quantiles)"), ("threshold", "#d62728",
                                                                                  "threshold")], pad, height + 25)]
    for a, b, d in bars:
        h = d / top * (height - 2 * pad)
        parts.append(f'<rect x="{x(a):.1f}" y="{height - pad - h:.1f}" width="{max(x(b) - x(a), 0.5):.1f}" '
                     f'height="{h:.1f}" class="bar"/>')
    t = float(threshold.get("value") or 0)
    parts.append(f'<line x1="{x(t):.1f}" y1="{pad / 2}" x2="{x(t):.1f}" y2="{height - pad}" class="threshold"/>')
    parts.append(f'<text x="{min(x(t) + 3, width - 90):.1f}" y="{pad}" class="tick">threshold {t:.3g}</text>')
    parts.append(f'<text x="{pad}" y="{height - 4}" class="tick">{lo:.3g}</text>'
                 f'<text x="{width - pad}" y="{height - 4}" class="tick" text-anchor="end">{hi:.3g}</text></svg>')
    return "".join(parts)


def shift_svg(bins: dict[str, Any], width: int = 320, height: int = 110) -> str:
    """Before/after: a feature's share of values per bin of the reference's deciles, the reference's (grey) beside
    the arrival's; the first and last bins hold what lies below and above all the reference has seen."""
    ref, got, edges = bins["reference"], bins["arrival"], bins["edges"]
    top = max(max(ref), max(got)) or 1.0
    pad, n = 16, len(ref)
    slot = (width - 2 * pad) / n
    parts = [f'<svg class="shift" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 14}" '
             f'viewBox="0 0 {width} {height + 14}" role="img" aria-label="before/after histogram">',
             _axis_label("x", "feature value, in the bins of the reference's deciles", width / 2, height + 11),
             _axis_label("y", "share of values", 9, height / 2, rotate=True),
             _legend([("before", "#bbb", "reference"), ("after", "#ff7f0e", "arrival")], pad + 4, pad - 4)]
    for i, (a, b) in enumerate(zip(ref, got, strict=True)):
        for j, (share, cls) in enumerate(((a, "before"), (b, "after"))):
            h = share / top * (height - 2 * pad)
            parts.append(f'<rect x="{pad + i * slot + j * slot / 2:.1f}" y="{height - pad - h:.1f}" '
                         f'width="{max(slot / 2 - 1, 0.5):.1f}" height="{h:.1f}" class="{cls}">'
                         f'<title>{"reference" if j == 0 else "arrival"}: {share:.1%}</title></rect>')
    parts.append(f'<text x="{pad}" y="{height - 3}" class="tick">below {edges[0]:.3g}</text>'
                 f'<text x="{width - pad - 90}" y="{height - 3}" class="tick">above {edges[-1]:.3g}</text></svg>')
    return "".join(parts)


def arrivals_svg(arrivals: list[dict[str, Any]], width: int = 660, height: int = 60) -> str:
    """Each arrival as a dot on a time axis, coloured by what became of it."""
    times = [(timestamps.parse(a["at"]), a) for a in arrivals if a.get("at")]
    if not times:
        return '<p class="muted">no arrival times recorded</p>'
    t0, t1 = min(t for t, _ in times), max(t for t, _ in times)
    span = (t1 - t0).total_seconds() or 1.0
    pad = 12
    states = sorted({a["state"] for _, a in times})
    parts = [f'<svg class="arrivals" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="arrivals over time" data-axes="x">',
             f'<line x1="{pad}" y1="{height / 2}" x2="{width - pad}" y2="{height / 2}" class="axis"/>',
             _legend([(st, STATE_COLOURS.get(st, "#555"), st) for st in states], pad, 12),
             _axis_label("x", "arrival time", width / 2, height - 4)]
    for t, a in times:
        cx = pad + (t - t0).total_seconds() / span * (width - 2 * pad)
        parts.append(f'<circle class="{_e(a["state"])}" cx="{cx:.1f}" cy="{height / 2}" r="5">'
                     f'<title>{_e(a["arrival_id"])}: {_e(a["state"])} at {_e(a["at"])}</title></circle>')
    parts.append(f'<text x="{pad}" y="{height - 4}" class="tick">{_e(times[0][1]["at"])}</text>'
                 f'<text x="{width - pad - 130}" y="{height - 4}" class="tick">{_e(times[-1][1]["at"])}</text></svg>')
    return "".join(parts)


def scored_svg(s: dict[str, Any], width: int = 1000, height: int = 200) -> str:
    """A scored series (``read_scored``): its score over time, the threshold, the anomalous ranges shaded and the
    labelled ranges, if any, as a band under the axis."""
    pts = [(t, v) for t, v in zip(s["times"], s["scores"], strict=True) if v is not None]
    if not pts:
        return '<p class="muted">no row was scored</p>'
    t0, t1 = s["times"][0], s["times"][-1]
    t1 = t1 if t1 > t0 else t0 + 1
    top = max(max(v for _, v in pts), s["threshold"]) or 1.0
    pad = 24

    def x(t: float) -> float:
        return pad + (t - t0) / (t1 - t0) * (width - 2 * pad)

    def y(v: float) -> float:
        return height - pad - v / top * (height - 2 * pad)

    parts = [f'<svg class="scored" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 30}" '
             f'viewBox="0 0 {width} {height + 30}" role="img" aria-label="score over time with anomalous ranges">',
             _axis_label("x", "time" + (" (UTC)" if s.get("time") == "timestamp" else ""), width / 2, height + 8),
             _axis_label("y", "score (reconstruction MSE)", 9, height / 2, rotate=True),
             _legend([("score", "#1f77b4", f"score per row ({SAYS.get(s.get('combine') or 'mean', s.get('combine'))})"),
                      ("threshold", "#d62728", "threshold"), ("range", "#f1a9a9", "anomalous ranges")]
                     + ([("labelled", "#ff7f0e", "labelled anomalous")] if s["labelled_ranges"] else []),
                     pad, height + 26)]
    for r in s["ranges"]:
        wide = max(x(r["end"]) - x(r["start"]), 1.5)
        parts.append(f'<rect class="range" x="{x(r["start"]):.1f}" y="{pad / 2}" width="{wide:.1f}" '
                     f'height="{height - 1.5 * pad:.1f}"><title>{_e(r.get("start_at", r["start"]))} .. '
                     f'{_e(r.get("end_at", r["end"]))}: peak {r["peak_score"]:.4g} at '
                     f'{_e(r.get("peak_at", r["peak"]))}</title></rect>')
    for r in s["labelled_ranges"]:
        parts.append(f'<rect class="labelled" x="{x(r["start"]):.1f}" y="{height - pad + 4}" '
                     f'width="{max(x(r["end"]) - x(r["start"]), 1.5):.1f}" height="6"/>')
    runs: list[list[str]] = [[]]
    for t, v in zip(s["times"], s["scores"], strict=True):
        if v is None:
            runs.append([])
        else:
            runs[-1].append(f"{x(t):.1f},{y(v):.1f}")
    parts += [f'<polyline class="score" points="{" ".join(r)}"/>' for r in runs if r]
    parts.append(f'<line class="threshold" x1="{pad}" y1="{y(s["threshold"]):.1f}" x2="{width - pad}" '
                 f'y2="{y(s["threshold"]):.1f}"/>')
    parts.append(f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" class="axis"/>'
                 f'<text x="{pad}" y="{pad - 14 if pad > 14 else 10}" class="tick">{top:.3g}</text>'
                 f'<text x="{pad}" y="{height + 8}" class="tick">{_e(_when(t0, s))}</text>'
                 f'<text x="{width - pad - 150}" y="{height + 8}" class="tick">{_e(_when(t1, s))}</text></svg>')
    return "".join(parts)


def _when(t: float, s: dict[str, Any]) -> str:
    if s.get("time") == "timestamp":
        return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return f"{t:g}"


def _detections_html(rows: list[dict[str, Any]], plots: list[dict[str, Any]]) -> str:
    """The newest detections (``landfall.core.artifacts.detections``), newest first, and the located scores of the
    newest
    series among them."""
    out = ['<section id="detections"><h2>Detections</h2>']
    if not rows:
        out.append('<p class="muted">no arrival scored yet (an arrival is scored when its dataset has a '
                   "champion)</p></section>")
        return "".join(out)
    out.append(f"<p>The newest {len(rows)} arrivals scored by their dataset's champion, newest first.</p>"
               "<table><tr><th>dataset</th><th>arrival</th><th>champion</th><th>anomalies / count</th>"
               "<th>ranges</th><th>scored</th></tr>")
    for d in rows:
        ranges = "; ".join(_range_html(x, d.get("kind")) for x in d["ranges"])
        more = (d.get("ranges_total") or 0) - len(d["ranges"])
        out.append(f'<tr class="detection" data-arrival="{_e(d["arrival"])}"><td>{_e(d["dataset"])}</td>'
                   f'<td>{_e(d["arrival"])}' + (f" ({_e(d['check_status'])})" if d.get("check_status") else "")
                   + f'</td><td>{_e(d["champion"])} (#{_e(d.get("seq"))})</td>'
                   f'<td>{_e(d["anomalies"])} / {_e(d["count"])} {"rows" if d.get("kind") == "series" else "instances"}'
                   f'</td><td>{_e(d.get("ranges_total"))}' + (f": {ranges}" if ranges else "")
                   + (f" (+{more} more)" if more > 0 else "") + f"</td><td>{_t(d.get('scored_at'))}</td></tr>")
    out.append("</table>")
    for s in plots:
        out.append(_scored_html(s))
    out.append("</section>")
    return "".join(out)


def _range_html(x: dict[str, Any], kind: Any) -> str:
    if kind != "series":
        return f"instances {_e(x.get('start'))}-{_e(x.get('end'))}"
    return (f"{_e(x.get('start_at', x.get('start')))} .. {_e(x.get('end_at', x.get('end')))} (peak "
            f"{_num(x.get('peak_score'))})")


def _scored_html(s: dict[str, Any]) -> str:
    m = s.get("labelled") or {}
    where = f' data-arrival="{_e(s["arrival"])}"' if s.get("arrival") else ""
    out = [f'<section class="scored-series"{where}><h3>{_e(s["name"])}</h3><p>{_e(s["rows"])} rows of dataset '
           f'{_e(s["dataset"])} scored with {_e(s["model"])}: {len(s["ranges"])} anomalous ranges above '
           f'{_num(s["threshold"])} ({_e(s["combine"])} of the windows over each moment)']
    if m:
        out.append(f"; point-wise precision {_num(m['point']['precision'])}, recall {_num(m['point']['recall'])}, "
                   f"range-based precision {_num(m['range']['precision'])}, recall {_num(m['range']['recall'])}")
    out.append("</p>" + scored_svg(s))
    strongest = sorted(s["ranges"], key=lambda r: -r["peak_score"])[:20]
    if strongest:
        out.append("<table><tr><th>start</th><th>end</th><th>rows</th><th>peak</th><th>peak score</th></tr>"
                   + "".join(f"<tr><td>{_e(r.get('start_at', r['start']))}</td><td>{_e(r.get('end_at', r['end']))}"
                             f"</td><td>{r['rows']}</td><td>{_e(r.get('peak_at', r['peak']))}</td>"
                             f"<td>{_num(r['peak_score'])}</td></tr>"
                             for r in sorted(strongest, key=lambda r: r["start"])) + "</table>")
    out.append("</section>")
    return "".join(out)


CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}
h3{font-size:15px;margin:16px 0 4px}table{border-collapse:collapse;margin:6px 0}
.candidates caption{text-align:left;color:#555}.candidates tr.chosen td{font-weight:600;background:#eef6ee}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}th{background:#f4f4f4}
.muted{color:#888}.jobs{display:flex;flex-wrap:wrap;gap:12px}.job{border:1px solid #ddd;padding:8px;width:340px}
svg .axis{stroke:#999}svg .tick{font-size:10px;fill:#555}svg polyline{fill:none;stroke-width:2}
svg polyline.loss{stroke:#1f77b4}svg polyline.val_loss{stroke:#ff7f0e;stroke-dasharray:4 3}
svg circle.loss{fill:#1f77b4}svg circle.val_loss{fill:#ff7f0e}svg .bar{fill:#9ecae1}
svg .threshold{stroke:#d62728;stroke-width:2}svg circle.converted{fill:#2ca02c}svg circle.retracted{fill:#999}
svg circle.converting{fill:#1f77b4}svg circle.rejected{fill:#d62728}svg circle.quarantined{fill:#ff7f0e}
svg .before{fill:#bbb}svg .after{fill:#ff7f0e}.quarantined .arrival{border:1px solid #ddd;padding:8px;margin:6px 0}
svg .range{fill:#d62728;opacity:.25}svg .labelled{fill:#ff7f0e}svg polyline.score{stroke:#1f77b4;stroke-width:1}
svg .axis-label{fill:#333}.state-Succeeded{color:#2ca02c}.state-Failed{color:#d62728}.state-Running{color:#1f77b4}
"""

# Shows the times in the reader's time zone; the page reads the same without it.
SCRIPT = """
document.querySelectorAll("time[datetime]").forEach(function (el) {
  var d = new Date(el.getAttribute("datetime"));
  if (!isNaN(d.getTime())) { el.title = el.textContent; el.textContent = d.toLocaleString(); }
});
"""


def _t(value: Any) -> str:
    return f'<time datetime="{_e(value)}">{_e(value)}</time>' if value else "-"


def _dataset_html(d: dict[str, Any]) -> str:
    counts = Counter(a["state"] for a in d["arrivals"])
    out = [f'<section class="dataset" id="dataset-{_e(d["name"])}" data-dataset="{_e(d["name"])}">',
           f'<h2>Dataset {_e(d["name"])}</h2>',
           f"<p>{len(d['arrivals'])} arrivals: " + ", ".join(f"{n} {_e(k)}" for k, n in sorted(counts.items()))
           + "</p>", arrivals_svg(d["arrivals"])]
    if d.get("quarantined"):
        out.append("<h3>Quarantined arrivals</h3><p>Not trained on until admitted (<code>landfall admit ARRIVAL "
                   f"--dataset {_e(d['name'])}</code>) or rejected (<code>landfall reject</code>).</p>"
                   '<div class="quarantined">')
        for q in d["quarantined"]:
            out.append(f'<div class="arrival" data-arrival="{_e(q.get("arrival_id"))}"><b>{_e(q.get("name"))}</b> '
                       f'#{_e(q.get("generation"))} ({_e(q.get("arrival_id"))}), {_t(q.get("created_at"))}'
                       + (f"<br>{_e(q['error'])}" if q.get("error") else ""))
            for f in q.get("findings", []):
                out.append(f"<br>{_e(f['check'])} on <b>{_e(f['feature'])}</b>: {_num(f['measured'])} against "
                           f"threshold {_num(f['threshold'])} ({_e(f['action'])})"
                           + (shift_svg(f["bins"]) if f.get("bins") else ""))
            out.append("</div>")
        out.append("</div>")
    c = d["champion"]
    out.append("<h3>Champion</h3>")
    if c:
        out.append(f'<p class="champion">{_e(c["run"])} (#{_e(c["seq"])}, {_e(c["reason"])} by {_e(c["promoted_by"])}'
                   f' at {_t(c["promoted_at"])}), loss {_num(c["loss"])}</p>')
        out.append("<table><tr><th>#</th><th>run</th><th>reason</th><th>loss</th><th>promoted</th></tr>"
                   + "".join(f"<tr><td>{_e(h['seq'])}</td><td>{_e(h['run'])}</td><td>{_e(h['reason'])}</td>"
                             f"<td>{_num(h['loss'])}</td><td>{_t(h['promoted_at'])}</td></tr>" for h in d["history"])
                   + "</table>")
    else:
        out.append('<p class="muted">no champion yet</p>')
    th = d["threshold"]
    if th:
        out.append(f"<h3>Anomaly threshold</h3><p>{_num(th['value'])} (quantile {_e(th['quantile'])} of "
                   f"{_e(th['instances'])} held-out errors)</p>" + histogram_svg(th))
    out.append("<h3>Recent jobs</h3>")
    if not d["jobs"]:
        out.append('<p class="muted">no job released yet</p>')
    out.append('<div class="jobs">')
    for j in d["jobs"]:
        try:
            out.append(_job_html(j))
        except MISSHAPEN as exc:  # a field of the wrong type met while drawing it: the job, and why not more
            out.append(_job_html({**j, **{k: None for k in j if k not in ("job", "seq", "state")},
                                  "curve": [], "manifests": j.get("manifests"), "requests": j.get("requests"),
                                  "unreadable": misshapen(f"the metrics of {j['job']}", exc)}))
    out.append("</div>")
    if d["pending"]:
        out.append(f"<h3>Pending requests</h3><p>{_e(d.get('pending_reason'))}</p><table><tr><th>request</th>"
                   "<th>reason</th><th>arrived</th><th>manifest</th></tr>"
                   + "".join(f"<tr><td>{_e(p['request_id'])}</td><td>{_e(p['reason'])}</td><td>{_t(p['arrived_at'])}"
                             f"</td><td>{_e(p['manifest'])}</td></tr>" for p in d["pending"]) + "</table>")
    out.append("</section>")
    return "".join(out)


def _job_html(j: dict[str, Any]) -> str:
    if j.get("unreadable"):
        verdict = f"metrics {_e(j['unreadable'])}"
    else:
        verdict = (f"verdict {_e(j['verdict'])} (loss {_num(j['challenger_loss'])} vs champion "
                   f"{_num(j['champion_loss'])})" if j["verdict"] else "no verdict") + skill_html(j)
    return (f'<div class="job" data-job="{_e(j["job"])}"><b>{_e(j["job"])}</b> #{_e(j["seq"])} '
            f'<span class="state-{_e(j["state"])}">{_e(j["state"])}</span><br>'
            f"released {_t(j['released_at'])}, {j['manifests']} manifests, {j['requests']} requests"
            + times_html(j.get("time") or {})
            + (f", after {_e(j['after'])}" if j["after"] else "") + f"<br>{verdict}"
            + (f"<br>error: {_e(j['error'])}" if j["error"] else "") + loss_svg(j["curve"])
            + _timeline_html(j) + "</div>")


def times_html(t: dict[str, Any]) -> str:
    """Queued apart from training (``landfall.core.rules.cost.queue_and_training``): only training holds GPUs."""
    if t.get("queued_s") is None:
        return ""
    if t.get("waiting"):
        return f'<br><span class="queued">queued {t["queued_s"]:.0f} s so far: waiting for capacity</span>'
    return f'<br><span class="queued">queued {t["queued_s"]:.0f} s, then training {t["training_s"]:.0f} s</span>'


def skill_html(j: dict[str, Any]) -> str:
    """The job's skill over the naive baseline and how its epochs ended (trainer.judging.floor,
    trainer.training.stopping)."""
    out = ""
    if j.get("skill") is not None:
        cls = "no-skill" if j.get("verdict") == "no_skill" else "skill"
        out += (f'<br><span class="{cls}">skill {_num(j["skill"])} over the baseline (loss {_num(j["baseline_loss"])}'
                f', min_skill {_num(j["min_skill"])})' + (": not promoted, the model learned too little"
                                                          if j.get("verdict") == "no_skill" else "") + "</span>")
    table = candidates_html(j)
    if table:  # every candidate in a table (trainer.judging.selection): the champion may be a baseline
        out += table
    else:  # a job judged by loss alone (select loss), or from before detection was the basis
        line = results.baselines_line(j)
        if line:  # the detectors to beat (trainer.judging.baselines); a model a baseline beats is named so
            cls = "no-skill" if j.get("beaten_by") else "skill"
            out += f'<br><span class="{cls}">{_e(line)}</span>'
    labelled = j.get("labelled") if isinstance(j.get("labelled"), dict) else {}
    mine = labelled.get("challenger") if isinstance(labelled.get("challenger"), dict) else None
    if mine:
        theirs = labelled.get("champion") if isinstance(labelled.get("champion"), dict) else None
        out += (f"<br>labelled check: average precision {_num(mine.get('average_precision'))}, VUS-PR "
                f"{_num(mine.get('vus_pr'))}, precision "
                f"{_num(mine.get('precision'))} and recall {_num(mine.get('recall'))} at the threshold (champion: "
                + (f"{_num(theirs.get('average_precision'))}" if theirs else "unknown") + ")")
        others = labelled.get("baselines") if isinstance(labelled.get("baselines"), dict) else {}
        if others:
            out += "; baselines: " + ", ".join(
                f"{_e(n)} AP {_num(v.get('average_precision'))} VUS-PR {_num(v.get('vus_pr'))}"
                for n, v in others.items() if isinstance(v, dict))
    if isinstance(j.get("champion_view"), dict):  # what the champion flagged in the new arrivals
        out += f"<br>{_e(results.champion_view_line(j['champion_view']))}"
        rows = [a for a in (j["champion_view"].get("arrivals") or [])[:10] if isinstance(a, dict)]
        if rows:
            out += "<br>" + ", ".join(f"{_e(a.get('arrival') or a.get('manifest'))}: {_e(a.get('flagged'))} of "
                                      f"{_e(a.get('instances'))} flagged" for a in rows)
    if j.get("epochs_run") is not None:
        out += f"<br>epochs {_e(j['epochs_run'])} of {_e(j['epochs_ceiling'])}"
        if j.get("stopped_early"):
            out += f", stopped early (best epoch {_e(j['best_epoch'])})"
            if j.get("ceiling_gpu_seconds") is not None and j.get("gpu_seconds") is not None:
                out += f"; {_num(j['gpu_seconds'])} GPU-s of the ceiling's {_num(j['ceiling_gpu_seconds'])}"
    return out


def candidates_html(j: dict[str, Any]) -> str:
    """The job's candidates as a compact table (``results.candidates``; a job's box is narrow): the chosen one marked,
    each candidate (what it is in words on hover), its unit (``row``: each row its own score; ``mean``: a row the mean
    of the windows over it; ``dataset``: the dataset's), the score the choice rested on, and the labelled average
    precision where the job had labels; under it, the candidates passed over and why (or, when none may be promoted,
    the reason). "" for a job without detection figures."""
    rows = results.candidates(j)
    if not rows:
        return ""
    found = j["detection"]
    labelled = any(r["labelled"] is not None for r in rows)
    head = ("<tr><th></th><th>candidate</th><th>unit</th><th>score</th>"
            + ("<th>labelled AP</th>" if labelled else "") + "</tr>")
    body = "".join(
        f'<tr class="{"chosen" if r["chosen"] else ""}"><td>{"&#9733;" if r["chosen"] else ""}</td>'
        f'<td title="{_e(r["kind"])}">{_e(r["name"])}</td><td title="{_e(r["unit_says"])}">{_e(r["unit"])}</td>'
        f"<td>{_num(r['score'])}</td>" + (f"<td>{_num(r['labelled'])}</td>" if labelled else "") + "</tr>"
        for r in rows)
    beaten = [b for b in (j.get("beaten_by") or []) if isinstance(b, str)]
    caveat = (f'<br><span class="no-skill">reconstructs the held-out windows better than the model: '
              f"{_e(', '.join(beaten))}</span>" if beaten else "")
    passed = found.get("passed_over") if isinstance(found.get("passed_over"), dict) else {}
    why = ("passed over: " + "; ".join(f"{n} ({w})" for n, w in passed.items()) if passed  # the table has the rest
           else "" if found.get("chosen") else str(found.get("why") or ""))
    return (f'<table class="candidates"><caption>candidates by {_e(found.get("basis"))}</caption>{head}{body}'
            f"</table>" + (f'<span class="skill">{_e(why)}</span>' if why else "") + caveat)


def render(data: dict[str, Any]) -> str:
    body = [f"<h1>Landfall: gs://{_e(data['bucket'])}</h1><p>generated {_t(data['generated_at'])}; "
            f"{len(data['datasets'])} datasets: "
            + ", ".join(f'<a href="#dataset-{_e(d["name"])}">{_e(d["name"])}</a>' for d in data["datasets"]) + "</p>"]
    body += [_dataset_html(d) for d in data["datasets"]]
    body.append(_detections_html(data.get("detections") or [], data.get("detection_plots") or []))
    if data.get("scored"):
        body.append('<section id="scored"><h2>Scored series</h2>' + "".join(map(_scored_html, data["scored"]))
                    + "</section>")
    body.append('<section id="rejections"><h2>Rejections by reason</h2>')
    if data["rejections_by_reason"]:
        body.append("<table><tr><th>stage</th><th>reason</th><th>count</th></tr>"
                    + "".join(f"<tr><td>{_e(x['stage'])}</td><td>{_e(x['reason'])}</td><td>{x['count']}</td></tr>"
                              for x in data["rejections_by_reason"]) + "</table>")
        body.append("<table><tr><th>dataset</th><th>input</th><th>reason</th><th>detail</th><th>when</th></tr>"
                    + "".join(f"<tr><td>{_e(x['dataset'])}</td><td>{_e(x['name'] or x['record'])}</td>"
                              f"<td>{_e(x['reason'])}</td><td>{_e(x['detail'])}</td><td>{_t(x['at'])}</td></tr>"
                              for x in reversed(data["rejections"][-50:])) + "</table>")
    else:
        body.append('<p class="muted">none</p>')
    body.append('</section><section id="dead-letters"><h2>Dead letters</h2>')
    if not data["dead_letters"]:
        body.append('<p class="muted">not looked at</p>')
    for dl in data["dead_letters"]:
        if dl.get("error"):
            body.append(f"<p>{_e(dl['subscription'])}: unavailable ({_e(dl['error'])})</p>")
            continue
        body.append(f"<h3>{_e(dl['subscription'])}: {len(dl['messages'])} waiting</h3>")
        if dl["messages"]:
            body.append("<table><tr><th>message</th><th>dataset</th><th>request or object</th><th>attempts</th></tr>"
                        + "".join(f"<tr><td>{_e(m['message_id'])}</td><td>{_e(m['dataset'])}</td><td>{_e(m['what'])}"
                                  f"</td><td>{_e(m['attempts'])}</td></tr>" for m in dl["messages"]) + "</table>")
    body.append("</section>")
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>Landfall report: {_e(data['bucket'])}</title><style>{CSS}</style></head><body>"
            + "".join(body) + f"<script>{SCRIPT}</script></body></html>\n")


def write(path: Any, r: Reader, pubsub: Any = None, dead_letter_subscriptions: tuple[str, ...] = (),
          scored: tuple[Any, ...] = ()) -> Any:
    """Collects and writes the page to ``path`` (a local file), with the ``scored`` series files (``read_scored``)
    drawn after the datasets; returns the path."""
    from pathlib import Path

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    data = collect(r, pubsub, dead_letter_subscriptions)
    data["scored"] = [read_scored(p) for p in scored]
    out.write_text(render(data), encoding="utf-8")
    return out


def job_names(data: dict[str, Any]) -> list[str]:
    return [j["job"] for d in data["datasets"] for j in d["jobs"]]

