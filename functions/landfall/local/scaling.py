"""``landfall scaling``: the seed article's figure, epoch time against the number of workers.

Without ``--from-runs`` it trains the same data once per worker count with the ``local`` backend:
fake-gcs-server holds the shards and the runs, each count becomes a TFJob rendered by the same code as
the submit function, and the local operator runs it as the training operator would (one process per
replica, ``TF_CONFIG`` on loopback). ``--engine jobset`` runs each count as a JobSet instead (the local
JobSet controller, the trainer building ``TF_CONFIG`` itself); ``--engine tfjob,jobset`` runs both, one
count after the other, and adds each JobSet row's epoch time over the TFJob row's (``epoch_s_vs_tfjob``).
With ``--from-runs gs://BUCKET/runs/`` it reads the
``metrics.json`` of finished TFJobs instead (for example of GPU runs on GKE).

Per worker count: the median epoch time (the first epoch, which traces the graph, is left out when there
are more), global examples/s, speedup over the smallest count and efficiency = speedup / (workers ratio).
On one machine the workers share its cores, so the figure shows the coordination cost, not GPU scaling.
"""

from __future__ import annotations

import dataclasses
import io
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from landfall.arrival import converter
from landfall.arrival.config import ConverterConfig
from landfall.core.errors import LandfallError
from landfall.core.services.storage import Storage
from landfall.local import emulators, plots
from landfall.local.synthetic import time_series
from landfall.submit import engine, jobmeta
from landfall.submit.config import JobConfig


@dataclasses.dataclass
class ScalingOptions:
    workers: list[int]
    engines: list[str] = dataclasses.field(default_factory=lambda: ["tfjob"])
    instances: int = 8192
    epochs: int = 3
    batch_size_per_worker: int = 256
    units: str = "128,32"
    from_runs: str | None = None
    out: str = "./landfall-scaling"
    timeout_s: float = 1800.0


def summarize(metrics: dict[str, Any]) -> dict[str, Any]:
    epochs = metrics.get("epochs") or []
    if not epochs:
        raise LandfallError(f"run {metrics.get('job')} has no finished epoch")
    steady = epochs[1:] if len(epochs) > 1 else epochs
    return {
        "engine": metrics.get("engine", "tfjob"),
        "workers": int(metrics["num_workers"]),
        "job": metrics.get("job"),
        "epoch_s": statistics.median(e["wall_s"] for e in steady),
        "examples_per_s": statistics.median(e["examples_per_s"] for e in steady),
        "global_batch_size": metrics.get("global_batch_size"),
    }


def table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = sorted(rows, key=lambda r: (r.get("engine") != "tfjob", r.get("engine", ""), r["workers"]))
    tfjob_epoch = {r["workers"]: r["epoch_s"] for r in rows if r.get("engine", "tfjob") == "tfjob"}
    for eng in dict.fromkeys(r.get("engine", "tfjob") for r in rows):
        mine = [r for r in rows if r.get("engine", "tfjob") == eng]
        base = mine[0]
        for r in mine:
            r["speedup"] = r["examples_per_s"] / base["examples_per_s"]
            r["efficiency"] = r["speedup"] / (r["workers"] / base["workers"])
            if eng != "tfjob" and r["workers"] in tfjob_epoch:
                r["epoch_s_vs_tfjob"] = r["epoch_s"] / tfjob_epoch[r["workers"]]
    return rows


def from_runs(prefix: str, storage: Storage) -> list[dict[str, Any]]:
    by_workers: dict[int, dict[str, Any]] = {}
    for uri in storage.list(prefix.rstrip("/") + "/", suffix="/metrics.json"):
        m = json.loads(storage.read_bytes(uri))
        if m.get("status") != "succeeded" or not m.get("epochs"):
            continue
        row = summarize(m)
        by_workers[row["workers"]] = row  # the latest listed run per worker count
    return list(by_workers.values())


