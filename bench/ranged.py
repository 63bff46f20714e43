"""``landfall bench convert --tasks 1,2``: ranged conversion, 1 task against N tasks, as processes.

On a generated ``.npy`` (default 2 GiB) and CSV (default 1 GiB) of seed-shaped instances (``--size-scale``
makes both smaller), each task count runs the whole ranged conversion (``landfall.arrival.ranged_local``:
one ``python -m landfall.arrival.task`` process per task, the commit included); the task counts alternate
within each round (``interleaved``), medians of ``--repeat`` rounds. Reported: wall time per task count,
the speed-up of the largest over 1 task (goal >= 1.6x on 2 cores), each task's peak RSS (goal <= 512 MiB,
flat), and a projection from the measured per-task throughput.

Projection: ``wall(N) = start-up + size / (N x per-task throughput)``. The per-task throughput is taken
from the run with the most tasks (with ``--pin``, one core each, as a 1-vCPU Cloud Run task); the
assumption is that storage bandwidth scales per task (each task reads its own range and writes its own
shards; Cloud Storage serves an object's ranges in parallel). The start-up is the measured wall time of a
ranged conversion of a tiny file in one task (interpreter, imports, the commit), plus ``--cold-start-s``
(stated, default 10 s: a Cloud Run task's container start, not measurable here).
"""

from __future__ import annotations

import argparse
import io
import shutil
import statistics
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from landfall.arrival import ranged_local
from landfall.core.services.storage import Storage
from landfall.local.synthetic import time_series
from landfall_bench.timing import interleaved

GIB = 2**30
INSTANCE_BYTES = 36 * 10 * 4
SEED_INSTANCES = 2_200_000  # the seed article's dataset
PROJECTED = [(".npy, seed's 2.2M instances", "npy", SEED_INSTANCES * INSTANCE_BYTES),
             ("CSV, seed's 2.2M instances", "csv", 8e9), ("CSV, 50 GB", "csv", 50e9)]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tasks", help="ranged conversion: compare these task counts (e.g. 1,2) instead of the rest")
    p.add_argument("--size-scale", type=float, default=1.0,
                   help="--tasks: input sizes as a fraction of 2 GiB (.npy) and 1 GiB (CSV)")
    p.add_argument("--pin", action="store_true",
                   help="--tasks: one CPU per task (task i on CPU i), as 1-vCPU Cloud Run tasks; without it a task's "
                        "CSV parser threads use every core, so 1 task already uses 2 cores")
    p.add_argument("--cold-start-s", type=float, default=10.0,
                   help="--tasks: stated start-up of a Cloud Run task, added to the measured one in the projection")


def write_repeated(folder: Path, npy_bytes: int, csv_bytes: int) -> tuple[Path, Path]:
    """One block of generated instances written again and again: as fast to make as to copy."""
    block = time_series(20_000, seed=7)
    npy_path, csv_path = folder / "ranged.npy", folder / "ranged.csv"
    n = max(len(block), npy_bytes // INSTANCE_BYTES // len(block) * len(block))
    out = np.lib.format.open_memmap(npy_path, mode="w+", dtype="<f4", shape=(n, 36, 10))
    for start in range(0, n, len(block)):
        out[start : start + len(block)] = block
    out.flush()
    del out
    flat = block.reshape(len(block), -1)
    text = io.BytesIO()
    pacsv.write_csv(pa.table({f"c{i}": flat[:, i] for i in range(flat.shape[1])}), text,
                    write_options=pacsv.WriteOptions(include_header=False))
    chunk = text.getvalue()
    with open(csv_path, "wb") as fh:
        for _ in range(max(1, round(csv_bytes / len(chunk)))):
            fh.write(chunk)
    return npy_path, csv_path


def convert_with(src: Path, out: Path, tasks: int, rss: dict[int, list[float]], pin: bool = False) -> float:
    shutil.rmtree(out, ignore_errors=True)
    run = ranged_local.run_local(str(src), str(out), tasks=tasks, dataset="bench", storage=Storage(), pin=pin)
    if run.manifest is None:
        raise RuntimeError(f"ranged conversion of {src} with {tasks} tasks failed: {run.rejection or run.tasks}")
    rss.setdefault(tasks, []).extend(t.peak_rss_mib or 0.0 for t in run.tasks)
    return run.wall_s


def measure(args: argparse.Namespace, work: Path) -> dict:
    counts = [int(c) for c in args.tasks.split(",")]
    print(f"generating {2 * args.size_scale:.2f} GiB .npy and {args.size_scale:.2f} GiB CSV in {work} ...",
          flush=True)
    npy, csv = write_repeated(work, int(2 * GIB * args.size_scale), int(GIB * args.size_scale))
    tiny = work / "tiny.npy"
    np.save(tiny, time_series(10, seed=1))
    startup = statistics.median(convert_with(tiny, work / "out-tiny", 1, {}) for _ in range(3))
    results: dict = {"startup_s": startup, "counts": counts, "pin": args.pin, "files": {}}
    for label, src in (("npy", npy), ("csv", csv)):
        rss: dict[int, list[float]] = {}
        runs = {n: (lambda n=n, src=src, out=work / f"out-{label}", rss=rss: convert_with(src, out, n, rss, args.pin))
                for n in counts}
        walls = interleaved(runs, args.repeat)
        results["files"][label] = {"bytes": src.stat().st_size, "wall_s": walls,
                                   "peak_rss_mib": {n: max(v) for n, v in rss.items()}}
    return results


def report(args: argparse.Namespace, r: dict) -> None:
    counts, most = r["counts"], max(r["counts"])
    startup, cold = r["startup_s"], args.cold_start_s
    print(f"\nlandfall bench convert --tasks {args.tasks}: ranged conversion, processes"
          f"{', one CPU per task' if args.pin else ''}, median of {args.repeat} interleaved rounds; "
          f"start-up (tiny file, 1 task) {startup:.2f} s")
    throughput = {}
    for label, f in r["files"].items():
        walls = f["wall_s"]
        times = "  ".join(f"{n} task{'s' if n > 1 else ''} {walls[n]:7.2f} s" for n in counts)
        print(f"  {label:4s} {f['bytes'] / GIB:5.2f} GiB: {times}   speed-up {walls[min(counts)] / walls[most]:.2f}x "
              f"(goal >= 1.6x)")
        print("       peak RSS per task, MiB: " + ", ".join(f"{n} tasks {f['peak_rss_mib'][n]:.0f}" for n in counts)
              + "   (goal <= 512, flat)")
        throughput[label] = f["bytes"] / (most * max(walls[most] - startup, 1e-6))
        print(f"       per-task throughput ({most} tasks{', one core each' if args.pin else ''}): "
              f"{throughput[label] / 1e6:.0f} MB/s")
    fixed = startup + cold
    print(f"\n  projection: wall = {startup:.1f} s measured start-up + {cold:.0f} s stated cold start + "
          "size / (tasks x per-task throughput); assumes storage bandwidth scales per task")
    print(f"  {'input':32s} {'size':>8s} " + " ".join(f"{n:>4d} task{'s' if n > 1 else ' '}" for n in (1, 10, 50)))
    for label, fmt, size in PROJECTED:
        cells = " ".join(f"{_duration(fixed + size / (n * throughput[fmt])):>10s}" for n in (1, 10, 50))
        print(f"  {label:32s} {size / 1e9:6.1f} GB {cells}")


def _duration(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"
