"""``landfall bench convert``: the converter against its floor and against the usual way.

On a generated seed-shaped CSV (default 100,000 instances of 36 x 10) and the same data as ``.npy``,
in one run, each timing the median of ``--repeat`` rounds (the contenders alternate within a round,
so they share the machine's noise):

- ours (CSV -> shards + manifest) vs pyarrow's CSV parse of the same file alone (the floor), both
  the whole-file multi-threaded ``read_csv`` and the streaming ``open_csv`` that bounded memory needs;
- ours vs pandas + a per-row ``tf.train.Example(FloatList)`` writer (the usual tutorial way);
- ``.npy`` conversion vs a plain copy of the file, streamed through the same storage layer (read and
  write in 8 MiB blocks, as any stream converter must), and vs the kernel's in-cache file copy;
- peak RSS of a conversion (own process) at 1x and ``--scale``x the input: it must stay flat;
- ours with the arrival's profile (``landfall.core.quality.profile``, the default) vs ours without it
  (``LANDFALL_PROFILE=false``), CSV and ``.npy``: the profile's cost (goal: >= 0.95x the throughput).

``--wide 300`` measures only the profile's cost on wide data instead (#39): instances of ``--wide-timesteps`` x 300
features (random walks, CSV and ``.npy``), profiled and unprofiled conversions alternating, where the pair co-moments
(features x features per sampled row) are the part that grows.

``--tasks 1,2`` measures the ranged conversion instead (``landfall_bench.ranged``: 1 vs N task processes on a
2 GiB ``.npy`` and a 1 GiB CSV, ``--size-scale`` for smaller ones, and a projection to larger inputs).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from landfall.arrival import converter
from landfall.arrival.config import ConverterConfig
from landfall.core.services.storage import Storage
from landfall.local.synthetic import time_series
from landfall_bench.timing import alternating, interleaved, median_time


def write_inputs(folder: Path, n: int, seed: int = 0) -> tuple[Path, Path]:
    csv_path, npy_path = folder / f"data-{n}.csv", folder / f"data-{n}.npy"
    out = np.lib.format.open_memmap(npy_path, mode="w+", dtype="<f4", shape=(n, 36, 10))
    with pacsv.CSVWriter(csv_path, pa.schema([(f"c{i}", pa.float32()) for i in range(360)]),
                         write_options=pacsv.WriteOptions(include_header=False)) as writer:
        for start in range(0, n, 50_000):
            block = time_series(min(50_000, n - start), seed=seed + start)
            out[start : start + len(block)] = block
            flat = block.reshape(len(block), -1)
            writer.write_table(pa.table({f"c{i}": flat[:, i] for i in range(360)}))
    out.flush()
    del out
    return csv_path, npy_path


def ours(src: Path, dest: Path, profile: bool = True, shape: tuple[int, int] | None = None) -> None:
    shutil.rmtree(dest, ignore_errors=True)
    cfg = ConverterConfig.load({}, profile=profile)
    if shape is not None:
        cfg = dataclasses.replace(cfg, timesteps=shape[0], features=shape[1])
    converter.convert(str(src), str(dest), "bench", cfg, Storage())


def write_wide(folder: Path, n: int, timesteps: int, features: int, seed: int = 0) -> tuple[Path, Path]:
    """``n`` instances of (timesteps, features) random walks, as CSV and ``.npy``."""
    stem = folder / f"wide-{n}x{timesteps}x{features}"
    csv_path, npy_path = stem.with_suffix(".csv"), stem.with_suffix(".npy")
    rng = np.random.default_rng(seed)
    data = np.cumsum(rng.normal(size=(n, timesteps, features)), axis=1).astype(np.float32)
    data += rng.normal(0, 10, size=(1, 1, features)).astype(np.float32)  # channels of their own levels
    np.save(npy_path, data)
    flat = data.reshape(n, -1)
    pacsv.write_csv(pa.table({f"c{i}": flat[:, i] for i in range(flat.shape[1])}), csv_path,
                    write_options=pacsv.WriteOptions(include_header=False))
    return csv_path, npy_path


def measure_wide(args: argparse.Namespace, work: Path) -> dict[str, float]:
    """The profile's cost on ``--wide`` features: profiled and unprofiled conversions, alternating."""
    shape = (args.wide_timesteps, args.wide)
    print(f"generating {args.instances} instances of {shape[0]} x {shape[1]} as CSV and .npy in {work} ...", flush=True)
    csv_path, npy_path = write_wide(work, args.instances, *shape)
    r: dict[str, float] = {"csv_mib": csv_path.stat().st_size / 2**20, "npy_mib": npy_path.stat().st_size / 2**20}
    for fmt, src in (("csv", csv_path), ("npy", npy_path)):
        r.update(alternating({
            f"ours_{fmt}_profiled_s": lambda src=src, fmt=fmt: ours(src, work / f"out-{fmt}", shape=shape),
            f"ours_{fmt}_unprofiled_s": lambda src=src, fmt=fmt: ours(src, work / f"out-{fmt}", False, shape),
        }, 2 * args.repeat))
    print(f"\nlandfall bench convert --wide {args.wide}: {args.instances} instances of {shape[0]} x {shape[1]}, "
          f"CSV {r['csv_mib']:.0f} MiB, .npy {r['npy_mib']:.0f} MiB, median of {2 * args.repeat} alternating rounds")
    for fmt in ("csv", "npy"):
        wall = r[f"ours_{fmt}_unprofiled_s"] / r[f"ours_{fmt}_profiled_s"]
        cpu = r[f"ours_{fmt}_unprofiled_cpu_s"] / r[f"ours_{fmt}_profiled_cpu_s"]
        print(f"  {fmt}: throughput profiling on / off {wall:.3f}x, CPU {cpu:.3f}x (goal >= 0.95)")
    return r