def train_locally(opts: ScalingOptions, state: Path) -> list[dict[str, Any]]:
    import os

    from landfall.core.contracts.messages import InputManifest, JobInputs
    from landfall.local.controllers import backend_for, make_operator

    gcs, url = emulators.start_gcs(state)
    try:
        os.environ["STORAGE_EMULATOR_HOST"] = url
        storage, bucket = Storage(), "landfall-scaling"
        storage.ensure_bucket(bucket)
        buf = io.BytesIO()
        np.save(buf, time_series(opts.instances, seed=11))
        storage.write_bytes(f"gs://{bucket}/incoming/scaling/data.npy", buf.getvalue())
        prefix = f"gs://{bucket}/tfrecords/scaling/data"
        # Several shards, so workers stage only the shards their record ranges touch.
        converter.convert(f"gs://{bucket}/incoming/scaling/data.npy", prefix, "scaling",
                          ConverterConfig(shard_target_bytes=max(1 << 20, opts.instances * 1500 // 8)), storage)
        manifest = prefix + "/manifest.json"
        inputs = [InputManifest(uri=manifest, generation=storage.stat(manifest).generation)]
        env = {**os.environ, "STORAGE_EMULATOR_HOST": url}
        rows = []
        for eng in opts.engines:
            operator = make_operator(state / "local", env=env, engine_name=eng)
            operator.tick()  # a controller that serves its engine's API (vertex's stand-in) starts serving
            backend = operator.backend
            for k in opts.workers:
                cfg = JobConfig.load({}, bucket=bucket, workers=k, gpus_per_worker=0, epochs=opts.epochs,
                                     batch_size_per_worker=opts.batch_size_per_worker, engine=eng,
                                     backend=backend_for(eng), trainer_args=("--units", opts.units, "--verbose", "0"))
                name = jobmeta.job_name("scaling", f"{eng}-{k}-{time.time()}")
                inputs_uri = jobmeta.job_dir(bucket, name) + "/inputs.json"
                storage.write_bytes(inputs_uri, JobInputs(dataset="scaling", job=name, seq=0, manifests=inputs,
                                                          requests=[]).to_json())
                backend.create(engine.render(cfg, name=name, dataset="scaling", request_id=name,
                                             inputs_uri=inputs_uri))
                print(f"training with {k} worker(s): {engine.module(eng).KIND} {name} ...", flush=True)
                deadline = time.monotonic() + opts.timeout_s
                while not engine.is_finished(backend.get(name)):
                    if time.monotonic() > deadline:
                        operator.stop_all()
                        raise LandfallError(f"{name} did not finish within {opts.timeout_s:.0f}s")
                    operator.tick()
                    time.sleep(0.5)
                if engine.state(backend.get(name)) != "Succeeded":
                    raise LandfallError(f"{name} failed (logs: {state / 'local' / 'logs' / name})")
                metrics = json.loads(storage.read_bytes(jobmeta.job_dir(bucket, name) + "/metrics.json"))
                rows.append({**summarize(metrics), "engine": eng})
        return rows
    finally:
        gcs.stop()


def run(opts: ScalingOptions) -> list[dict[str, Any]]:
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    if opts.from_runs:
        rows = from_runs(opts.from_runs, Storage())
        title = f"Finished runs under {opts.from_runs}"
    else:
        with tempfile.TemporaryDirectory(prefix="landfall-scaling-") as tmp:
            rows = train_locally(opts, Path(tmp))
        title = (f"{opts.instances} instances of 36 x 10, batch {opts.batch_size_per_worker} per worker, "
                 f"local backend on this machine")
    if not rows:
        raise LandfallError("no finished runs to draw")
    rows = table(rows)
    (out / "scaling.json").write_text(json.dumps(rows, indent=2))
    engines = list(dict.fromkeys(r.get("engine", "tfjob") for r in rows))
    for eng in engines:  # scaling.png for the first engine, scaling-<engine>.png for the others
        png = out / ("scaling.png" if eng == engines[0] else f"scaling-{eng}.png")
        plots.scaling([r for r in rows if r.get("engine", "tfjob") == eng], png, f"{title} ({eng})")
    print(f"wrote {out / 'scaling.json'} and the figures in {out}", flush=True)
    return rows
