"""``python -m landfall_bench.detections [--uploads 5] [--burst 500]``: detections on arrival on ``landfall up``.

Starts ``landfall up`` in a scratch state folder (its emulators, both functions, the scorer, the local operator),
applies a series spec for dataset ``ecg`` (64-row windows every 4 rows, the ``dense`` model kind, one CPU worker;
``retrain.max_jobs_per_day: 1`` so that the uploads below do not start training jobs that compete with the scorer
for this machine's two cores) and uploads the normal training part of GutenTAG's ``ecg-diff-count-3`` (TimeEval's
synthetic ECG-like series, as aeon 1.6.0 ships it under ``UnitTest``: ``bench/data``, ``landfall_bench.realdata``).
Once its job made a champion:

- **latency**: the labelled test series (10,000 rows, three labelled anomalies of 100 rows) is uploaded ``--uploads``
  times under new names, one after another; each time, the seconds from the start of the upload to the moment its
  ``landfall.detection/v1`` message is pulled from ``landfall-detections``, and which labelled episodes its ranges
  cover. The first upload pays the scorer's cold start (TensorFlow's import and the champion's load).
- **burst** (``--burst N``): ``N`` small arrivals (``--burst-rows`` rows each, cut from the test series) uploaded at
  once from 16 threads, while every GCS notification of the burst is published a second time (a duplicate delivery,
  as Pub/Sub may make); then the detection messages are pulled until every arrival has one and 20 s more pass
  quietly. Counted from the results (``summary.json`` and ``published.json`` under ``scores/``) and the messages:
  every arrival scored and announced exactly once. The scorer's starts and model loads come from its log
  (``scorer started``, ``champion loaded``), the scoring seconds from the summaries' ``timing``.

Also the scorer's peak memory (``VmHWM`` of its process) and what the figures cost on Cloud Run (``COST``). Prints a
table, and ``--json`` the raw figures.

``--recording NAME`` (issue #55, part 6: detection on arrival at the seed's shape): instead of the ECG series, one
recording of the multivariate dev set (``landfall_bench.protocol.mv_series``; ``063`` is a Server Machine Dataset
machine of 23,694 rows x 38 channels), dataset ``recording``: the window one period of its first channel at stride a
quarter of it, its ``tr_N`` training prefix uploaded first, then the whole recording ``--uploads`` times. Each latency
row is split into its phases (``phases``): **convert** (the upload's start to its manifest's ``created_at``),
**request** (the manifest to the scorer's start: the notification, the score request and its delivery), **load**
(the champion's load, 0 when cached), **score** (reading, windowing and scoring the rows), **write** (the rest of the
scorer's own time: the scores' upload), **publish** (the summary's ``scored_at`` to the message pulled).
``--beside-retrain``: the same uploads, each made while a retrain of the dataset trains (``retrain`` allows a job per
arrival; when none is running, the training prefix is uploaded again and the upload waits for its job to run), so the
scorer shares the machine with a training job, as the issue's user measured; ``retrains_running`` counts the jobs
training both when the upload started and when its message came.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from landfall.core import logs
from landfall_bench.stack import landfall, local_stack, wait_for

DATASET = "ecg"
RECORDING = "recording"  # --recording's dataset
SPEC = {"apiVersion": "landfall.dataset/v1", "name": DATASET,
        "shape": {"window": {"length": 64, "stride": 4}, "features": 1},
        "arrival": {"series": {"time_column": "t", "drop_columns": ["is_anomaly"]}},
        "model": {"kind": "dense", "units": [128, 32], "dropout": 0.0},
        "training": {"epochs": 20, "batch_size_per_worker": 128},
        "resources": {"workers": 1, "gpus_per_worker": 0, "cpu": "1", "memory": "2Gi"},
        "verdict": {"threshold_quantile": 0.99},
        "retrain": {"max_jobs_per_day": 1}}
# Cloud Run request-based billing, tier 1 regions (https://cloud.google.com/run/pricing, read 2026-12-03): vCPU-second
# and GiB-second while a request is served (the first 180,000 vCPU-s and 360,000 GiB-s a month are free; not counted
# here), $0.40 per million requests. The scorer runs with 2 vCPU and 4 GiB (infra/modules/scorer).
COST = {"vcpu_s": 0.000024, "gib_s": 0.0000025, "request": 0.40 / 1e6, "vcpu": 2, "gib": 4,
        "source": "https://cloud.google.com/run/pricing (tier 1, request-based billing), read 2026-12-03"}


def csv_of(values: np.ndarray, labels: np.ndarray, start: int = 0) -> bytes:
    channels = {"value": values[:, 0]} if values.shape[1] == 1 else {f"c{j}": values[:, j]
                                                                       for j in range(values.shape[1])}
    frame = pd.DataFrame({"t": np.arange(start, start + len(values), dtype=float), **channels,
                          "is_anomaly": labels.astype(int)})
    return frame.to_csv(index=False).encode()


def episodes(labels: np.ndarray) -> list[tuple[int, int]]:
    edges = np.flatnonzero(np.diff(np.concatenate([[0], labels.astype(np.int8), [0]])))
    return [(int(a), int(b) - 1) for a, b in zip(edges[0::2], edges[1::2], strict=True)]


def covered(message: dict[str, Any], truth: list[tuple[int, int]]) -> int:
    found = [(r["first_row"], r["last_row"]) for r in message.get("summary_ranges") or message["ranges"]]
    return sum(1 for a, b in truth if any(lo <= b and hi >= a for lo, hi in found))


def scorer_log(info: dict[str, Any]) -> list[dict[str, Any]]:
    path = Path(info["state_dir"]) / "logs" / "on_score_request.log"
    return logs.parse(path.read_text(errors="replace")) if path.exists() else []


def peak_rss_mib(pgid: int) -> float | None:
    """The largest peak resident memory (``VmHWM``) of the processes in the scorer's process group (the
    functions-framework server and the worker that serves requests)."""
    peaks = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:
                continue
            for line in (stat.parent / "status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peaks.append(int(line.split()[1]) / 1024)
        except (OSError, IndexError, ValueError):
            continue
    return max(peaks) if peaks else None


def recording(name: str, beside_retrain: bool) -> tuple[dict, np.ndarray, np.ndarray, np.ndarray, str]:
    """The spec, training rows, test rows, labels and source of ``--recording NAME`` (module doc)."""
    from landfall.arrival import period
    from landfall_bench import protocol

    found = [n for n in protocol.mv_docs() if n == name or n.split("_")[0] == name]
    if len(found) != 1:
        raise SystemExit(f"--recording {name}: one of {', '.join(sorted(protocol.mv_docs()))}")
    data = protocol.mv_series(found[0])
    values, labels = data["values"], data["labels"]
    w = period.length(values[:, 0])
    spec = {**SPEC, "name": RECORDING,
            "shape": {"window": {"length": w, "stride": max(1, w // 4)}, "features": int(values.shape[1])},
            "retrain": {"max_jobs_per_day": 1000 if beside_retrain else 1}}
    return spec, values[:data["train_rows"]], values, labels, f"{found[0]}: {data['source']}"


def phases(upload_started: float, manifest_created: str, summary: Any, pulled: float) -> dict[str, float]:
    """One latency split into its phases (module doc), seconds."""
    def at(text: str) -> float:
        from landfall.core.rules import timestamps

        return timestamps.parse(text).timestamp()

    timing, scored = summary.timing, at(summary.message["scored_at"])
    started = scored - float(timing["total_s"])
    load, score = float(timing["model_load_s"]), float(timing["scoring_s"])
    return {"convert": round(at(manifest_created) - upload_started, 2),
            "request": round(started - at(manifest_created), 2), "load": round(load, 2), "score": round(score, 2),
            "write": round(float(timing["total_s"]) - load - score, 2), "publish": round(pulled - scored, 2)}


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from landfall.core.artifacts import champion, detections
    from landfall.core.contracts import layout
    from landfall.core.contracts.messages import Manifest
    from landfall.core.services.pubsub import PubSub
    from landfall.core.services.storage import Storage
    from landfall.local.detection_feed import wait_for as wait_detection
    from landfall.submit import engine
    from landfall.submit.backends.local import LocalBackend
    from landfall_bench import realdata

    if args.recording:
        spec, train, test, labels, source = recording(args.recording, args.beside_retrain)
    else:
        train, test, labels = realdata.labelled_series("ecg3")
        spec, source = SPEC, "GutenTAG ecg-diff-count-3 (aeon 1.6.0 UnitTest; bench/data)"
    dataset = args.dataset = spec["name"]
    truth = episodes(labels)
    out: dict[str, Any] = {"data": source, "spec": spec, "test_rows": len(test), "channels": int(test.shape[1]),
                           "labelled_episodes": truth, "beside_retrain": bool(args.beside_retrain)}
    with local_stack(work / "state") as (info, env):
        storage, pubsub = Storage(info["project"]), PubSub(info["project"])
        bucket = info["bucket"]
        (work / "datasets").mkdir(exist_ok=True)
        (work / "datasets" / f"{dataset}.json").write_text(json.dumps(spec))
        applied = landfall(env, "datasets", "apply", str(work / "datasets"))
        assert applied.returncode == 0, applied.stderr
        pubsub.ensure_subscription("bench-detections", "landfall-detections")
        pubsub.ensure_subscription("bench-notifications", "landfall-gcs-notifications")
        storage.write_bytes(f"gs://{bucket}/incoming/{dataset}/train.csv", csv_of(train, np.zeros(len(train))))
        t0 = time.monotonic()
        current = wait_for(lambda: champion.read(storage, champion.bucket_root(bucket), dataset)[0], 1800,
                           "the first job's champion")
        out["champion"] = {"run": current.run, "after_s": round(time.monotonic() - t0, 1)}

        def upload(name: str, data: bytes) -> tuple[str, float]:
            uri = f"gs://{bucket}/incoming/{dataset}/{name}"
            started = time.time()
            storage.write_bytes(uri, data)
            return layout.arrival_id(f"incoming/{dataset}/{name}", storage.stat(uri).generation), started

        latencies = []
        body = csv_of(test, labels)
        backend = LocalBackend(info["local_state"])

        def running() -> int:
            return sum(1 for job in backend.list(dataset) if engine.state(job) == "Running")

        for i in range(args.uploads):
            if args.beside_retrain and not running():  # a retrain training while this upload is scored
                upload(f"retrain-{i}.csv", csv_of(train, np.zeros(len(train))))
                wait_for(lambda: running() or None, 300, "a retrain running")
            busy = running()
            aid, started = upload(f"test-{i}.csv", body)
            message, at = wait_detection(pubsub, "bench-detections", aid, 600)
            busy = min(busy, running())  # training at the upload and still at its message
            summary = detections.Summary.from_json(storage.read_bytes(message["summary"]))
            manifest = Manifest.from_json(storage.read_bytes(message["manifest"]), message["manifest"])
            message["summary_ranges"] = summary.scoring["ranges"]
            latencies.append({"upload": i, "latency_s": round(at - started, 2), "rows": message["count"],
                              "retrains_running": busy,
                              "phases": phases(started, manifest.created_at, summary, at),
                              "anomalous_rows": message["anomalies"], "ranges": message["ranges_total"],
                              "episodes_covered": covered(message, truth),
                              "scoring_s": summary.timing["scoring_s"], "model_load_s": summary.timing["model_load_s"],
                              "labelled": summary.scoring.get("labelled")})
        out["latency"] = latencies
        out["latency_median_s"] = statistics.median(r["latency_s"] for r in latencies) if latencies else None
        pubsub.pull("bench-notifications", max_messages=1000, timeout_s=2)  # the latency uploads' notifications

        if args.burst:
            out["burst"] = burst(args, info, storage, pubsub, test, upload)
        pid = info["processes"].get("on_score_request")
        out["scorer_peak_rss_mib"] = peak_rss_mib(pid) if pid else None
        log = scorer_log(info)
        out["scorer_starts"] = sum(1 for e in log if e.get("message") == "scorer started")
        out["model_loads"] = [e.get("load_s") for e in log if e.get("message") == "champion loaded"]
    out["cost"] = cost(out)
    return out


def burst(args: argparse.Namespace, info: dict[str, Any], storage: Any, pubsub: Any, test: np.ndarray,
          upload: Any) -> dict[str, Any]:
    from landfall.core.artifacts import detections
    from landfall.core.contracts.layout import Layout

    bucket, n, rows = info["bucket"], args.burst, args.burst_rows
    bodies = [csv_of(test[(i * rows) % (len(test) - rows):][:rows], np.zeros(rows), start=i * rows)
              for i in range(n)]
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        aids = set(a for a, _ in pool.map(lambda i: upload(f"burst-{i:05d}.csv", bodies[i]), range(n)))
    uploaded_s = time.monotonic() - t0
    replayed = 0
    seen: set[tuple[Any, Any]] = set()
    per_arrival: dict[str, int] = {}
    quiet_since = time.monotonic()
    deadline = time.monotonic() + args.burst_timeout
    while time.monotonic() < deadline:
        notes = pubsub.pull("bench-notifications", max_messages=500, timeout_s=1)
        for note in notes:  # every notification once more (the tap sees the replays too: each key once)
            key = (note.attributes.get("objectId"), note.attributes.get("objectGeneration"))
            if key in seen:
                continue
            seen.add(key)
            pubsub.publish("landfall-gcs-notifications", note.data, note.attributes)
            replayed += 1
        pubsub.ack("bench-notifications", [m.ack_id for m in notes])
        got = pubsub.pull("bench-detections", max_messages=500, timeout_s=1)
        pubsub.ack("bench-detections", [m.ack_id for m in got])
        for m in got:
            aid = json.loads(m.data)["arrival"]
            per_arrival[aid] = per_arrival.get(aid, 0) + 1
        if got or notes:
            quiet_since = time.monotonic()
        if aids <= set(per_arrival) and time.monotonic() - quiet_since > 20:
            break
        if not got:
            time.sleep(0.5)
    wall_s = time.monotonic() - t0
    dataset = args.dataset
    summaries = [s for s in detections.listing(storage, bucket, Layout(), dataset) if s.arrival in aids]
    markers = storage.list(f"gs://{bucket}/scores/{dataset}/", suffix="/published.json")
    marked = {m.split("/")[-3] for m in markers} & aids
    scoring = [s.timing.get("scoring_s") or 0.0 for s in summaries]
    return {"arrivals": n, "rows_each": rows, "uploaded_s": round(uploaded_s, 1), "wall_s": round(wall_s, 1),
            "notifications_replayed": replayed, "messages": sum(per_arrival.get(a, 0) for a in aids),
            "arrivals_with_a_message": len(aids & set(per_arrival)),
            "arrivals_with_two_or_more": sum(1 for a in aids if per_arrival.get(a, 0) > 1),
            "summaries": len(summaries), "distinct_summaries": len({s.arrival for s in summaries}),
            "published_markers": len(marked), "scoring_s_total": round(sum(scoring), 2),
            "scoring_s_median": round(statistics.median(scoring), 4) if scoring else None,
            "instances": sorted({s.timing.get("instance") for s in summaries})}


def cost(out: dict[str, Any]) -> dict[str, Any] | None:
    """USD per 1,000 arrivals at the measured scoring seconds (10,000-row arrivals, and the burst's small ones)."""
    def per_1000(seconds: float) -> float:
        return 1000 * (seconds * (COST["vcpu"] * COST["vcpu_s"] + COST["gib"] * COST["gib_s"]) + COST["request"])

    lat = [r["scoring_s"] for r in out.get("latency") or [] if r.get("model_load_s") == 0]
    doc: dict[str, Any] = {"basis": COST}
    if lat:
        doc["per_1000_arrivals_of_10000_rows_usd"] = round(per_1000(statistics.median(lat)), 4)
        doc["seconds_per_10000_rows"] = round(statistics.median(lat), 3)
    burst_doc = out.get("burst") or {}
    if burst_doc.get("scoring_s_median"):
        doc[f"per_1000_arrivals_of_{burst_doc['rows_each']}_rows_usd"] = round(per_1000(burst_doc["scoring_s_median"]),
                                                                                4)
    return doc


def print_table(out: dict[str, Any]) -> None:
    print(f"data: {out['data']}; champion {out['champion']['run']} after {out['champion']['after_s']} s")
    print("upload | latency s | rows | anomalous rows | ranges | labelled episodes covered | scoring s | model load s "
          "| retrains training throughout")
    for r in out["latency"]:
        print(f"{r['upload']:>6} | {r['latency_s']:>9} | {r['rows']:>5} | {r['anomalous_rows']:>14} | "
              f"{r['ranges']:>6} | {r['episodes_covered']} of {len(out['labelled_episodes'])} | "
              f"{r['scoring_s']:>9} | {r['model_load_s']} | {r.get('retrains_running', 0)}")
    print(f"median latency, upload to detection message: {out['latency_median_s']} s "
          f"({out['test_rows']} rows x {out['channels']} channels"
          + (", a retrain beside each" if out.get("beside_retrain") else "") + ")")
    names = list((out["latency"][0].get("phases") or {}) if out["latency"] else [])
    if names:
        print("phase | " + " | ".join(names))
        for r in out["latency"]:
            print(f"{r['upload']:>5} | " + " | ".join(f"{r['phases'][n]:.2f}" for n in names))
        print("median | " + " | ".join(f"{statistics.median(r['phases'][n] for r in out['latency']):.2f}"
                                       for n in names))
    if out.get("burst"):
        b = out["burst"]
        print(f"burst: {b['arrivals']} arrivals of {b['rows_each']} rows, {b['notifications_replayed']} notifications "
              f"replayed; {b['arrivals_with_a_message']} with a message, {b['messages']} messages, "
              f"{b['arrivals_with_two_or_more']} with two or more; {b['distinct_summaries']} summaries, "
              f"{b['published_markers']} published markers; {b['wall_s']} s wall; scoring {b['scoring_s_total']} s "
              f"in all (median {b['scoring_s_median']} s)")
    print(f"scorer starts: {out['scorer_starts']}; model loads (s): {out['model_loads']}; peak memory "
          f"{out['scorer_peak_rss_mib']} MiB")
    print(f"cost: {json.dumps({k: v for k, v in (out['cost'] or {}).items() if k != 'basis'})}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m landfall_bench.detections", description=__doc__.split("\n")[0])
    p.add_argument("--uploads", type=int, default=5, help="latency uploads of the labelled 10,000-row test series")
    p.add_argument("--burst", type=int, default=0, help="arrivals in the burst (0: none)")
    p.add_argument("--burst-rows", type=int, default=200, help="rows per burst arrival")
    p.add_argument("--burst-timeout", type=float, default=1800)
    p.add_argument("--recording", default="",
                   help="a multivariate dev recording (its name or number, e.g. 063) instead of the ECG series")
    p.add_argument("--beside-retrain", action="store_true", help="every upload also starts a retrain")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="landfall-bench-detections-") as tmp:
        out = run(args, Path(tmp))
    if args.json:
        print(json.dumps(out, indent=2, default=str))
    else:
        print_table(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