def pyarrow_read_csv(src: Path) -> None:
    pacsv.read_csv(src, read_options=pacsv.ReadOptions(autogenerate_column_names=True))


def pyarrow_stream_csv(src: Path) -> None:
    names = [f"c{i}" for i in range(360)]
    reader = pacsv.open_csv(src, read_options=pacsv.ReadOptions(column_names=names, block_size=4 << 20),
                            convert_options=pacsv.ConvertOptions(column_types={n: pa.float32() for n in names}))
    for _ in reader:
        pass


def pandas_per_row_examples(src: Path, dest: Path) -> None:
    """What most tutorials show: pandas, then one tf.train.Example(FloatList) per row."""
    import pandas as pd
    import tensorflow as tf

    frame = pd.read_csv(src, header=None)
    with tf.io.TFRecordWriter(str(dest)) as writer:
        for row in frame.itertuples(index=False):
            feature = tf.train.Feature(float_list=tf.train.FloatList(value=list(row)))
            writer.write(tf.train.Example(features=tf.train.Features(feature={"x": feature})).SerializeToString())


_CHILD = """
import sys
from landfall.cli import main
rc = main(["convert", *sys.argv[1:]])
hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")][0].split()[1]
print(hwm, file=sys.stderr)
sys.exit(rc)
"""


def peak_rss_mib(src: Path, dest: Path) -> float:
    """Runs ``landfall convert`` in its own process; its VmHWM is the peak RSS of that process alone
    (``ru_maxrss`` of a child would include the parent's memory at fork time)."""
    rc, stderr, peak = convert_in_child(src, dest)
    if rc != 0:
        raise RuntimeError(f"convert of {src} failed: {stderr[-500:]}")
    return peak


def convert_in_child(src: Path, dest: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, float]:
    """``landfall convert SRC --out DEST ARGS`` in its own process: exit status, stderr (without the peak
    line) and peak RSS in MiB; ``env`` is added to this process's environment."""
    shutil.rmtree(dest, ignore_errors=True)
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(src), "--out", str(dest), *args],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env={**os.environ, **(env or {})})
    *lines, last = proc.stderr.strip().splitlines() or [""]
    if not last.isdigit():  # it died before printing its peak
        return proc.returncode, proc.stderr, float("nan")
    return proc.returncode, "\n".join(lines), int(last) / 1024  # kB


