"""``landfall demo``: the whole flow on this machine, followed stage by stage until the jobs succeed.

1. start the stack (``landfall.local.stack``) under ``<out>/stack``;
2. upload a seed-shaped synthetic dataset to ``incoming/<dataset>/`` (the GCS notification drives
   everything from there);
3. follow every stage live: shards converted, request published, TFJob created and its state, each
   epoch's loss and time per worker (from the replicas' logs);
4. while that job trains, upload a second arrival: it waits as a pending request (no TFJob waits
   suspended), and one follow-up job is released when the first ends, training on both arrivals;
5. write ``metrics/<job>.json``, ``training.png`` and ``summary.txt`` to ``--out``.

A stage that fails, or makes no progress for ``--stage-timeout`` seconds, ends the demo with exit 1 and
a line naming the stage.
"""

from __future__ import annotations

import dataclasses
import io
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from landfall.core.errors import LandfallError
from landfall.core.messages import JobInputs
from landfall.core.pubsub import PubSub
from landfall.core.storage import Storage
from landfall.local import plots
from landfall.local.stack import Stack, StackConfig, wait_for_signal
from landfall.local.synthetic import time_series
from landfall.submit import tfjob
from landfall.submit.backends.local import LocalBackend


class StageFailed(LandfallError):
    def __init__(self, stage: str, detail: str):
        super().__init__(f"stage '{stage}' failed: {detail}")
        self.stage = stage


@dataclasses.dataclass
class DemoOptions:
    instances: int = 8192
    workers: int = 2
    epochs: int = 5
    batch_size_per_worker: int = 128
    units: str = "128,32"
    dataset: str = "demo"
    out: str = "./landfall-demo"
    stage_timeout: float = 150.0
    keep_running: bool = False
    follow_up: bool = True


class Follower:
    """Polls the bucket, the request topic, the local backend and the replicas' logs; prints what changed."""

    def __init__(self, stack: Stack, opts: DemoOptions, watch_subscription: str):
        self.stack, self.opts = stack, opts
        self.storage = Storage(stack.cfg.project)
        self.pubsub = PubSub(stack.cfg.project)
        self.backend = LocalBackend(stack.info["local_state"])
        self.watch = watch_subscription
        self.t0 = time.monotonic()
        self.seen: set[str] = set()
        self.log_offsets: dict[Path, int] = {}
        self.epoch_seen: dict[str, int] = {}
        self.states: dict[str, str] = {}
        self.requests: list[dict[str, Any]] = []
        self.progress_at = time.monotonic()

    def say(self, text: str) -> None:
        print(f"[{time.monotonic() - self.t0:6.1f}s] {text}", flush=True)
        self.progress_at = time.monotonic()

    def manifests(self) -> list[str]:
        prefix = f"gs://{self.stack.cfg.bucket}/tfrecords/{self.opts.dataset}/"
        return self.storage.list(prefix, suffix="/manifest.json")

    def poll(self) -> None:
        from landfall.core.messages import Manifest

        for uri in self.manifests():
            if uri not in self.seen:
                self.seen.add(uri)
                m = Manifest.from_json(self.storage.read_bytes(uri), uri)
                self.say(f"converted {m.source.name}: {m.count} instances of {m.shape} in {len(m.shards)} shard(s)")
        for msg in self.pubsub.pull(self.watch, timeout_s=0.5):
            body = json.loads(msg.data)
            self.requests.append(body)
            self.say(f"training request published: {body['request_id']} ({body['reason']})")
            self.pubsub.ack(self.watch, [msg.ack_id])
        for job in self.backend.list(self.opts.dataset):
            name, state = tfjob.name_of(job), tfjob.state(job)
            if self.states.get(name) != state:
                if name not in self.states:
                    after = tfjob.annotations(job).get(tfjob.AFTER_ANNOTATION)
                    self.say(f"TFJob {name} created" + (f" as the follow-up of {after}" if after else "")
                             + f" ({job['spec']['tfReplicaSpecs']['Worker']['replicas']} workers)")
                self.states[name] = state
                inputs = self._inputs(job) if state in ("Running", "Suspended") else None
                self.say(f"TFJob {name}: {state}" + (f", covering {len(inputs.requests)} request(s), "
                                                      f"{len(inputs.manifests)} manifest(s)" if inputs else ""))
            self._epochs(name)

    def _inputs(self, job: dict) -> JobInputs | None:
        try:
            return JobInputs.from_json(self.storage.read_bytes(tfjob.inputs_of(job)))
        except (LandfallError, ValueError):
            return None

    def _epochs(self, name: str) -> None:
        folder = Path(self.stack.info["local_state"]) / "logs" / name
        for log in sorted(folder.glob("worker-*.log")):
            offset = self.log_offsets.get(log, 0)
            with open(log, "rb") as fh:
                fh.seek(offset)
                data = fh.read()
            end = data.rfind(b"\n") + 1
            self.log_offsets[log] = offset + end
            for line in data[:end].splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if entry.get("message") == "epoch":
                    self.epoch_seen[name] = max(self.epoch_seen.get(name, 0), int(entry["epoch"]))
                    self.say(f"{name} worker {entry.get('worker')} epoch {entry['epoch']}: loss {entry['loss']:.4f} "
                             f"val_loss {entry.get('val_loss', float('nan')):.4f} in {entry['wall_s']:.1f}s "
                             f"({entry.get('examples_per_s', 0):.0f} examples/s)")

    def jobs(self) -> list[dict[str, Any]]:
        return self.backend.list(self.opts.dataset)

    def wait(self, stage: str, done: Any) -> Any:
        """Polls until ``done()`` is truthy; fails the stage on a dead process or no progress in time."""
        self.progress_at = time.monotonic()
        while True:
            self.poll()
            result = done()
            if result:
                return result
            failed = [tfjob.name_of(j) for j in self.jobs() if tfjob.state(j) == "Failed"]
            if failed:
                raise StageFailed(stage, f"TFJob {failed[0]} failed (logs: {self.stack.info['local_state']}/logs)")
            dead = self.stack.check()
            if dead:
                raise StageFailed(stage, f"{dead} stopped")
            if time.monotonic() - self.progress_at > self.opts.stage_timeout:
                raise StageFailed(stage, f"no progress for {self.opts.stage_timeout:.0f}s "
                                  f"(logs: {self.stack.cfg.state / 'logs'})")
            time.sleep(0.5)


