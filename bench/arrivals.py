"""``landfall bench train --arrivals 1,2000,10000``: a job's start-up against its dataset's history.

On fake-gcs-server (the local stack's Cloud Storage), for each arrival count N, one dataset of the same
``--instances`` seed-shaped instances split into N arrivals (written as the converter writes them: framed
shards, then the manifest with its statistics and ``count`` metadata, created last), measured before and
after compaction (``landfall.arrival.compaction``, target ``--shard-bytes``):
- ``inputs_s`` and ``requests``: the trainer's input work before its first step (``load_manifests``,
  ``plan_inputs``, ``stage``) on one worker, in this process, timed, with every HTTP request the Cloud
  Storage client sends counted at its session;
- ``files``: the files that worker stages (and opens every epoch);
- ``train_wall_s`` and ``epoch_s``: a real ``python -m trainer.task --inputs ... --epochs 1`` (one
  worker), its wall time and its one epoch's ``wall_s`` from ``metrics.json``;
- the snapshot's bytes (top object and parts), and those of a simulated 500,000-arrival snapshot (its
  records generated, nothing converted).
Ratios are against the single arrival in the same run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import google_crc32c
import numpy as np

from landfall.arrival import compaction
from landfall.arrival.converter import RunningStats
from landfall.core.artifacts import snapshots
from landfall.core.artifacts.snapshots import CompactedShard, Snapshot
from landfall.core.contracts import records, timeline
from landfall.core.contracts.layout import Layout, arrival_id, dataset_prefix, gs, manifest_name, shard_name
from landfall.core.contracts.messages import Manifest, Shard, Source
from landfall.core.services.storage import Storage, crc32c_b64
from landfall.local import emulators

SHAPE = (36, 10)
PROJECT = "landfall-bench"
LAYOUT = Layout()
WRITERS = 16


def write_arrival(storage: Storage, bucket: str, dataset: str, name: str, generation: int, x: np.ndarray,
                  per_shard: int = 0) -> str:
    """Arrival ``name#generation`` holding ``x`` as the converter leaves it: shards of ``per_shard``
    instances (0: one), then its manifest (statistics merged as the converter does), created last.
    Returns the manifest's URI."""
    aid = arrival_id(name, generation)
    shape = tuple(x.shape[1:])
    framer = records.RecordFramer(shape)
    stats = RunningStats(shape[1])
    stats.update(x)
    step = per_shard or len(x)
    cuts = list(range(0, len(x), step))
    shards = []
    for i, c in enumerate(cuts):
        data = framer.frame(x[c:c + step])
        uri = gs(bucket, f"{dataset_prefix(LAYOUT, dataset)}{aid}/{shard_name(i, len(cuts))}")
        storage.write_bytes(uri, data)
        checksum = google_crc32c.Checksum()
        checksum.update(data)
        shards.append(Shard(uri, len(x[c:c + step]), len(data), crc32c_b64(checksum)))
    manifest = Manifest(dataset=dataset, arrival_id=aid, source=Source(bucket, name, generation, x.nbytes),
                        shape=list(shape), count=len(x), shards=shards, stats=stats.result())
    uri = gs(bucket, manifest_name(LAYOUT, dataset, aid))
    storage.create(uri, manifest.to_json().encode(), content_type="application/json",
                   metadata={"count": str(len(x))})
    return uri


class Counter:
    """Counts the HTTP requests a ``Storage``'s client sends (its authorized session's ``request``)."""

    def __init__(self, storage: Storage):
        self.n = 0
        self.lock = threading.Lock()
        http = storage.client._http
        real = http.request

        def counted(*args, **kwargs):
            with self.lock:
                self.n += 1
            return real(*args, **kwargs)

        http.request = counted


def make_dataset(storage: Storage, bucket: str, dataset: str, arrivals: int, instances: int) -> None:
    x = np.random.default_rng(arrivals).normal(size=(instances, *SHAPE)).astype("<f4")
    bounds = np.linspace(0, instances, arrivals + 1).astype(int)

    def one(k: int) -> None:
        write_arrival(storage, bucket, dataset, f"incoming/{dataset}/a-{k:06d}.npy", 1000 + k,
                      x[bounds[k]:bounds[k + 1]])

    with ThreadPoolExecutor(WRITERS) as pool:
        list(pool.map(one, range(arrivals)))


