"""``landfall bench series``: a series stored once and windowed when read, against the same windows pre-cut.

One run prints (and optionally writes as JSON):

1. **Input pipeline**, windows/s: the trainer's own training pipeline (``trainer.training.pipeline.train_dataset``:
   shuffle, batch, normalise) over a synthetic ``--rows`` x ``--channels`` series converted by the real converter as a
   series arrival (``landfall.arrival.series``; windows cut in tf.data by ``trainer.training.windows``), against the
   same windows (length ``--length``, stride ``--stride``) pre-cut into an ``.npy`` of instances and converted as
   instances. Both plans hold out the same way (blocks, ``--validation-fraction``), so they read the same windows.
   Rounds alternate between the two (``landfall_bench.timing.pipeline_rates``: fresh iterators, warmed up); medians of
   ``--rounds``. Goal: the series >= 0.9x the pre-cut windows.
2. **Storage**: a ``--storage-rows`` x ``--channels`` series (timestamps as ISO-8601 text, values with 4 decimals,
   as a sensor exports them) written as CSV, converted at each of ``--strides``; the stored bytes (its shards,
   as the manifest lists them) against the CSV's bytes, against the series itself (rows x channels float32) and
   against the same windows pre-cut (the bytes per pre-cut window measured in part 1's instance shards, times the
   window count: a TFRecord's framing per record does not depend on how many there are). Goal: within about 1.1x
   of the series, whatever the stride.

With ``--stack`` instead (``landfall_bench.series_stack``): Daphnet's CSV uploaded unchanged to a ``landfall up``
stack under a series spec, converted, trained, promoted and scored, with each stage's time.
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import dataclasses
import tempfile
import time
from pathlib import Path

import numpy as np

from landfall.arrival.config import ConverterConfig
from landfall.arrival.converter import convert
from landfall.core.rules import holdout
from landfall.core.services.storage import Storage


def synthetic_series(rows: int, channels: int, seed: int = 0) -> np.ndarray:
    """Float32 ``[rows, channels]``: a few sines of different periods per channel plus noise, 4 decimals."""
    rng = np.random.default_rng(seed)
    t = np.arange(rows, dtype=np.float64)[:, None]
    periods = rng.uniform(20, 400, size=(1, channels))
    x = np.sin(2 * np.pi * t / periods) + 0.5 * np.sin(2 * np.pi * t / (periods * 3.7) + rng.uniform(0, 6, channels))
    x += rng.normal(0, 0.1, size=x.shape)
    return np.round(x, 4).astype(np.float32)


def write_csv(values: np.ndarray, path: Path, start: str = "2024-01-01T00:00:00", step_ms: int = 10) -> int:
    """The series as a sensor's CSV export: ``timestamp`` (ISO-8601, milliseconds) and ``c0``.. columns; its bytes."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    t0 = np.datetime64(start, "ms")
    times = (t0 + np.arange(len(values)) * np.timedelta64(step_ms, "ms")).astype(str)
    table = pa.table({"timestamp": pa.array(times), **{f"c{j}": pa.array(values[:, j].astype(np.float64).round(4))
                                                       for j in range(values.shape[1])}})
    pacsv.write_csv(table, str(path))
    return path.stat().st_size


def series_cfg(length: int, stride: int, channels: int, shard_bytes: int) -> ConverterConfig:
    return dataclasses.replace(ConverterConfig.load({}), timesteps=length, features=channels, window_stride=stride,
                               series_time_column="timestamp", shard_target_bytes=shard_bytes)


def bench_pipeline(args: argparse.Namespace, work: Path) -> dict:
    from landfall_bench import realdata
    from landfall_bench.timing import pipeline_rates
    from trainer.training import pipeline
    from trainer.training.inputs import load_manifests, plan_inputs, stage

    storage = Storage()
    values = synthetic_series(args.rows, args.channels)
    write_csv(values, work / "series.csv")
    shape = (args.length, args.channels)
    convert(str(work / "series.csv"), str(work / "series"), "bench",
            series_cfg(args.length, args.stride, args.channels, args.shard_bytes), storage)
    windows = realdata.sliding_windows(values, args.length, args.stride)
    np.save(work / "windows.npy", windows)
    del windows
    cfg = dataclasses.replace(ConverterConfig.load({}), timesteps=args.length, features=args.channels,
                              shard_target_bytes=args.shard_bytes)
    precut = convert(str(work / "windows.npy"), str(work / "precut"), "bench", cfg, storage)
    (work / "windows.npy").unlink()
    datasets, counts = {}, {}
    for name in ("series", "precut"):
        inputs = load_manifests(storage, [str(work / name / "manifest.json")], shape)
        plan = plan_inputs(inputs, 1, 0, args.batch_size, args.validation_fraction, 0, holdout.BLOCKS)
        paths = [str(p) for p in stage(storage, plan, work / f"stage-{name}")]
        mean, std = inputs.feature_stats()
        counts[name] = {"windows": inputs.manifests[0].count, "train": int(sum(plan.train_counts))}
        datasets[name] = pipeline.train_dataset(plan, paths, shape, batch_size=args.batch_size,
                                            shuffle_buffer=args.shuffle_buffer, seed=0, mean=mean, std=std)
    rates = pipeline_rates(datasets, args.pipeline_batches, args.warmup_batches, args.rounds, args.batch_size)
    precut_bytes = sum(s.bytes for s in precut.shards)
    return {"rows": args.rows, "channels": args.channels, "length": args.length, "stride": args.stride,
            "batch_size": args.batch_size, "rounds": args.rounds, "counts": counts,
            "windows_per_s": rates, "series_vs_precut": round(rates["series"] / rates["precut"], 3),
            "precut_bytes_per_window": precut_bytes / precut.count}