def upload(storage: Storage, bucket: str, dataset: str, name: str, data: np.ndarray) -> str:
    buf = io.BytesIO()
    np.save(buf, data)
    uri = f"gs://{bucket}/incoming/{dataset}/{name}"
    storage.write_bytes(uri, buf.getvalue())
    return uri


def run(opts: DemoOptions) -> int:
    out = Path(opts.out)
    (out / "metrics").mkdir(parents=True, exist_ok=True)
    trainer_args = ("--units", opts.units, "--verbose", "0")
    cfg = StackConfig.load(state_dir=str(out / "stack"), workers=opts.workers, epochs=opts.epochs,
                           batch_size_per_worker=opts.batch_size_per_worker, trainer_args=trainer_args)
    started = time.monotonic()
    stack = Stack(cfg)
    try:
        print(f"starting the stack under {cfg.state} ...", flush=True)
        stack.start()
        print(f"  Pub/Sub emulator {stack.info['pubsub_emulator_host']}, fake-gcs-server "
              f"{stack.info['storage_emulator_host']}, bucket gs://{cfg.bucket}", flush=True)
        watch = f"landfall-demo-watch-{int(time.time())}"
        PubSub(cfg.project).ensure_subscription(watch, cfg.request_topic)
        follower = Follower(stack, opts, watch)
        storage = follower.storage
        first = upload(storage, cfg.bucket, opts.dataset, "part-1.npy", time_series(opts.instances, seed=1))
        follower.say(f"uploaded {opts.instances} x 36 x 10 instances to {first}")
        follower.wait("convert", lambda: len(follower.seen) >= 1)
        follower.wait("request", lambda: len(follower.requests) >= 1)
        follower.wait("tfjob", lambda: follower.jobs())
        expected_jobs = 1
        if opts.follow_up:
            follower.wait("training", lambda: any(v >= 1 for v in follower.epoch_seen.values())
                          or all(tfjob.is_finished(j) for j in follower.jobs()))
            second = upload(storage, cfg.bucket, opts.dataset, "part-2.npy",
                            time_series(max(opts.instances // 2, 64), seed=2))
            follower.say(f"second arrival while training: {second}")
            follower.wait("follow-up", lambda: len(follower.jobs()) >= 2)
            expected_jobs = 2
        follower.wait("training", lambda: len(follower.jobs()) >= expected_jobs
                      and all(tfjob.state(j) == "Succeeded" for j in follower.jobs()))
        report = write_report(out, stack, follower, time.monotonic() - started)
        print("\n" + report)
        if opts.keep_running:
            print(f"\nthe stack keeps running (Ctrl-C stops it):\n{stack.exports()}", flush=True)
            wait_for_signal(stack)
        return 0
    except StageFailed as exc:
        print(f"landfall demo: {exc}", file=sys.stderr)
        return 1
    except LandfallError as exc:
        print(f"landfall demo: stage 'stack' failed: {exc}", file=sys.stderr)
        return 1
    finally:
        stack.stop()


def write_report(out: Path, stack: Stack, follower: Follower, elapsed_s: float) -> str:
    jobs = sorted(follower.jobs(), key=tfjob.created_at)
    metrics = []
    for job in jobs:
        name = tfjob.name_of(job)
        raw = follower.storage.read_bytes(tfjob.job_dir(stack.cfg.bucket, name) + "/metrics.json")
        (out / "metrics" / f"{name}.json").write_bytes(raw)
        metrics.append(json.loads(raw))
    png = plots.training_curves(metrics, out / "training.png")
    lines = [f"Landfall demo: {len(jobs)} job(s) for dataset '{follower.opts.dataset}' in {elapsed_s:.0f}s"]
    for job, m in zip(jobs, metrics, strict=True):
        epochs = m.get("epochs") or []
        last = epochs[-1] if epochs else {}
        after = tfjob.annotations(job).get(tfjob.AFTER_ANNOTATION)
        lines.append(
            f"- {m['job']}: {tfjob.state(job)}, {m['num_workers']} workers x batch {m['batch_size_per_worker']} "
            f"(global {m['global_batch_size']}), {len(m.get('manifests') or [])} manifest(s), "
            f"{len(epochs)} epochs, final loss {last.get('loss', float('nan')):.4f} "
            f"val_loss {last.get('val_loss', float('nan')):.4f}, median epoch "
            f"{np.median([e['wall_s'] for e in epochs]) if epochs else float('nan'):.1f}s, restarts {m.get('restarts')}"
            + (f", follow-up of {after} (coalesced arrival)" if after else ""))
    lines += [f"metrics: {out / 'metrics'}", f"plot:    {png}", f"state:   {stack.cfg.state}"]
    text = "\n".join(lines)
    (out / "summary.txt").write_text(text + "\n")
    return text
