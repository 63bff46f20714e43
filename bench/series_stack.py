"""``landfall bench series --stack``: Daphnet's CSV uploaded unchanged to a ``landfall up`` stack, end to end.

Starts ``landfall up`` in a scratch state folder (its own emulators, both functions, the local operator), applies a
series spec for dataset ``gait`` (``landfall datasets apply``), uploads ``bench/data/S06R02E0.csv`` exactly as aeon
ships it (``landfall upload``), waits for the conversion (the manifest), the job (the local operator's TFJob) and
the champion, then runs ``landfall score`` on the same file with the champion and records the ranges it names.
Every step is the real command in its own process, as a user types it. Prints the figures (and ``--json``): each
stage's wall time, the manifest's windows and segments, the job's epochs, losses, skill and verdict, the champion's
threshold and the scored ranges. Stops the stack (SIGTERM) at the end, whatever happened.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from landfall_bench.stack import landfall, local_stack, wait_for

SPEC = {"apiVersion": "landfall.dataset/v1", "name": "gait",
        "shape": {"window": {"length": 16, "stride": 2}},
        "arrival": {"series": {"time_column": "timestamp", "channels": [
            "ankle_horiz_fwd", "ankle_vert", "ankle_horiz_lateral", "leg_horiz_fwd", "leg_vert", "leg_horiz_lateral",
            "trunk_horiz_fwd", "trunk_vert", "trunk_horiz_lateral"]}},
        "model": {"units": [32, 8], "dropout": 0.0},
        "training": {"epochs": 30, "batch_size_per_worker": 64, "learning_rate": 0.01},
        "resources": {"workers": 1, "gpus_per_worker": 0, "cpu": "1", "memory": "2Gi"},
        "verdict": {"threshold_quantile": 0.99}}


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from landfall.core.artifacts import champion
    from landfall.core.services.storage import Storage
    from landfall.submit import jobmeta, tfjob
    from landfall.submit.backends.local import LocalBackend
    from landfall_bench import realdata

    out: dict[str, Any] = {"spec": SPEC, "file": "bench/data/S06R02E0.csv"}
    t0 = time.monotonic()
    extra = ["--inline-max-bytes", str(args.inline_max_bytes)] if args.inline_max_bytes else []
    with local_stack(work / "state", extra, {"LANDFALL_TASK_BYTES": str(args.task_bytes)} if args.task_bytes
                     else None) as (info, env):
        out["up_s"] = round(time.monotonic() - t0, 1)
        (work / "datasets").mkdir(exist_ok=True)
        (work / "datasets" / "gait.json").write_text(json.dumps(SPEC))
        applied = landfall(env, "datasets", "apply", str(work / "datasets"))
        if applied.returncode:
            raise RuntimeError(f"landfall datasets apply: {applied.stderr.strip()}")
        src = work / "S06R02E0.csv"
        shutil.copyfile(realdata.DATA / "S06R02E0.csv", src)  # unchanged
        t1 = time.monotonic()
        uploaded = landfall(env, "upload", str(src), "--dataset", "gait")
        if uploaded.returncode:
            raise RuntimeError(f"landfall upload: {uploaded.stderr.strip()}")
        storage, bucket = Storage(info["project"]), info["bucket"]
        manifests = wait_for(lambda: storage.list(f"gs://{bucket}/tfrecords/gait/", suffix="/manifest.json"), 300,
                          "the conversion")
        out["convert_s"] = round(time.monotonic() - t1, 1)
        manifest = json.loads(storage.read_bytes(manifests[0]))
        series = manifest["series"]
        out["manifest"] = {"windows": manifest["count"], "shape": manifest["shape"], "shards": len(manifest["shards"]),
                           "tasks": series.get("tasks", 1),
                           "stored_bytes": sum(s["bytes"] for s in manifest["shards"]), "rows": series["rows"],
                           "segments": len(series["segments"]), "max_gap": series["max_gap"]}
        backend = LocalBackend(info["local_state"])
        job = wait_for(lambda: [j for j in backend.list("gait") if tfjob.is_finished(j)], args.train_timeout,
                    "the training job")[0]
        out["train_s"] = round(time.monotonic() - t1, 1)
        name = jobmeta.name_of(job)
        metrics = json.loads(storage.read_bytes(jobmeta.job_dir(bucket, name) + "/metrics.json"))
        out["job"] = {"name": name, "state": tfjob.state(job), "epochs_run": metrics.get("epochs_run"),
                      "stopped_early": metrics.get("stopped_early"), "verdict": metrics.get("verdict"),
                      "skill": metrics.get("skill"), "loss": (metrics.get("epochs") or [{}])[-1].get("loss"),
                      "val_loss": (metrics.get("epochs") or [{}])[-1].get("val_loss"),
                      "instances": metrics.get("instances", {}).get("arrivals"),
                      "threshold": (metrics.get("threshold") or {}).get("value")}
        current = wait_for(lambda: champion.read(storage, champion.bucket_root(bucket), "gait")[0], 60, "the champion")
        out["champion"] = {"run": current.run, "model": current.model, "reason": current.reason}
        t2 = time.monotonic()
        scored = landfall(env, "score", str(src), "--dataset", "gait", "--out", str(work / "S06R02E0.scores.parquet"),
                           "--plot", str(Path(args.plot).resolve()) if args.plot else str(work / "scores.png"))
        if scored.returncode:
            raise RuntimeError(f"landfall score: {scored.stderr.strip()}")
        out["score_s"] = round(time.monotonic() - t2, 1)
        out["score_output"] = scored.stdout
        doc = json.loads((work / "S06R02E0.scores.json").read_text())
        out["scored"] = {k: doc[k] for k in ("rows", "windows", "stride", "threshold", "anomalies", "max_gap",
                                             "labelled")}
        out["scored"]["ranges"] = len(doc["ranges"])
        out["scored"]["strongest"] = sorted(doc["ranges"], key=lambda r: -r["peak_score"])[:5]
        out["total_s"] = round(time.monotonic() - t0, 1)
        return out


def main(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="landfall-bench-series-stack-") as tmp:
        work = Path(args.work_dir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        result = run(args, work)
    print(result.pop("score_output"), end="")
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    m, j, s = result["manifest"], result["job"], result["scored"]
    print(f"Daphnet S06R02E0.csv uploaded unchanged: converted in {result['convert_s']} s ({m['rows']} rows, "
          f"{m['segments']} segments, {m['tasks']} conversion tasks, {m['windows']} windows, "
          f"{m['stored_bytes']:,} bytes stored); job {j['name']} "
          f"{j['state']} after {result['train_s']} s ({j['epochs_run']} epochs, val_loss {j['val_loss']}, skill "
          f"{j['skill']}, verdict {j['verdict']}); champion {result['champion']['run']}; landfall score: "
          f"{s['ranges']} ranges, {s['anomalies']} anomalous rows of {s['rows']} ({result['score_s']} s); "
          f"total {result['total_s']} s with the stack's start ({result['up_s']} s)")
    return 0