def bench_storage(args: argparse.Namespace, work: Path, precut_per_window: float) -> dict:
    values = synthetic_series(args.storage_rows, args.channels, seed=1)
    csv_bytes = write_csv(values, work / "big.csv")
    raw = values.nbytes
    del values
    out: dict = {"rows": args.storage_rows, "channels": args.channels, "length": args.length, "csv_bytes": csv_bytes,
                 "series_float32_bytes": raw, "strides": []}
    for stride in args.strides:
        t0 = time.perf_counter()
        manifest = convert(str(work / "big.csv"), str(work / f"big-{stride}"), "bench",
                           series_cfg(args.length, stride, args.channels, args.shard_bytes), Storage())
        stored = sum(s.bytes for s in manifest.shards)
        precut = precut_per_window * manifest.count
        out["strides"].append({
            "stride": stride, "windows": manifest.count, "shards": len(manifest.shards), "stored_bytes": stored,
            "convert_s": round(time.perf_counter() - t0, 1), "stored_vs_series": round(stored / raw, 4),
            "stored_vs_csv": round(stored / csv_bytes, 4), "precut_bytes": round(precut),
            "precut_vs_stored": round(precut / stored, 2)})
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="landfall bench series", description=__doc__.split("\n", 1)[0])
    p.add_argument("--rows", type=int, default=100_000, help="rows of the pipeline's series")
    p.add_argument("--channels", type=int, default=10)
    p.add_argument("--length", type=int, default=36, help="window length (the seed's 36 timesteps)")
    p.add_argument("--stride", type=int, default=1, help="the pipeline's window stride")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--shuffle-buffer", type=int, default=16384)
    p.add_argument("--validation-fraction", type=float, default=0.1)
    p.add_argument("--pipeline-batches", type=int, default=50, help="timed batches per pipeline per round")
    p.add_argument("--warmup-batches", type=int, default=10)
    p.add_argument("--rounds", type=int, default=5, help="alternating measurement rounds (medians reported)")
    p.add_argument("--storage-rows", type=int, default=1_000_000, help="rows of the storage figure's series")
    p.add_argument("--strides", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8],
                   help="strides the storage series is converted at")
    p.add_argument("--shard-bytes", type=int, default=32 * 1024 * 1024, help="converter shard target")
    p.add_argument("--skip-storage", action="store_true", help="the input pipeline only")
    p.add_argument("--stack", action="store_true", help="instead: Daphnet end to end on a landfall up stack")
    p.add_argument("--train-timeout", type=float, default=1200, help="with --stack: seconds to wait for the job")
    p.add_argument("--plot", help="with --stack: where landfall score --plot draws the scored series")
    p.add_argument("--inline-max-bytes", type=int, help="with --stack: landfall up's inline limit (below the file's "
                   "size: the convert job's ranged tasks convert it)")
    p.add_argument("--task-bytes", type=int, help="with --stack: LANDFALL_TASK_BYTES (bytes per ranged task)")
    p.add_argument("--work-dir", help="scratch folder (default: a temporary one)")
    p.add_argument("--json", help="also write the results to this file")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.stack:
        from landfall_bench import series_stack

        return series_stack.main(args)
    with tempfile.TemporaryDirectory(prefix="landfall-bench-series-") as tmp:
        work = Path(args.work_dir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        import tensorflow as tf

        devices = [d.device_type for d in tf.config.list_physical_devices()]
        result: dict = {"tensorflow": tf.__version__, "devices": devices, "cpu_count": os.cpu_count()}
        pipe = result["pipeline"] = bench_pipeline(args, work)
        r = pipe["windows_per_s"]
        print(f"input pipeline, windows/s ({args.rows} rows x {args.channels}, windows of {args.length} every "
              f"{args.stride}, medians of {args.rounds} alternating rounds): series {r['series']:.0f}, pre-cut "
              f"{r['precut']:.0f} ({pipe['series_vs_precut']:.2f}x, goal >= 0.9x)", flush=True)
        if not args.skip_storage:
            st = result["storage"] = bench_storage(args, work, pipe["precut_bytes_per_window"])
            for s in st["strides"]:
                print(f"storage, {st['rows']:,} rows x {st['channels']} at stride {s['stride']}: {s['stored_bytes']:,} "
                      f"bytes stored = {s['stored_vs_series']:.3f}x the series ({st['series_float32_bytes']:,} bytes "
                      f"float32; goal <= 1.1x), {s['stored_vs_csv']:.3f}x its CSV ({st['csv_bytes']:,} bytes); "
                      f"pre-cut windows would be {s['precut_bytes']:,} bytes ({s['precut_vs_stored']:.1f}x)",
                      flush=True)
        print(json.dumps(result, indent=2))
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