def release(storage: Storage, bucket: str, dataset: str, seq: int) -> str:
    """The ``inputs.json`` the submit stage's release writes for job ``seq`` (``coalesce.job_inputs``)."""
    from landfall.submit.coalesce import job_inputs, manifests_for
    from landfall.submit.config import JobConfig
    from landfall.submit.ledger import Ledger

    ledger = Ledger(storage, bucket, LAYOUT)
    cfg = JobConfig(bucket=bucket, project=PROJECT)
    manifests, listing = manifests_for(dataset, bucket, cfg.window, storage, LAYOUT)
    inputs = job_inputs(dataset, seq, None, [], manifests, cfg, ledger, listing)
    uri = ledger.inputs_uri(inputs.job)
    storage.write_bytes(uri, inputs.to_json(), content_type="application/json")
    return uri


def input_work(inputs_uri: str, work: Path, batch: int) -> dict:
    """The trainer's input work before its first step, on a fresh client: seconds, HTTP requests, files."""
    from trainer.training.inputs import load_manifests, plan_inputs, stage

    storage = Storage(PROJECT)
    counter = Counter(storage)
    t0 = time.perf_counter()
    inputs = load_manifests(storage, [inputs_uri], SHAPE)
    plan = plan_inputs(inputs, 1, 0, batch, 0.1, 0)
    paths = stage(storage, plan, work)  # the trainer's default concurrency
    return {"inputs_s": round(time.perf_counter() - t0, 2), "requests": counter.n, "files": len(set(paths)),
            "inputs_json_bytes": len(storage.read_bytes(inputs_uri))}