def storage_copy(src: Path, dest: Path) -> None:
    """A plain streamed copy through the same storage layer the converter uses (no conversion)."""
    storage = Storage()
    with storage.open_read(str(src)) as fh, storage.open_write(str(dest)) as out:
        while block := fh.read(8 << 20):
            out.write(block)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="landfall-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.tasks:
        from landfall_bench import ranged

        result = ranged.measure(args, work)
        ranged.report(args, result)
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2))
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
        return 0
    if args.wide:
        wide = measure_wide(args, work)
        if args.json:
            Path(args.json).write_text(json.dumps({"instances": args.instances, "features": args.wide,
                                                   "timesteps": args.wide_timesteps, **wide}, indent=2))
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
        return 0
    r, sizes = measure(args, work)
    report(args, r, sizes)
    per_format = None
    if args.rates:
        from landfall_bench import rates

        n = args.instances  # the files measure() wrote
        per_format = rates.measure(work, work / f"data-{n}.csv", work / f"data-{n}.npy", args.repeat)
        rates.report(per_format)
    if args.json:
        Path(args.json).write_text(json.dumps({"instances": args.instances, **r, **sizes, "rates": per_format},
                                              indent=2))
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="landfall bench convert", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--instances", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--scale", type=int, default=4, help="peak RSS is measured at 1x and this many times the input")
    p.add_argument("--skip-usual", action="store_true", help="skip the slow pandas + per-row Example baseline")
    p.add_argument("--json", help="also write the results to this file")
    p.add_argument("--workdir", help="where to put inputs and outputs (default: a temporary folder)")
    p.add_argument("--rates", action=argparse.BooleanOptionalAction, default=True,
                   help="also MB/s per vCPU for every format (one pinned task each) and the inline threshold")
    p.add_argument("--wide", type=int, default=0, metavar="FEATURES",
                   help="only the profile's cost, on instances of this many features (300: #39's wide data)")
    p.add_argument("--wide-timesteps", type=int, default=4, help="timesteps per instance with --wide")
    from landfall_bench import ranged

    ranged.add_arguments(p)
    return p


def measure(args: argparse.Namespace, work: Path) -> tuple[dict[str, float], dict[str, float]]:
    """Ours, the floor and the usual way, interleaved round by round; then peak RSS at 1x and ``scale``x."""
    n = args.instances
    print(f"generating {n} seed-shaped instances (36 x 10) as CSV and .npy in {work} ...", flush=True)
    csv_path, npy_path = write_inputs(work, n)
    r: dict[str, float] = {}
    r.update(interleaved({
        "ours_csv_s": lambda: ours(csv_path, work / "out-csv"),
        "pyarrow_read_csv_s": lambda: pyarrow_read_csv(csv_path),
        "pyarrow_stream_csv_s": lambda: pyarrow_stream_csv(csv_path),
    }, args.repeat))
    r.update(interleaved({
        "ours_npy_s": lambda: ours(npy_path, work / "out-npy"),
        "copy_npy_s": lambda: storage_copy(npy_path, work / "copy.npy"),
        "kernel_copy_npy_s": lambda: shutil.copyfile(npy_path, work / "copy.npy"),
    }, args.repeat))
    # The profile's cost: ours with and without it, alone, in alternating order (the first contender of a round is
    # measurably slower on a busy machine: up to 16 % here, more than the cost measured).
    for fmt, src in (("csv", csv_path), ("npy", npy_path)):
        r.update(alternating({
            f"ours_{fmt}_profiled_s": lambda src=src, fmt=fmt: ours(src, work / f"out-{fmt}"),
            f"ours_{fmt}_unprofiled_s": lambda src=src, fmt=fmt: ours(src, work / f"out-{fmt}", profile=False),
        }, 2 * args.repeat))
    if not args.skip_usual:
        print("running the usual way (pandas + per-row tf.train.Example), once ...", flush=True)
        r["usual_csv_s"] = median_time(lambda: pandas_per_row_examples(csv_path, work / "usual.tfrecord"), 1)
    print(f"measuring peak RSS at 1x and {args.scale}x ...", flush=True)
    big_csv, big_npy = write_inputs(work, n * args.scale, seed=1)
    r["rss_csv_1x_mib"] = peak_rss_mib(csv_path, work / "rss")
    r["rss_csv_nx_mib"] = peak_rss_mib(big_csv, work / "rss")
    r["rss_npy_1x_mib"] = peak_rss_mib(npy_path, work / "rss")
    r["rss_npy_nx_mib"] = peak_rss_mib(big_npy, work / "rss")
    sizes = {"csv_mib": csv_path.stat().st_size / 2**20, "npy_mib": npy_path.stat().st_size / 2**20,
             "csv_nx_mib": big_csv.stat().st_size / 2**20, "npy_nx_mib": big_npy.stat().st_size / 2**20}
    return r, sizes


