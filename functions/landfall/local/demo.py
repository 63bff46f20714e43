"""``landfall demo``: the whole flow on this machine, followed stage by stage until the jobs succeed.

1. start the stack (``landfall.local.stack``) under ``<out>/stack``;
2. upload a seed-shaped synthetic dataset to ``incoming/<dataset>/`` (the GCS notification drives
   everything from there);
3. follow every stage live: shards converted, request published, TFJob created and its state, each
   epoch's loss, once per job, with the examples every worker trained on and the slowest worker's time
   (from the job's metrics.json), and where each job's weights came from (its warm start);
4. while that job trains, upload a second arrival: it waits as a pending request (no TFJob waits
   suspended), and one follow-up job is released when the first ends, training on both arrivals;
5. name the dataset's champion and each job's verdict, then score a small new file with a few spiked
   instances with the champion and report how many were flagged; then upload that file as a new arrival and wait
   for the scorer's detection message (``landfall.detect``: every arrival scored by the champion on arrival);
6. write ``metrics/<job>.json``, ``training.png`` (losses, epoch times, the scored file's error histogram
   with the threshold), ``report.html`` (``landfall report`` of the demo's bucket), ``scores/`` and
   ``summary.txt`` to ``--out``; the summary compares the follow-up's
   first-epoch validation loss with its predecessor's last (a warm start continues where the predecessor
   ended instead of starting over).

A stage that fails, or makes no progress for ``--stage-timeout`` seconds, ends the demo with exit 1 and
a line naming the stage.
"""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from landfall.core.artifacts import champion
from landfall.core.contracts import layout
from landfall.core.contracts.layout import Layout
from landfall.core.contracts.messages import JobInputs
from landfall.core.errors import LandfallError
from landfall.core.services.pubsub import PubSub
from landfall.core.services.storage import Storage
from landfall.local import detection_feed, emulators, plots
from landfall.local.anomalies import InjectedScore, score_injected
from landfall.local.stack import Stack, StackConfig, read_running, wait_for_signal
from landfall.local.synthetic import time_series
from landfall.submit import engine, jobmeta
from landfall.submit.backends import open_backend
from landfall.submit.config import JobConfig
from landfall.views import page
from landfall.views.reader import Reader


class StageFailed(LandfallError):
    def __init__(self, stage: str, detail: str):
        super().__init__(f"stage '{stage}' failed: {detail}")
        self.stage = stage


@dataclasses.dataclass
class DemoOptions:
    # The default shape (issue #67): every stage shown (both jobs, the warm start, the verdict, the detection) within
    # 150 s on a quiet 2-core machine, the seed's model kept; docs/benchmarks.md, "The demo's time".
    instances: int = 4096
    workers: int = 2
    epochs: int = 3
    batch_size_per_worker: int = 128
    units: str = "128,32"
    min_skill: float | None = None  # the verdict's floor (trainer.judging.floor); None: the trainer's default (0.1)
    engine: str = "tfjob"  # or jobset: the same flow with JobSets
    dataset: str = "demo"
    out: str = "./landfall-demo"
    stage_timeout: float = 150.0
    keep_running: bool = False
    follow_up: bool = True
    # The first upload (4,096 instances, 5.9 MB) is over this: it takes the large-file path, a Cloud Run job
    # execution whose tasks (local processes) convert a third each; the second (2.9 MB) converts in the function.
    inline_max_bytes: int | None = 4_000_000
    task_bytes: int | None = 2_000_000


