"""``landfall bench convert --rates``: conversion throughput per vCPU for every format, against the rates
``landfall.arrival.route`` sizes the function's inline threshold with.

Each format's file holds the same generated instances; each is converted by one task process pinned to
one CPU (``landfall.arrival.ranged_local`` with ``pin``: the whole conversion and its commit, as a 1-vCPU
function or Cloud Run task runs it). Throughput is the stored object's bytes over the wall time less the
measured start-up of a tiny file (interpreter, imports, commit); medians of interleaved rounds. The
threshold the route would use with the measured rate is printed beside the deployed one: half of
``540 s x rate x 1 vCPU``.
"""

from __future__ import annotations

import gzip
import shutil
import statistics
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from landfall.arrival import format_registry, ranged_local, route
from landfall.core.services.storage import Storage
from landfall.local.synthetic import time_series
from landfall_bench.timing import interleaved

FORMATS = ("npy", "csv", "parquet", "csv.gz", "npz")


def write_formats(folder: Path, csv_path: Path, npy_path: Path) -> dict[str, Path]:
    """The same instances as ``.npy``/``.csv`` (given) and as Parquet, gzip CSV and ``.npz``."""
    array = np.load(npy_path, mmap_mode="r")
    paths = {"npy": npy_path, "csv": csv_path, "parquet": folder / "rates.parquet",
             "csv.gz": folder / "rates.csv.gz", "npz": folder / "rates.npz"}
    schema = pa.schema([(f"c{i}", pa.float32()) for i in range(360)])
    with pq.ParquetWriter(paths["parquet"], schema) as writer:
        for start in range(0, len(array), 50_000):
            flat = np.asarray(array[start:start + 50_000]).reshape(-1, 360)
            writer.write_table(pa.table({f"c{i}": flat[:, i] for i in range(360)}, schema=schema))
    with open(csv_path, "rb") as src, gzip.open(paths["csv.gz"], "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst, 8 << 20)
    np.savez_compressed(paths["npz"], x=np.asarray(array))
    return paths


def one_task(src: Path, out: Path) -> float:
    shutil.rmtree(out, ignore_errors=True)
    run = ranged_local.run_local(str(src), str(out), tasks=1, dataset="bench", storage=Storage(), pin=True)
    if run.manifest is None:
        raise RuntimeError(f"converting {src} failed: {run.rejection or run.tasks}")
    return run.wall_s


def measure(work: Path, csv_path: Path, npy_path: Path, repeat: int) -> dict[str, dict[str, float]]:
    paths = write_formats(work, csv_path, npy_path)
    tiny = work / "rates-tiny.npy"
    np.save(tiny, time_series(10, seed=1))
    startup = statistics.median(one_task(tiny, work / "rates-out-tiny") for _ in range(3))
    walls = interleaved({fmt: (lambda p=paths[fmt], f=fmt: one_task(p, work / f"rates-out-{f}")) for fmt in FORMATS},
                        repeat)
    out = {}
    for fmt in FORMATS:
        size = paths[fmt].stat().st_size
        rate = size / max(walls[fmt] - startup, 1e-6)
        used = format_registry.named(fmt).rate
        out[fmt] = {"bytes": size, "wall_s": walls[fmt], "startup_s": startup, "mb_per_s_per_vcpu": rate / 1e6,
                    "route_mb_per_s": used / 1e6,
                    "threshold_measured_gb": route.SAFETY * route.FUNCTION_TIMEOUT_S * rate / 1e9,
                    "threshold_deployed_gb": route.SAFETY * route.FUNCTION_TIMEOUT_S * used / 1e9}
    return out


def report(rates: dict[str, dict[str, float]]) -> None:
    print("\n  conversion throughput per vCPU (one pinned task; object bytes / (wall - start-up)) and the inline "
          "threshold, half of 540 s x rate x 1 vCPU:")
    for fmt, r in rates.items():
        print(f"  {fmt:8s} {r['bytes'] / 2**20:7.0f} MiB  {r['mb_per_s_per_vcpu']:6.0f} MB/s per vCPU "
              f"(route.py assumes {r['route_mb_per_s']:.0f}): threshold {r['threshold_measured_gb']:6.1f} GB "
              f"measured vs {r['threshold_deployed_gb']:.1f} GB deployed")
