"""Training throughput side by side (issue #50): what a Landfall job pays for distribution.

Four contenders on the same seed-shaped instances, model, batch per worker and epochs, each a process of its own
(a strategy sets TensorFlow's context up once per process), in alternating rounds (the order reversed every other
round, so no contender always goes first on a busy machine), examples/s of the epochs after the first (which traces
the graph), the median of the rounds:

- ``plain_default``: a plain ``tf_keras`` ``fit`` of the same model on the in-memory array, default strategy: what
  a data scientist's notebook gets, the yardstick;
- ``plain_mwms``: the same script inside ``tf.distribute.MultiWorkerMirroredStrategy()`` with one worker: the tax
  the strategy alone costs;
- ``landfall_1``: ``python -m trainer.task`` with one worker on the converter's shards (``metrics.json``'s
  ``examples_per_s``);
- ``landfall_2``: the same with two workers, ``TF_CONFIG`` on loopback as the training operator sets it: the
  examples/s of the job (each step waits for the slower worker), per worker, and the scaling efficiency
  ``landfall_2 / (2 x landfall_1)``.

The ratios are taken within each round (a contender against that round's plain Keras) and their median reported: on a
shared 2-core machine the load moves from one round to the next, and moves a round's contenders alike.

``extra`` trainer flags (``--train-flags``) are passed to both Landfall contenders: what an option buys is this
bench run with and without it. ``--source DIR`` runs the Landfall contenders from another checkout (an older
commit's trainer, on the same data and beside the same plain Keras): what a change bought.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from landfall.local.emulators import free_ports

CONTENDERS = ("plain_default", "plain_mwms", "landfall_1", "landfall_2")


def steady(rates: list[float]) -> float:
    """Examples/s of the epochs after the first (the first traces the graph)."""
    return round(statistics.median(rates[1:] if len(rates) > 1 else rates), 1)


def plain_fit(data: Path, strategy: str, epochs: int, batch: int, units: list[int], kind: str, dropout: float,
              shuffle_buffer: int) -> list[float]:
    """A plain ``tf_keras`` fit of the trainer's model on the in-memory array (this process); examples/s per epoch."""
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    import tensorflow as tf
    import tf_keras as keras

    from trainer.training.model import build_model

    scope = tf.distribute.MultiWorkerMirroredStrategy() if strategy == "mwms" else tf.distribute.get_strategy()
    array = np.load(data)
    flat = array.reshape(-1, array.shape[-1])
    x = ((array - flat.mean(0)) / flat.std(0)).astype(np.float32)
    steps = len(x) // batch
    ds = (tf.data.Dataset.from_tensor_slices(x).shuffle(shuffle_buffer, seed=0).repeat()
          .batch(batch, drop_remainder=True).map(lambda v: (v, v)).prefetch(tf.data.AUTOTUNE))
    keras.utils.set_random_seed(0)
    with scope.scope():
        model = build_model(array.shape[1], array.shape[2], units=units, dropout=dropout, kind=kind)
    times: list[float] = []

    class Timer(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.t0 = time.monotonic()

        def on_epoch_end(self, epoch, logs=None):
            times.append(time.monotonic() - self.t0)

    model.fit(ds, epochs=epochs, steps_per_epoch=steps, callbacks=[Timer()], verbose=0)
    return [round(steps * batch / t, 1) for t in times]


def run_plain(data: Path, strategy: str, args) -> dict:
    cmd = [sys.executable, "-m", "landfall_bench.training", str(data), strategy, str(args.epochs),
           str(args.batch_size), ",".join(map(str, args.units)), args.model_kind, str(args.dropout),
           str(args.shuffle_buffer)]
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"plain fit ({strategy}) failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    rates = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"examples_per_s": steady(rates), "per_epoch": rates}


def run_landfall(manifest_uri: str, workers: int, work: Path, args) -> dict:
    """``workers`` real ``python -m trainer.task`` processes; the job's and each worker's examples/s."""
    job_dir = work / "job"
    ports = free_ports(workers)
    addresses = [f"127.0.0.1:{p}" for p in ports]
    cmd = [sys.executable, "-m", "trainer.task", "--manifest", manifest_uri, "--job-dir", str(job_dir),
           "--epochs", str(args.epochs), "--batch-size-per-worker", str(args.batch_size), "--min-steps-per-epoch", "0",
           "--units", ",".join(map(str, args.units)), "--model-kind", args.model_kind, "--dropout", str(args.dropout),
           "--validation-fraction", "0", "--early-stopping-patience", "0", "--warm-start", "none",
           "--verbose", "0", *args.train_flags]
    base = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    source = getattr(args, "source", None)
    if source:  # that checkout's trainer and landfall package first on the path
        root = Path(source).resolve()
        base["PYTHONPATH"] = os.pathsep.join([str(root), str(root / "functions"), base.get("PYTHONPATH", "")])
    procs = []
    for i in range(workers):
        env = dict(base)
        if workers > 1:
            env["TF_CONFIG"] = json.dumps({"cluster": {"worker": addresses}, "task": {"type": "worker", "index": i}})
        procs.append(subprocess.Popen([*cmd, "--work-dir", str(work / f"w{i}")], env=env,
                                      cwd=source or None,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    errors = [p.communicate()[1] for p in procs]
    for i, p in enumerate(procs):
        if p.returncode != 0:
            raise RuntimeError(f"landfall train, worker {i} of {workers}, failed ({p.returncode}):\n"
                               f"{errors[i][-4000:]}")
    metrics = json.loads((job_dir / "metrics.json").read_text())
    rates = [e["examples_per_s"] for e in metrics["epochs"]]
    return {"examples_per_s": steady(rates), "per_epoch": rates, "strategy": metrics.get("strategy"),
            "steps_per_epoch": metrics["steps_per_epoch"]}


def compare(args, data: Path, manifest_uri: str) -> dict:
    """Every contender, ``args.train_rounds`` alternating rounds; medians and the ratios."""
    runs: dict[str, list[dict]] = {c: [] for c in CONTENDERS}
    for r in range(args.train_rounds):
        for name in (CONTENDERS if r % 2 == 0 else CONTENDERS[::-1]):
            with tempfile.TemporaryDirectory(prefix=f"landfall-bench-{name}-") as tmp:
                if name.startswith("plain"):
                    out = run_plain(data, name.removeprefix("plain_"), args)
                else:
                    out = run_landfall(manifest_uri, int(name[-1]), Path(tmp), args)
            runs[name].append(out)
            print(f"  round {r + 1}: {name} {out['examples_per_s']:.0f} examples/s", flush=True)
    med = {c: round(statistics.median(o["examples_per_s"] for o in runs[c]), 1) for c in CONTENDERS}
    # Each round's ratios against that round's plain Keras, then their median: a round's load moves both alike.
    paired = {c: round(statistics.median(o["examples_per_s"] / p["examples_per_s"]
                                         for o, p in zip(runs[c], runs["plain_default"], strict=True)), 3)
              for c in CONTENDERS}
    scaling = round(statistics.median(two["examples_per_s"] / (2 * one["examples_per_s"])
                                      for one, two in zip(runs["landfall_1"], runs["landfall_2"], strict=True)), 3)
    return {
        "examples_per_s": med,
        "landfall_2_per_worker": round(med["landfall_2"] / 2, 1),
        "ratios_to_plain_default": paired,
        "scaling_efficiency_1_to_2": scaling,
        "strategies": {c: runs[c][0].get("strategy") for c in ("landfall_1", "landfall_2")},
        "rounds": runs,
    }


def report(out: dict, where: str) -> None:
    med, ratio = out["examples_per_s"], out["ratios_to_plain_default"]
    print(f"training on {where}, examples/s (median of the rounds; x plain Keras under the default strategy in the "
          f"same round, median of the rounds):")
    print(f"  plain Keras, default strategy      {med['plain_default']:>9.0f}  1.00x")
    print(f"  plain Keras, MWMS with one worker  {med['plain_mwms']:>9.0f}  {ratio['plain_mwms']:.2f}x")
    print(f"  landfall train, 1 worker ({out['strategies']['landfall_1']}) {med['landfall_1']:>9.0f}  "
          f"{ratio['landfall_1']:.2f}x (goal >= 0.95x)")
    print(f"  landfall train, 2 workers ({out['strategies']['landfall_2']}) {med['landfall_2']:>9.0f}  "
          f"{ratio['landfall_2']:.2f}x; per worker {out['landfall_2_per_worker']:.0f}; scaling efficiency 1 -> 2 "
          f"workers {out['scaling_efficiency_1_to_2']:.2f}", flush=True)


if __name__ == "__main__":  # one plain contender, in a process of its own (run_plain)
    path, strat, epochs, batch, units, kind, dropout, shuffle = sys.argv[1:9]
    print(json.dumps(plain_fit(Path(path), strat, int(epochs), int(batch), [int(u) for u in units.split(",")], kind,
                               float(dropout), int(shuffle))))