class Follower:
    """Polls the bucket, the request topic, the local backend and the replicas' logs; prints what changed."""

    def __init__(self, stack: Stack, opts: DemoOptions, watch_subscription: str):
        self.stack, self.opts = stack, opts
        self.storage = Storage(stack.cfg.project)
        self.pubsub = PubSub(stack.cfg.project)
        self.backend = open_backend(JobConfig.load(
            {}, project=stack.cfg.project, bucket=stack.cfg.bucket, engine=stack.cfg.engine,
            backend=stack.info["backend"], local_state=stack.info["local_state"],
            vertex_endpoint=stack.info["vertex_endpoint"]))
        self.watch = watch_subscription
        self.t0 = time.monotonic()
        self.seen: set[str] = set()
        self.warm_said: set[str] = set()
        self.dispatched: set[str] = set()
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
        from landfall.core.contracts.messages import Manifest

        for uri in self.storage.list(f"gs://{self.stack.cfg.bucket}/tfrecords/{self.opts.dataset}/",
                                     suffix="/dispatch.json"):
            if uri not in self.dispatched:
                self.dispatched.add(uri)
                doc = json.loads(self.storage.read_bytes(uri))
                self.say(f"{doc.get('source', {}).get('name', uri)} is over the function's inline limit: Cloud Run job "
                         f"{doc.get('job')} converts it with {doc.get('task_count')} task(s) (here: local processes)")
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
            name, state = jobmeta.name_of(job), engine.state(job)
            if self.states.get(name) != state:
                if name not in self.states:
                    after = jobmeta.annotations(job).get(jobmeta.AFTER_ANNOTATION)
                    self.say(f"{job['kind']} {name} created" + (f" as the follow-up of {after}" if after else "")
                             + f" ({engine.workers_of(job)} workers)")
                self.states[name] = state
                inputs = self._inputs(job) if state in ("Running", "Suspended") else None
                self.say(f"{job['kind']} {name}: {state}" + (f", covering {len(inputs.requests)} request(s), "
                                                      f"{len(inputs.manifests)} manifest(s)" if inputs else ""))
            self._epochs(name)

    def _inputs(self, job: dict) -> JobInputs | None:
        try:
            return JobInputs.from_json(self.storage.read_bytes(jobmeta.inputs_of(job)))
        except (LandfallError, ValueError):
            return None

    def _epochs(self, name: str) -> None:
        """One line per finished epoch of the job (not one per worker), from its metrics.json."""
        try:
            m = json.loads(self.storage.read_bytes(jobmeta.job_dir(self.stack.cfg.bucket, name) + "/metrics.json"))
        except (LandfallError, ValueError):
            return  # not written yet
        if name not in self.warm_said and "warm_start" in m:
            self.warm_said.add(name)
            reason = (m.get("warm_start") or {}).get("reason", "")
            self.say(f"{name} starts from {m['warm_start_from']} ({reason})" if m.get("warm_start_from")
                     else f"{name} starts from fresh weights ({reason})")
        for e in m.get("epochs") or []:
            if int(e["epoch"]) <= self.epoch_seen.get(name, 0):
                continue
            self.epoch_seen[name] = int(e["epoch"])
            shares = e.get("examples_per_worker") or []
            self.say(f"{name} epoch {e['epoch']}: loss {e['loss']:.4f} val_loss {_fmt(e.get('val_loss'))}, "
                     f"{e.get('examples', 0)} examples ({' + '.join(map(str, shares)) or '?'} on "
                     f"{len(shares)} workers), slowest worker {e.get('slowest_worker', 0)} "
                     f"{e.get('train_s', 0.0):.1f}s ({e.get('examples_per_s') or 0:.0f} examples/s)")

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
            failed = [jobmeta.name_of(j) for j in self.jobs() if engine.state(j) == "Failed"]
            if failed:
                raise StageFailed(stage, f"{self.backend.api.kind} {failed[0]} failed "
                                         f"(logs: {self.stack.info['local_state']}/logs)")
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


def fresh(out: Path) -> None:
    """Each demo tells its story from an empty bucket: an earlier run's stack state under ``<out>/stack`` (its bucket,
    topics and jobs) and outputs (``metrics/``, ``scores/``) are removed first, else its jobs would join this story
    (a second ``make demo`` used to end in "metrics.json: not found"). A stack still running there is refused."""
    if read_running(out / "stack"):
        raise LandfallError(f"a stack is running on {out / 'stack'} (landfall up, or a demo with --keep-running): "
                            "stop it first")
    for name in ("stack", "metrics", "scores"):
        shutil.rmtree(out / name, ignore_errors=True)


