"""``landfall scaling``: the seed article's figure, epoch time against the number of workers.

Without ``--from-runs`` it trains the same data once per worker count with the ``local`` backend:
fake-gcs-server holds the shards and the runs, each count becomes a TFJob rendered by the same code as
the submit function, and the local operator runs it as the training operator would (one process per
replica, ``TF_CONFIG`` on loopback). With ``--from-runs gs://BUCKET/runs/`` it reads the
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
from landfall.core.storage import Storage
from landfall.local import emulators, plots
from landfall.local.synthetic import time_series
from landfall.submit import tfjob
from landfall.submit.config import JobConfig


@dataclasses.dataclass
class ScalingOptions:
    workers: list[int]
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
        "workers": int(metrics["num_workers"]),
        "job": metrics.get("job"),
        "epoch_s": statistics.median(e["wall_s"] for e in steady),
        "examples_per_s": statistics.median(e["examples_per_s"] for e in steady),
        "global_batch_size": metrics.get("global_batch_size"),
    }


def table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = sorted(rows, key=lambda r: r["workers"])
    base = rows[0]
    for r in rows:
        r["speedup"] = r["examples_per_s"] / base["examples_per_s"]
        r["efficiency"] = r["speedup"] / (r["workers"] / base["workers"])
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

    from landfall.local.operator import Operator
    from landfall.submit.backends.local import LocalBackend

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
        backend = LocalBackend(state / "local")
        operator = Operator(state / "local", env={**os.environ, "STORAGE_EMULATOR_HOST": url})
        rows = []
        for k in opts.workers:
            cfg = JobConfig.load({}, bucket=bucket, workers=k, gpus_per_worker=0, epochs=opts.epochs,
                                       batch_size_per_worker=opts.batch_size_per_worker,
                                       trainer_args=("--units", opts.units, "--verbose", "0"))
            name = tfjob.job_name("scaling", f"{k}-{time.time()}")
            backend.create(tfjob.render(cfg, name=name, dataset="scaling", request_id=name,
                                        manifests=[prefix + "/manifest.json"]))
            print(f"training with {k} worker(s): TFJob {name} ...", flush=True)
            deadline = time.monotonic() + opts.timeout_s
            while not tfjob.is_finished(backend.get(name)):
                if time.monotonic() > deadline:
                    operator.stop_all()
                    raise LandfallError(f"TFJob {name} did not finish within {opts.timeout_s:.0f}s")
                operator.tick()
                time.sleep(0.5)
            if tfjob.state(backend.get(name)) != "Succeeded":
                raise LandfallError(f"TFJob {name} failed (logs: {state / 'local' / 'logs' / name})")
            rows.append(summarize(json.loads(storage.read_bytes(tfjob.job_dir(bucket, name) + "/metrics.json"))))
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
    plots.scaling(rows, out / "scaling.png", title)
    print(f"wrote {out / 'scaling.json'} and {out / 'scaling.png'}", flush=True)
    return rows