def report(args: argparse.Namespace, r: dict[str, float], sizes: dict[str, float]) -> None:
    rows = [
        ("CSV: ours / pyarrow read_csv (floor)", r["ours_csv_s"] / r["pyarrow_read_csv_s"], "<= 1.3"),
        ("CSV: ours / pyarrow streaming parse", r["ours_csv_s"] / r["pyarrow_stream_csv_s"], ""),
        (".npy: ours / plain streamed copy", r["ours_npy_s"] / r["copy_npy_s"], "<= 2.0"),
        (".npy: ours / kernel copy_file_range", r["ours_npy_s"] / r["kernel_copy_npy_s"], ""),
        ("CSV: throughput profiling on / off", r["ours_csv_unprofiled_s"] / r["ours_csv_profiled_s"], ">= 0.95"),
        (".npy: throughput profiling on / off", r["ours_npy_unprofiled_s"] / r["ours_npy_profiled_s"], ">= 0.95"),
        ("CSV: CPU profiling off / on", r["ours_csv_unprofiled_cpu_s"] / r["ours_csv_profiled_cpu_s"], ">= 0.95"),
        (".npy: CPU profiling off / on", r["ours_npy_unprofiled_cpu_s"] / r["ours_npy_profiled_cpu_s"], ">= 0.95"),
        (f"peak RSS CSV {args.scale}x / 1x", r["rss_csv_nx_mib"] / r["rss_csv_1x_mib"], "flat"),
        (f"peak RSS .npy {args.scale}x / 1x", r["rss_npy_nx_mib"] / r["rss_npy_1x_mib"], "flat"),
    ]
    if "usual_csv_s" in r:
        rows.insert(2, ("CSV: pandas+per-row Example / ours", r["usual_csv_s"] / r["ours_csv_s"], "report"))
    print(f"\nlandfall bench convert: {args.instances} instances, CSV {sizes['csv_mib']:.0f} MiB, "
          f".npy {sizes['npy_mib']:.0f} MiB, median of {args.repeat}")
    for key, value in r.items():
        print(f"  {key:24s} {value:10.3f}")
    print()
    for label, ratio, goal in rows:
        print(f"  {label:40s} {ratio:6.2f}x   {('goal ' + goal) if goal else ''}")
    print(f"  peak RSS MiB: CSV {r['rss_csv_1x_mib']:.0f} -> {r['rss_csv_nx_mib']:.0f} "
          f"({sizes['csv_nx_mib']:.0f} MiB input), .npy {r['rss_npy_1x_mib']:.0f} -> {r['rss_npy_nx_mib']:.0f} "
          f"({sizes['npy_nx_mib']:.0f} MiB input)")


if __name__ == "__main__":
    raise SystemExit(main())