def run(opts: DemoOptions) -> int:
    out = Path(opts.out)
    try:
        fresh(out)
    except LandfallError as exc:
        print(f"landfall demo: stage 'stack' failed: {exc}", file=sys.stderr)
        return 1
    (out / "metrics").mkdir(parents=True, exist_ok=True)
    trainer_args = ("--units", opts.units, "--verbose", "0",
                    *(("--min-skill", str(opts.min_skill)) if opts.min_skill is not None else ()))
    cfg = StackConfig.load(state_dir=str(out / "stack"), workers=opts.workers, epochs=opts.epochs, engine=opts.engine,
                           batch_size_per_worker=opts.batch_size_per_worker, trainer_args=trainer_args,
                           inline_max_bytes=opts.inline_max_bytes, task_bytes=opts.task_bytes)
    started = time.monotonic()
    stack = Stack(cfg)
    try:
        print(f"starting the stack under {cfg.state} ...", flush=True)
        stack.start()
        print(f"  Pub/Sub emulator {stack.info['pubsub_emulator_host']}, fake-gcs-server "
              f"{stack.info['storage_emulator_host']}, bucket gs://{cfg.bucket}", flush=True)
        watch = f"landfall-demo-watch-{int(time.time())}"
        emulators.ready_call("Pub/Sub emulator", f"create subscription {watch}",
                             lambda: PubSub(cfg.project).ensure_subscription(watch, cfg.request_topic))
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
                          or all(engine.is_finished(j) for j in follower.jobs()))
            second = upload(storage, cfg.bucket, opts.dataset, "part-2.npy",
                            time_series(max(opts.instances // 2, 64), seed=2))
            follower.say(f"second arrival while training: {second}")
            follower.wait("follow-up", lambda: len(follower.jobs()) >= 2)
            expected_jobs = 2
        follower.wait("training", lambda: len(follower.jobs()) >= expected_jobs
                      and all(engine.state(j) == "Succeeded" for j in follower.jobs()))
        scored = judge_and_score(follower, stack, opts, out)
        trained = follower.jobs()  # the injected file below is an arrival too: its own job is not the demo's
        detected = detect_injected(follower, stack, opts, scored)
        report = write_report(out, stack, follower, time.monotonic() - started, scored, trained, detected)
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


def judge_and_score(follower: Follower, stack: Stack, opts: DemoOptions, out: Path) -> InjectedScore | None:
    """Names the dataset's champion, then scores a small new file with injected anomalies with it."""
    root = champion.bucket_root(stack.cfg.bucket)
    current, _ = champion.read(follower.storage, root, opts.dataset)
    if current is None:
        follower.say(f"no champion for dataset {opts.dataset} (no job was evaluated)")
        return None
    follower.say(f"champion of {opts.dataset}: {current.run} ({current.model}), loss {_fmt(current.loss)}")
    # Drawn as the training data was (same generator and size, so the same amplitudes), without anomalies.
    normal = time_series(opts.instances, seed=1, anomaly_fraction=0.0)[:512]
    scored = score_injected(current.model, out / "scores", normal=normal, storage=follower.storage)
    follower.say(f"scored {len(scored.errors)} new instances, {len(scored.injected)} of them spiked: "
                 f"{scored.caught} of {len(scored.injected)} flagged, {scored.false_alarms} false alarms, "
                 f"threshold {scored.threshold:.4g} (p{(scored.quantile or 0) * 100:g} of the held-out errors; "
                 f"scores: {scored.out})")
    return scored


def detect_injected(follower: Follower, stack: Stack, opts: DemoOptions,
                    scored: InjectedScore | None) -> str | None:
    """Uploads the file with injected anomalies as a new arrival and waits for its detection message: the line
    that says what the champion found, how many of the injected instances it names, and how long it took."""
    if scored is None:
        return None
    name = f"incoming/{opts.dataset}/injected.npy"
    uri = layout.gs(stack.cfg.bucket, name)
    t0 = time.time()
    follower.storage.upload(scored.src, uri)
    aid = layout.arrival_id(name, follower.storage.stat(uri).generation)
    follower.say(f"uploaded the file with {len(scored.injected)} injected anomalies as arrival {aid}")
    try:
        message, at = detection_feed.wait_for(follower.pubsub, stack.cfg.detections_topic, aid, opts.stage_timeout)
    except detection_feed.NoDetection as exc:
        raise StageFailed("detection", f"{exc} (scorer log: {stack.cfg.state / 'logs'})") from None
    caught = set()
    for r in message.get("ranges") or []:
        caught |= set(range(int(r["first_row"]), int(r["last_row"]) + 1)) & set(scored.injected)
    line = (detection_feed.describe(message) + f"; {len(caught)} of the {len(scored.injected)} injected instances "
            f"in its ranges, {at - t0:.1f} s after the upload")
    follower.say(line)
    return line


def write_report(out: Path, stack: Stack, follower: Follower, elapsed_s: float,
                 scored: InjectedScore | None = None, trained: list[Any] | None = None,
                 detected: str | None = None) -> str:
    jobs = sorted(follower.jobs() if trained is None else trained, key=jobmeta.created_at)
    metrics = []
    for job in jobs:
        name = jobmeta.name_of(job)
        raw = follower.storage.read_bytes(jobmeta.job_dir(stack.cfg.bucket, name) + "/metrics.json")
        (out / "metrics" / f"{name}.json").write_bytes(raw)
        metrics.append(json.loads(raw))
    png = plots.training_curves(metrics, out / "training.png", scored)
    html_path = page.write(out / "report.html", Reader(follower.storage, stack.cfg.bucket, Layout(), follower.backend),
                        follower.pubsub, (stack.cfg.dead_letter_topic, stack.cfg.scorer_dead_letter_topic))
    lines = [f"Landfall demo: {len(jobs)} job(s) for dataset '{follower.opts.dataset}' in {elapsed_s:.0f}s"]
    for job, m in zip(jobs, metrics, strict=True):
        epochs = m.get("epochs") or []
        last = epochs[-1] if epochs else {}
        after = jobmeta.annotations(job).get(jobmeta.AFTER_ANNOTATION)
        lines.append(
            f"- {m['job']}: {engine.state(job)}, {m['num_workers']} workers x batch {m['batch_size_per_worker']} "
            f"(global {m['global_batch_size']}), {len(m.get('manifests') or [])} manifest(s), "
            f"{len(epochs)} epochs, final loss {last.get('loss', float('nan')):.4f} "
            f"val_loss {last.get('val_loss', float('nan')):.4f}, median epoch "
            f"{np.median([e['wall_s'] for e in epochs]) if epochs else float('nan'):.1f}s, restarts {m.get('restarts')}"
            + (f", follow-up of {after} (coalesced arrival)" if after else "")
            + (f"; verdict {m['verdict']} (loss {_fmt(m.get('challenger_loss'))} vs champion "
               f"{_fmt(m.get('champion_loss'))}, skill {_fmt(m.get('skill'))} over the mean-window baseline "
               f"{_fmt(m.get('baseline_loss'))})" if m.get("verdict") else "")
            + (f"; stopped early at epoch {m.get('epochs_run')} of {m.get('epochs_ceiling')} (best "
               f"{m.get('best_epoch')})" if m.get("stopped_early") else ""))
    lines += warm_start_lines(metrics)
    champions = [m for m in metrics if m.get("champion")]
    if champions:
        lines.append(f"champion: {champions[-1].get('champion_run')} ({champions[-1]['champion']})")
    if scored:
        lines.append(f"scoring: {scored.caught} of {len(scored.injected)} injected anomalies flagged, "
                     f"{scored.false_alarms} false alarms of {len(scored.errors) - len(scored.injected)} "
                     f"at threshold {scored.threshold:.4g}")
    if detected:
        lines.append(detected)
    lines += [f"metrics: {out / 'metrics'}", f"plot:    {png}", f"report:  {html_path}", f"state:   {stack.cfg.state}"]
    text = "\n".join(lines)
    (out / "summary.txt").write_text(text + "\n")
    return text


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def warm_start_lines(metrics: list[dict[str, Any]]) -> list[str]:
    """For each job that started from another's model: its first-epoch validation loss against the
    predecessor's last (goal: within 5%, rather than back where a fresh model starts)."""
    by_model = {m.get("model"): m for m in metrics if m.get("model")}
    lines = []
    for m in metrics:
        before = by_model.get(m.get("warm_start_from"))
        if not before or not m.get("epochs") or not before.get("epochs"):
            continue
        first, last = m["epochs"][0].get("val_loss"), before["epochs"][-1].get("val_loss")
        fresh = before["epochs"][0].get("val_loss")
        if first is None or last is None:
            continue
        lines.append(f"warm start: {m['job']} began from {before['job']}'s model: first-epoch val_loss {first:.4f} "
                     f"vs its predecessor's last {last:.4f} ({(first / last - 1) * 100:+.1f}%; the predecessor's "
                     f"fresh first epoch was {_fmt(fresh)})")
    return lines
