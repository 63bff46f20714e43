"""``landfall bench train``: input pipeline and training throughput on seed-shaped data.

One run prints (and optionally writes as JSON):

1. Input pipeline, examples/s over the same instances, each pipeline shuffling, batching and
   normalising the same way:
   - ``landfall``: the trainer's own pipeline (``trainer.training.pipeline.train_dataset``) over TFRecord shards
     written by the real converter: interleaved reads, batch first, one ``parse_example`` +
     ``decode_raw`` per batch;
   - ``in_memory``: the same array fed with ``from_tensor_slices`` (goal: landfall >= 0.8x this);
   - ``per_record``: the tutorial way, ``parse_single_example`` on every record (ratio reported).
2. Training, examples/s side by side (``landfall_bench.training``, issue #50): plain ``tf_keras`` under the
   default strategy and under MultiWorkerMirroredStrategy with one worker, ``landfall train`` with 1 and 2
   workers (real ``python -m trainer.task`` processes on the shards), the ratios and the scaling efficiency
   (goal: 1 worker >= 0.95x plain Keras), medians of ``--train-rounds`` alternating rounds.

3. Epoch coverage on uneven arrivals (the plan only, no TensorFlow): for 20,000 + 100, 1 + 5,000 and 37
   arrivals of random sizes on 2 and 3 workers, the training examples one epoch takes, as a share of the
   training instances, for the balanced plan (``trainer.training.inputs.plan_inputs``) and for the usual way
   (whole shards dealt round-robin, ``min(per-worker instances) // batch`` steps), and the balanced plan
   against the floor: the most any epoch of whole global batches can take, ``train - train % global``
   (goal: >= 0.99).

4. With ``--convergence`` instead (``landfall_bench.convergence``): a fixed ceiling of epochs against early stopping
   on a real series (Daphnet), the final held-out loss, epochs run and GPU-seconds of each.

Runs unchanged on a GPU machine (the GRUs then use cuDNN); nothing here pins a device.
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tempfile
import time
from pathlib import Path

import numpy as np

from landfall.arrival.config import ConverterConfig
from landfall.arrival.converter import convert
from landfall.core.contracts.records import FEATURE_KEY
from landfall.core.services.storage import Storage
from landfall.local.synthetic import time_series
from landfall_bench import timing, training

SHAPE = (36, 10)  # the seed's instances: 36 timesteps x 10 features


def bench_pipeline(args, manifest_uri: str, array: np.ndarray) -> dict:
    import tensorflow as tf

    from trainer.training import pipeline
    from trainer.training.inputs import load_manifests, plan_inputs, stage

    storage = Storage()
    inputs = load_manifests(storage, [manifest_uri], SHAPE)
    plan = plan_inputs(inputs, 1, 0, args.batch_size, 0.0, seed=0)
    paths = [str(p) for p in stage(storage, plan, Path(args.work_dir) / "stage")]
    mean, std = inputs.feature_stats()
    b, shuffle = args.batch_size, args.shuffle_buffer

    ours = pipeline.train_dataset(plan, paths, SHAPE, batch_size=b, shuffle_buffer=shuffle, seed=0, mean=mean, std=std)

    offset, scale = tf.constant(mean, tf.float32), tf.constant([1 / s for s in std], tf.float32)

    def norm(x):
        x = (x - offset) * scale
        return x, x

    memory = (tf.data.Dataset.from_tensor_slices(array).shuffle(shuffle, seed=0).repeat()
              .batch(b, drop_remainder=True).map(norm, num_parallel_calls=tf.data.AUTOTUNE)
              .prefetch(tf.data.AUTOTUNE))

    spec = {FEATURE_KEY: tf.io.FixedLenFeature([], tf.string)}

    def parse_one(record):
        raw = tf.io.parse_single_example(record, spec)[FEATURE_KEY]
        return tf.reshape(tf.io.decode_raw(raw, tf.float32), SHAPE)

    per_record = (tf.data.TFRecordDataset(paths, num_parallel_reads=tf.data.AUTOTUNE)
                  .map(parse_one, num_parallel_calls=tf.data.AUTOTUNE).shuffle(shuffle, seed=0).repeat()
                  .batch(b, drop_remainder=True).map(norm, num_parallel_calls=tf.data.AUTOTUNE)
                  .prefetch(tf.data.AUTOTUNE))
    out: dict = timing.pipeline_rates({"landfall": ours, "in_memory": memory, "per_record": per_record},
                       args.pipeline_batches, args.warmup_batches, args.rounds, b)
    out["landfall_vs_in_memory"] = round(out["landfall"] / out["in_memory"], 3)
    out["landfall_vs_per_record"] = round(out["landfall"] / out["per_record"], 3)
    return out


UNEVEN = {"20000+100": [20_000, 100], "1+5000": [1, 5_000]}


def _uneven_sets() -> dict[str, list[int]]:
    rng = np.random.default_rng(37)
    return {**UNEVEN, "37-random": [int(n) for n in np.exp(rng.uniform(0, np.log(20_000), 37)).round().clip(1)]}


def epoch_coverage(batch: int, validation_fraction: float = 0.1, seed: int = 0) -> list[dict]:
    """Per set and worker count: examples per epoch / training instances, ours and the usual way."""
    from trainer.training.inputs import Inputs, ShardRef, is_validation, plan_inputs

    rows = []
    for name, arrivals in _uneven_sets().items():
        shards = tuple(ShardRef(f"gs://b/tfrecords/d/a{i:02d}/part-0.tfrecord", n, n * 1500, "",
                                f"gs://b/tfrecords/d/a{i:02d}/manifest.json") for i, n in enumerate(arrivals))
        inputs = Inputs((), (), shards, SHAPE)
        for workers in (2, 3):
            plan = plan_inputs(inputs, workers, 0, batch, validation_fraction, seed)
            train = sum(plan.train_counts)
            global_batch = batch * workers
            ours = plan.steps_per_epoch * global_batch
            # The usual way: whole shards round-robin, as many steps as the smallest worker's share allows.
            held = [int(is_validation(np.arange(s.count, dtype=np.int64), salt, plan.threshold).sum())
                    for s, salt in zip(shards, plan.salts, strict=True)]
            share = [sum(s.count - h for k, (s, h) in enumerate(zip(shards, held, strict=True)) if k % workers == w)
                     for w in range(workers)]
            usual = (min(share) // batch) * global_batch
            floor = train - train % global_batch
            rows.append({"set": name, "workers": workers, "batch_per_worker": batch, "train_instances": train,
                         "ours": round(ours / train, 4), "usual": round(usual / train, 4),
                         "ours_vs_floor": round(ours / floor, 4) if floor else None})
    return rows


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="landfall bench train", description=__doc__.split("\n", 1)[0])
    p.add_argument("--instances", type=int, default=131072, help="seed-shaped (36, 10) instances")
    p.add_argument("--batch-size", type=int, default=1024, help="per worker, as in the seed")
    p.add_argument("--units", type=lambda s: [int(u) for u in s.split(",")], default=[128, 32])
    p.add_argument("--epochs", type=int, default=5, help="training epochs per contender (first is warm-up)")
    p.add_argument("--shuffle-buffer", type=int, default=16384)
    p.add_argument("--pipeline-batches", type=int, default=100, help="timed batches per pipeline per round")
    p.add_argument("--rounds", type=int, default=3, help="alternating measurement rounds")
    p.add_argument("--warmup-batches", type=int, default=20, help="untimed batches before each round")
    p.add_argument("--shard-bytes", type=int, default=32 * 1024 * 1024, help="converter shard target")
    p.add_argument("--skip-train", action="store_true", help="input pipeline only")
    p.add_argument("--skip-pipeline", action="store_true", help="training only")
    p.add_argument("--train-instances", type=int, default=12_000,
                   help="seed-shaped instances of the training comparison (issue #50's 12,000)")
    p.add_argument("--train-rounds", type=int, default=3, help="alternating rounds of the training comparison")
    p.add_argument("--model-kind", choices=["gru", "dense"], default="gru", help="the model of the training comparison")
    p.add_argument("--dropout", type=float, default=0.2, help="the trainer's default")
    p.add_argument("--train-flags", type=lambda s: s.split(), default=[],
                   help="extra trainer flags for both landfall contenders, e.g. '--steps-per-execution 4'")
    p.add_argument("--source", help="the checkout whose trainer the landfall contenders run (default: this one)")
    p.add_argument("--coverage-batch", type=int, default=128, help="per-worker batch for the coverage table "
                   "(the demo's; at the seed's 1024 the small sets give the usual way no step at all)")
    p.add_argument("--arrivals", help="instead: start-up and one epoch against the arrival count, before and after "
                   "compaction, e.g. 1,2000,10000 (landfall_bench.arrivals)")
    p.add_argument("--arrival-instances", type=int, default=100_000,
                   help="with --arrivals: the dataset's instances at every arrival count")
    p.add_argument("--convergence", action="store_true",
                   help="instead: a fixed ceiling of epochs against early stopping on a real series (Daphnet)")
    p.add_argument("--convergence-epochs", type=int, default=200, help="the ceiling (past convergence)")
    p.add_argument("--convergence-seeds", type=int, default=3, help="runs of each contender (medians reported)")
    p.add_argument("--convergence-window", type=int, default=32, help="rows per window")
    p.add_argument("--convergence-stride", type=int, default=2, help="rows between windows")
    p.add_argument("--convergence-units", default="32,8")
    p.add_argument("--convergence-batch", type=int, default=64)
    p.add_argument("--convergence-learning-rate", type=float, default=0.01)
    p.add_argument("--work-dir", help="scratch folder (default: a temporary one)")
    p.add_argument("--json", help="also write the results to this file")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.arrivals:
        from landfall_bench import arrivals

        return arrivals.main(args)
    if args.convergence:
        from landfall_bench import convergence

        return convergence.main(args)
    coverage = epoch_coverage(args.coverage_batch)
    print(f"epoch coverage (examples per epoch / training instances), batch {args.coverage_batch} per worker:")
    for row in coverage:
        dies = " (no step: the job fails)" if not row["usual"] else ""
        print(f"  {row['set']:>10} on {row['workers']} workers: balanced {row['ours']:.4f}, usual way "
              f"(round-robin shards) {row['usual']:.4f}{dies}; balanced vs the floor of whole global batches "
              f"{row['ours_vs_floor']:.4f} (goal >= 0.99)", flush=True)
    with tempfile.TemporaryDirectory(prefix="landfall-bench-train-") as tmp:
        args.work_dir = args.work_dir or tmp
        work = Path(args.work_dir)
        work.mkdir(parents=True, exist_ok=True)
        array = time_series(args.instances, *SHAPE)
        np.save(work / "arrival.npy", array)
        cfg = ConverterConfig.load({}, shard_target_bytes=args.shard_bytes)
        t0 = time.perf_counter()
        manifest = convert(str(work / "arrival.npy"), str(work / "tfrecords"), "bench", cfg, Storage())
        manifest_uri = str(work / "tfrecords" / "manifest.json")
        import tensorflow as tf

        devices = [d.device_type for d in tf.config.list_physical_devices()]
        result: dict = {
            "instances": args.instances, "shape": list(SHAPE), "batch_size": args.batch_size,
            "units": args.units, "shards": len(manifest.shards), "convert_s": round(time.perf_counter() - t0, 2),
            "devices": devices, "gpus": devices.count("GPU"), "tensorflow": tf.__version__,
            "cpu_count": os.cpu_count(), "epoch_coverage": coverage,
        }
        print(f"data: {args.instances} x {SHAPE} float32 in {len(manifest.shards)} shards; devices {devices}",
              flush=True)
        if not args.skip_pipeline:
            pipe = bench_pipeline(args, manifest_uri, array)
            result["pipeline_examples_per_s"] = pipe
            print(f"input pipeline, examples/s: landfall {pipe['landfall']:.0f}, in-memory {pipe['in_memory']:.0f} "
                  f"({pipe['landfall_vs_in_memory']:.2f}x, goal >= 0.8x), per-record parse_single_example "
                  f"{pipe['per_record']:.0f} (landfall is {pipe['landfall_vs_per_record']:.2f}x)", flush=True)
        if not args.skip_train:
            subset = array[:args.train_instances]
            np.save(work / "train.npy", subset)
            convert(str(work / "train.npy"), str(work / "train-tfrecords"), "bench", cfg, Storage())
            where = f"{result['gpus']} GPU" if result["gpus"] else f"CPU ({os.cpu_count()} cores)"
            print(f"training: {len(subset)} x {SHAPE}, {args.model_kind} {args.units}, batch {args.batch_size} per "
                  f"worker, {args.epochs} epochs, {args.train_rounds} rounds", flush=True)
            out = training.compare(args, work / "train.npy", str(work / "train-tfrecords" / "manifest.json"))
            result["training"] = {k: v for k, v in out.items()}
            training.report(out, where)
        print(json.dumps(result, indent=2))
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