def train_once(inputs_uri: str, work: Path, batch: int) -> dict:
    env = dict(os.environ)
    env.pop("TF_CONFIG", None)
    job_dir = work / "job"
    cmd = [sys.executable, "-m", "trainer.task", "--inputs", inputs_uri, "--job-dir", str(job_dir), "--epochs", "1",
           "--batch-size-per-worker", str(batch), "--work-dir", str(work / "trainer"), "--verbose", "0",
           "--warm-start", "none"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"landfall train failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    metrics = json.loads((job_dir / "metrics.json").read_text())
    epoch = metrics["epochs"][0]["wall_s"]
    return {"train_wall_s": round(wall, 2), "epoch_s": epoch, "outside_epoch_s": round(wall - epoch, 2),
            "phases": phases(metrics)}


def phases(metrics: dict) -> dict[str, float]:
    """The job's timeline (``landfall.core.contracts.timeline``) as {phase: seconds}: the slowest worker's, the
    verdict's
    passes as ``verdict/<pass>``, the epochs as one row."""
    out: dict[str, float] = {}
    for r in (metrics.get("timeline") or {}).get("summary") or []:
        if isinstance(r.get("seconds"), int | float):
            name = timeline.SHORT.get(r["phase"], r["phase"])
            within = timeline.SHORT.get(r["within"], r["within"]) if r.get("within") else None
            out[f"{within}/{name}" if within else name] = r["seconds"]
    return out


def snapshot_bytes(storage: Storage, uri: str) -> dict:
    snap = snapshots.read(storage, uri)
    parts = [len(storage.read_bytes(p)) for p in snap.parts]
    return {"top": len(storage.read_bytes(uri)), "parts": len(parts), "parts_bytes": sum(parts),
            "largest_part": max(parts)}


def simulated(arrivals: int, per_shard_arrivals: int, instances_per_arrival: int = 10) -> dict:
    """The bytes of a snapshot of ``arrivals`` compacted arrivals, its records generated as compaction
    writes them (real arrival ids, ``per_shard_arrivals`` to a shard), nothing converted."""
    shards = []
    feats = SHAPE[1]
    rng = np.random.default_rng(0)
    stats = {"count": 0, "mean": rng.normal(size=feats).tolist(), "std": rng.random(feats).tolist(),
             "min": rng.normal(size=feats).tolist(), "max": rng.normal(size=feats).tolist()}
    for s in range(0, arrivals, per_shard_arrivals):
        ids = range(s, min(arrivals, s + per_shard_arrivals))
        ranges = [[arrival_id(f"incoming/sim/device-17/2026-12-01T00:{k:06d}.csv", 1764547200000000 + k),
                   i * instances_per_arrival, instances_per_arrival, 0] for i, k in enumerate(ids)]
        shards.append(CompactedShard(f"gs://bucket/compacted/sim/00000001-0123abcd/part-{len(shards):05d}.tfrecord",
                                     len(ranges) * instances_per_arrival, 128 << 20, "AAAAAA==",
                                     {**stats, "count": len(ranges) * instances_per_arrival}, ranges))
    parts = [snapshots.part_json(p) for p in snapshots.split_parts(shards)]
    top = Snapshot(dataset="sim", seq=1, fence=1764547200000000, shape=list(SHAPE),
                   arrivals_prefix="gs://bucket/tfrecords/sim/",
                   parts=[f"gs://bucket/compacted/sim/00000001-0123abcd/part-{i:05d}.json" for i in range(len(parts))],
                   count=arrivals * instances_per_arrival, arrivals=arrivals, shards=len(shards)).to_json()
    return {"arrivals": arrivals, "top": len(top), "parts": len(parts), "parts_bytes": sum(len(p) for p in parts),
            "largest_part": max(len(p) for p in parts)}


def run(points: list[int], instances: int, shard_bytes: int, batch: int, train: bool) -> dict:
    rows = []
    with tempfile.TemporaryDirectory(prefix="landfall-bench-arrivals-") as tmp:
        gcs, url = emulators.start_gcs(Path(tmp) / "gcs")
        os.environ["STORAGE_EMULATOR_HOST"] = url
        try:
            storage = Storage(PROJECT)
            bucket = "bench-arrivals"
            storage.ensure_bucket(bucket)
            for n in points:
                ds = f"d{n}"
                t0 = time.perf_counter()
                make_dataset(storage, bucket, ds, n, instances)
                print(f"{n} arrivals: written in {time.perf_counter() - t0:.1f} s", flush=True)
                row: dict = {"arrivals": n, "instances": instances}
                for when in ("before", "after"):
                    if when == "after":
                        t0 = time.perf_counter()
                        result = compaction.compact(storage, bucket, ds, shard_bytes)
                        row["compact_s"] = round(time.perf_counter() - t0, 2)
                        row["snapshot"] = snapshot_bytes(storage, result.snapshot) if result.snapshot else None
                    uri = release(storage, bucket, ds, 1 if when == "before" else 2)
                    work = Path(tmp) / f"{ds}-{when}"
                    got = input_work(uri, work / "staged", batch)
                    if train:
                        got.update(train_once(uri, work, batch))
                    row[when] = got
                    print(f"  {when} compaction: {json.dumps(got)}", flush=True)
                rows.append(row)
        finally:
            gcs.stop()
    return {"points": rows, "simulated": [simulated(a, 4096) for a in (10_000, 500_000)]}


def report(result: dict, train: bool) -> None:
    rows = result["points"]
    base = rows[0]
    print("\narrivals | when   | requests before 1st step | files | inputs s | train wall s | epoch s | ratio wall | "
          "outside the epoch s | ratio outside")
    for row in rows:
        for when in ("before", "after"):
            r = row[when]
            ratio = f"{r['train_wall_s'] / base[when]['train_wall_s']:.2f}x" if train else "-"
            outside = (f"{r['outside_epoch_s'] / base[when]['outside_epoch_s']:.2f}x"
                       if train and base[when]["outside_epoch_s"] > 0 else "-")
            print(f"{row['arrivals']:>8} | {when:<6} | {r['requests']:>24} | {r['files']:>5} | {r['inputs_s']:>8} | "
                  f"{r.get('train_wall_s', '-'):>12} | {r.get('epoch_s', '-'):>7} | {ratio:>10} | "
                  f"{r.get('outside_epoch_s', '-'):>19} | {outside}")
    if train:  # issue #42's goal, for 2,000 arrivals: wall within 1.3x of one arrival's before compaction, 1.1x after
        print("goal (issue #42): train wall at 2,000 arrivals <= 1.3x one arrival's before compaction, <= 1.1x after")
    for row in rows:
        if row.get("snapshot"):
            print(f"snapshot at {row['arrivals']} arrivals: {json.dumps(row['snapshot'])}")
    if train:  # where each job's time went, phase by phase (issue #42), against one arrival's
        names = list(dict.fromkeys(k for row in rows for w in ("before", "after") for k in row[w].get("phases", {})))
        print("\nphase seconds (slowest worker) | " + " | ".join(f"{row['arrivals']} {w}" for row in rows
                                                               for w in ("before", "after")))
        for name in names:
            cells = []
            for row in rows:
                for when in ("before", "after"):
                    got, one = row[when].get("phases", {}).get(name), base[when].get("phases", {}).get(name)
                    ratio = f" ({got / one:.2f}x)" if got is not None and one and row is not base else ""
                    cells.append("-" if got is None else f"{got:.2f}{ratio}")
            print(f"{name} | " + " | ".join(cells))
    for sim in result["simulated"]:
        print(f"simulated snapshot at {sim['arrivals']} arrivals: {json.dumps(sim)}")


def main(args) -> int:
    points = [int(x) for x in args.arrivals.split(",")]
    result = run(points, args.arrival_instances, args.shard_bytes, args.batch_size, not args.skip_train)
    if args.json:  # first: a long run's figures survive a failing report
        Path(args.json).write_text(json.dumps(result, indent=2))
    report(result, not args.skip_train)
    return 0

