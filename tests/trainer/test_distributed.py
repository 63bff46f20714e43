"""Real multi-worker training on the CPU: two processes with TF_CONFIG on loopback ports, data that
the converter wrote into the storage emulator, the job dir in the emulator too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from landfall.arrival.config import ConverterConfig
from landfall.arrival.converter import convert
from landfall.core.errors import NotFound
from landfall.core.rules.accelerators import prices
from landfall.core.services.storage import Storage
from landfall.local.emulators import free_ports
from tests.conftest import unique
from tests.trainer.helpers import REPO, make_array, trainer_env
from trainer.errors import EXIT_CLUSTER

BUILD = "building the model and broadcasting its variables"
STRATEGY = "creating the strategy"

ARGS = ["--batch-size-per-worker", "64", "--units", "16,8", "--learning-rate", "0.005", "--verbose", "0"]


@pytest.fixture(scope="module")
def converted(emulator_stack, tmp_path_factory) -> tuple[Storage, str, str]:
    """4096 seed-shaped instances, converted into three shards by the real converter."""
    storage: Storage = emulator_stack.storage
    bucket = unique("bkt")
    storage.ensure_bucket(bucket)
    source = tmp_path_factory.mktemp("arrival") / "arrival.npy"
    np.save(source, make_array(4096, seed=3))
    cfg = ConverterConfig.load({}, shard_target_bytes=2_200_000)
    manifest = convert(str(source), f"gs://{bucket}/tfrecords/demo/arrival-1/", "demo", cfg, storage)
    assert len(manifest.shards) >= 2
    return storage, bucket, f"gs://{bucket}/tfrecords/demo/arrival-1/manifest.json"


class Cluster:
    """``n`` trainer processes, TF_CONFIG exactly as the Kubeflow training operator sets it."""

    def __init__(self, args: list[str], logs: Path, n: int = 2, start: int | None = None, **env: str):
        """Starts the first ``start`` (default all) of the ``n`` workers, ``env`` added to their environment."""
        ports = free_ports(n)
        workers = [f"127.0.0.1:{p}" for p in ports]
        self.logs = [logs / f"worker-{i}.log" for i in range(n)]
        self.procs = []
        for i in range(n if start is None else start):
            tf_config = json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": i}})
            with open(self.logs[i], "w") as out:
                self.procs.append(subprocess.Popen(
                    [sys.executable, "-m", "trainer.task", *args], cwd=REPO, stdout=out,
                    stderr=subprocess.STDOUT, env=trainer_env(TF_CONFIG=tf_config, **env)))

    def wait(self, timeout: float = 240) -> list[int]:
        deadline = time.monotonic() + timeout
        try:
            return [p.wait(timeout=max(1, deadline - time.monotonic())) for p in self.procs]
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail("workers did not finish:\n" + "\n".join(self.tail(i) for i in range(len(self.procs))))

    def kill(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()

    def tail(self, i: int, n: int = 4000) -> str:
        return f"--- worker {i} ---\n" + self.logs[i].read_text()[-n:]

    def log_lines(self, i: int, message: str | None = None, severity: str = "INFO") -> list[dict]:
        """Worker ``i``'s JSON log entries of ``severity`` with this ``message`` (any, if None)."""
        out = []
        for line in self.logs[i].read_text().splitlines():
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    entry = json.loads(line)
                    if entry.get("severity") == severity and message in (None, entry.get("message")):
                        out.append(entry)
        return out


def read_metrics(storage: Storage, job_dir: str) -> dict | None:
    try:
        return json.loads(storage.read_bytes(f"{job_dir}/metrics.json"))
    except (NotFound, ValueError):
        return None


def check_complete(metrics: dict, job: str, manifest: str, epochs: int, restarts: int) -> None:
    assert metrics["schema"] == "landfall.metrics/v1"
    assert metrics["job"] == job and metrics["dataset"] == "demo" and metrics["manifests"] == [manifest]
    assert (metrics["num_workers"], metrics["batch_size_per_worker"], metrics["global_batch_size"]) == (2, 64, 128)
    assert metrics["status"] == "succeeded" and metrics["restarts"] == restarts
    assert metrics["strategy"] == "multi_worker_mirrored" and metrics["replicas"] == 2
    assert metrics["started_at"] and metrics["ended_at"] and metrics["epochs_requested"] == epochs
    assert [e["epoch"] for e in metrics["epochs"]] == list(range(1, epochs + 1))
    for e in metrics["epochs"]:
        assert {"epoch", "loss", "val_loss", "wall_s", "examples_per_s"} <= set(e)
        assert math.isfinite(e["loss"]) and math.isfinite(e["val_loss"]) and e["examples_per_s"] > 0
        # What every worker did, gathered from both (not the chief's figures twice): balanced shares.
        assert e["examples_per_worker"] == [metrics["steps_per_epoch"] * 64] * 2
        assert e["examples"] == sum(e["examples_per_worker"])
        assert len(e["train_s_per_worker"]) == 2 and e["train_s"] == max(e["train_s_per_worker"]) > 0
        assert e["train_s_per_worker"][e["slowest_worker"]] == e["train_s"]
    arrivals = metrics["instances"]["arrivals"]
    assert [a["manifest"] for a in arrivals] == [manifest] and arrivals[0]["instances"] == metrics["instances"]["total"]
    assert abs(metrics["instances"]["per_worker_train"][0] - metrics["instances"]["per_worker_train"][1]) <= 1


@pytest.fixture(scope="module")
def two_workers(converted, tmp_path_factory) -> tuple[Cluster, list[int], str]:
    """One fresh two-worker run of 3 epochs on ``converted``, run once for the module: what
    ``test_two_workers_train_in_step_and_report_metrics`` checks, and a champion of the dataset trained on that
    arrival alone for ``test_two_workers_leave_out_what_the_champion_flags_and_stay_in_step`` (``--min-skill -1``: it
    is promoted unless an earlier run of the module, trained on the same arrival, already is the better champion)."""
    _, bucket, manifest = converted
    job_dir = f"gs://{bucket}/runs/two-workers"
    cluster = Cluster(["--manifest", manifest, "--job-dir", job_dir, "--epochs", "3", *ARGS, "--min-skill", "-1"],
                      tmp_path_factory.mktemp("two-workers"),
                      LANDFALL_GPUS_PER_WORKER="2", LANDFALL_ACCELERATOR="nvidia-l4")  # as the submit stage sets
    return cluster, cluster.wait(), job_dir


def test_two_workers_train_in_step_and_report_metrics(converted, two_workers):
    storage, _, manifest = converted
    cluster, codes, job_dir = two_workers
    assert codes == [0, 0], cluster.tail(0) + cluster.tail(1)

    per_worker = [cluster.log_lines(i, "epoch") for i in range(2)]
    assert [[e["epoch"] for e in w] for w in per_worker] == [[1, 2, 3], [1, 2, 3]]
    assert [e["worker"] for e in per_worker[1]] == [1, 1, 1]
    # Synchronous data parallelism: both workers see the same (all-reduced) loss every epoch.
    assert [e["loss"] for e in per_worker[0]] == pytest.approx([e["loss"] for e in per_worker[1]], rel=1e-6)

    metrics = read_metrics(storage, job_dir)
    check_complete(metrics, "two-workers", manifest, epochs=3, restarts=0)
    losses = [e["loss"] for e in metrics["epochs"]]
    assert losses[-1] < losses[0], losses
    assert losses == pytest.approx([e["loss"] for e in per_worker[0]])
    assert storage.exists(f"{job_dir}/model/saved_model.pb")
    # The chief judged it after the other worker had gone (on its saved copy: no collective left to join).
    assert metrics["verdict"] in ("promoted", "kept_champion") and metrics["challenger_loss"] > 0
    assert storage.exists(f"{job_dir}/model/threshold.json")
    assert storage.list(f"{job_dir}/tensorboard/", suffix=".v2")
    assert not storage.list(f"{job_dir}/backup/")  # removed once the run succeeded
    # Its cost: 2 workers x 2 GPUs x the wall time from the first start to the end, priced from the table.
    wall = (datetime.fromisoformat(metrics["ended_at"]) - datetime.fromisoformat(metrics["started_at"])).total_seconds()
    assert metrics["gpu_seconds"] == pytest.approx(4 * wall, abs=0.01) and metrics["gpu_seconds"] > 0
    assert (metrics["accelerator"], metrics["cost_basis"]) == ("nvidia-l4", "chief")
    assert metrics["estimated_cost"] == pytest.approx(metrics["gpu_seconds"] / 3600 * prices()["nvidia-l4"], rel=1e-3)
    check_timeline(storage, job_dir, metrics)


# Phases every worker names in its timeline, and those only the chief runs (issue #42).
EVERY_WORKER = ["reading the manifests", "staging the shards", "loading TensorFlow", STRATEGY, BUILD, "training",
                "saving the model"]
CHIEF_ONLY = ["evaluating against the champion", "recording the result"]
VERDICT_PASSES = ["loading the challenger", "fitting the baselines", "scoring the held-out windows", "the threshold",
                  "the labelled check"]


def check_timeline(storage: Storage, job_dir: str, metrics: dict) -> None:
    """The job's timeline in metrics.json, on both workers, and as status --json, trace and the report show it."""
    from landfall.cli import status, trace
    from landfall.core.contracts import timeline as core_timeline
    from landfall.core.contracts.layout import Layout
    from landfall.views import page

    t = metrics["timeline"]
    assert [w["worker"] for w in t["workers"]] == [0, 1] and not any("missing" in w for w in t["workers"]), t
    assert t["origin"] == min(w["started_at"] for w in t["workers"])
    for w in t["workers"]:
        phases = w["phases"]
        tops = [p["phase"] for p in phases if p["within"] is None and p["phase"] != "epoch"]
        want = EVERY_WORKER + (CHIEF_ONLY if w["worker"] == 0 else [])
        assert [p for p in tops if p in want] == [p for p in want if p in tops] and set(want) <= set(tops), tops
        if w["worker"] == 0:  # the chief alone scores new data with the champion, before the strategy
            assert tops.index("scoring new data with the champion") < tops.index(STRATEGY)
            passes = [p["phase"] for p in phases if p["within"] == "evaluating against the champion"]
            assert set(VERDICT_PASSES) <= set(passes), passes
        else:
            assert "evaluating against the champion" not in tops and "scoring new data with the champion" not in tops
        for p in phases:  # a start and seconds each, in order, within the worker's run
            assert p["seconds"] >= 0 and p["start_s"] >= w["offset_s"] - 1e-3 and not p.get("running"), p
            assert p["start_s"] + p["seconds"] <= w["offset_s"] + w["total_s"] + 0.01, (p, w)
            assert not p.get("failed"), p
        assert [p["start_s"] for p in phases] == sorted(p["start_s"] for p in phases)
        # Each epoch links to metrics.json's epochs[epoch - 1], inside the fit phase.
        epochs = [p for p in phases if p["phase"] == "epoch"]
        assert [p["epoch"] for p in epochs] == [1, 2, 3] and {p["within"] for p in epochs} == {"training"}
        fit = [p["phase"] for p in phases if p["within"] == "training" and p["phase"] != "epoch"]
        assert fit == ["building the input pipelines", "keras set-up before training", "before the first epoch",
                       "after the last epoch", "the callbacks' end of training", "after training ended"], fit
        assert w["epochs_s"] == pytest.approx(sum(p["seconds"] for p in epochs), abs=0.01)
        assert w["outside_epochs_s"] == pytest.approx(w["total_s"] - w["epochs_s"], abs=0.01)
        assert 0 <= w["unaccounted_s"] < w["total_s"]
    for e in metrics["epochs"]:  # an epoch's wall_s is its slowest worker's span
        spans = [p["seconds"] for w in t["workers"] for p in w["phases"] if p.get("epoch") == e["epoch"]]
        assert len(spans) == 2 and e["wall_s"] == pytest.approx(max(spans), abs=0.002)
    rows = {(r["phase"], r["within"]): r for r in t["summary"]}
    assert rows[("epochs", None)]["count"] == 3 and rows[("saving the model", None)]["per_worker"][1] is not None
    assert rows[("fitting the baselines", "evaluating against the champion")]["per_worker"][1] is None
    # The job's seconds and GPU-seconds outside its epochs: 2 workers x 2 GPUs.
    wall = (datetime.fromisoformat(metrics["ended_at"]) - datetime.fromisoformat(metrics["started_at"])).total_seconds()
    inside = sum(e["wall_s"] for e in metrics["epochs"])
    assert t["epochs_s"] == pytest.approx(inside, abs=0.01)
    assert t["outside_epochs_s"] == pytest.approx(wall - inside, abs=0.01) and t["outside_epochs_s"] > 0
    assert metrics["outside_epochs_gpu_seconds"] == pytest.approx(4 * (wall - inside), abs=0.05)
    assert metrics["epochs_gpu_seconds"] + metrics["outside_epochs_gpu_seconds"] == pytest.approx(
        metrics["gpu_seconds"], abs=0.01)

    # landfall status --json
    bucket, job = job_dir.removeprefix("gs://").split("/")[0], job_dir.rsplit("/", 1)[-1]
    shown = status.shown_metrics(storage, bucket, job, Layout.load())["timeline"]
    assert shown == json.loads(json.dumps(core_timeline.compact(metrics)))
    assert [r["phase"] for r in shown["phases"]] == [r["phase"] for r in t["summary"]]
    assert shown["outside_epochs_gpu_seconds"] == metrics["outside_epochs_gpu_seconds"]
    line = core_timeline.compact_line(shown)
    assert line == core_timeline.line(metrics) and "epochs " in line and "(3)" in line and "GPU-s" in line
    assert "verdict" in line and "baselines" in line and "held-out pass" in line and "staging" in line
    # landfall trace: a step
    [step] = [s for s in trace.metrics_steps(metrics, f"{job_dir}/metrics.json") if s.what == "timeline"]
    assert step.text == line and dataclasses.asdict(step)["detail"]["phases"] == shown["phases"]
    # the report: a bar per phase and worker, the rows and axes named
    svg = page.timeline_svg(t)
    assert svg.count('class="phase"') == sum(len(w["phases"]) for w in t["workers"])
    assert 'data-worker="1"' in svg and "worker 0</text>" in svg and "worker 1</text>" in svg
    assert "seconds from the job" in svg and svg.count("data-phase=") == len(t["summary"])


@pytest.mark.parametrize("kind", ["gru", "dense"])
def test_a_killed_worker_makes_the_cluster_restart_and_resume(converted, tmp_path, kind):
    """The seed's GRU and the ``dense`` model kind (issue #38): the same multi-worker training and restart."""
    storage, bucket, manifest = converted
    job = "kill-and-resume" if kind == "gru" else f"kill-and-resume-{kind}"
    job_dir = f"gs://{bucket}/runs/{job}"
    args = ["--manifest", manifest, "--job-dir", job_dir, "--epochs", "3", *ARGS, "--model-kind", kind]
    (tmp_path / "first").mkdir()
    first = Cluster(args, tmp_path / "first", n=2)
    try:
        deadline = time.monotonic() + 180
        while not ((m := read_metrics(storage, job_dir)) and len(m.get("epochs", [])) >= 1):
            assert time.monotonic() < deadline, first.tail(0) + first.tail(1)
            assert first.procs[0].poll() is None, first.tail(0)
            time.sleep(0.1)
        first.procs[1].send_signal(signal.SIGKILL)  # worker 1 dies after epoch 1
        killed_at = time.monotonic()
        # The chief must notice (missed coordination-service heartbeats) and exit with a retryable code, not hang.
        code = first.procs[0].wait(timeout=90)
        assert code == EXIT_CLUSTER and code >= 128, first.tail(0)
        assert time.monotonic() - killed_at < 60
    finally:
        first.kill()
    metrics = read_metrics(storage, job_dir)
    assert metrics["status"] == "failed" and metrics["retryable"] is True
    assert [e["epoch"] for e in metrics["epochs"]] == [1]

    (tmp_path / "second").mkdir()
    second = Cluster(args, tmp_path / "second", n=2)  # the operator restarts every replica, identically
    assert second.wait() == [0, 0], second.tail(0) + second.tail(1)
    for i in range(2):
        assert [e["epoch"] for e in second.log_lines(i, "epoch")] == [2, 3], second.tail(i)
        assert second.log_lines(i, "resuming at epoch 2 from the backup checkpoint")
    metrics = read_metrics(storage, job_dir)
    check_complete(metrics, job, manifest, epochs=3, restarts=1)
    assert [e["attempt"] for e in metrics["epochs"]] == [1, 2, 2]
    saved = json.loads(storage.read_bytes(f"{job_dir}/model/normalization.json"))
    assert saved["kind"] == kind and saved["units"] == [int(u) for u in ARGS[ARGS.index("--units") + 1].split(",")]


def _failure(cluster: Cluster, i: int) -> dict:
    [failure] = cluster.log_lines(i, severity="ERROR")
    assert failure["message"].startswith(f"training failed while {failure['phase']}: the cluster failed"), failure
    assert (failure["exit_code"], failure["retryable"]) == (EXIT_CLUSTER, True), failure
    return failure


def test_a_peer_lost_before_the_model_is_built_makes_the_job_restart(converted, tmp_path):
    """A preempted node: worker 1 vanishes once the cluster has formed, before the model's variables
    are broadcast from worker 0. Worker 0 must exit 129 (restart every worker), not 1 (the TFJob
    would fail for good), and the restarted job trains."""
    storage, bucket, manifest = converted
    job_dir = f"gs://{bucket}/runs/lost-before-build"
    args = ["--manifest", manifest, "--job-dir", job_dir, "--epochs", "2", *ARGS]
    (tmp_path / "first").mkdir()
    first = Cluster(args, tmp_path / "first", n=2)
    try:
        deadline = time.monotonic() + 180
        while not first.log_lines(1, "cluster ready"):
            assert time.monotonic() < deadline, first.tail(0) + first.tail(1)
            assert first.procs[1].poll() is None, first.tail(1)
            time.sleep(0.02)
        first.procs[1].send_signal(signal.SIGKILL)  # worker 1 is gone before its first broadcast
        code = first.procs[0].wait(timeout=90)  # the coordination service misses its heartbeats (10 s)
        assert code == EXIT_CLUSTER, first.tail(0)
    finally:
        first.kill()
    assert not first.log_lines(0, "model built"), first.tail(0)
    assert _failure(first, 0)["phase"] == BUILD
    metrics = read_metrics(storage, job_dir)
    assert (metrics["status"], metrics["retryable"], metrics["exit_code"]) == ("failed", True, EXIT_CLUSTER)
    assert metrics["failed_phase"] == BUILD and metrics["epochs"] == []

    (tmp_path / "second").mkdir()
    second = Cluster(args, tmp_path / "second", n=2)  # the operator restarts every replica, identically
    assert second.wait() == [0, 0], second.tail(0) + second.tail(1)
    metrics = read_metrics(storage, job_dir)
    check_complete(metrics, "lost-before-build", manifest, epochs=2, restarts=1)
    assert [e["attempt"] for e in metrics["epochs"]] == [2, 2]


def test_a_peer_lost_while_the_cluster_forms_exits_retryable(converted, tmp_path):
    """Three workers, the third not up yet: workers 0 and 1 wait in the strategy's barrier. Worker 1
    dies there; the coordination service on worker 0 fails the barrier (an InternalError carrying
    CoordinationServiceError) and worker 0 must exit 129 while creating the strategy, not 1."""
    _storage, bucket, manifest = converted
    args = ["--manifest", manifest, "--job-dir", f"gs://{bucket}/runs/lost-while-forming", "--epochs", "1", *ARGS]
    # TensorFlow's own INFO log says when worker 1 has joined the coordination service (on worker 0, its leader).
    cluster = Cluster(args, tmp_path, n=3, start=2, TF_CPP_MIN_LOG_LEVEL="0")
    try:
        deadline = time.monotonic() + 180
        while "/job:worker/replica:0/task:1 has connected to coordination service" not in cluster.logs[0].read_text():
            assert time.monotonic() < deadline, cluster.tail(0) + cluster.tail(1)
            assert all(p.poll() is None for p in cluster.procs), cluster.tail(0) + cluster.tail(1)
            time.sleep(0.05)
        assert not cluster.log_lines(0, "cluster ready")  # still waiting for worker 2
        cluster.procs[1].send_signal(signal.SIGKILL)
        code = cluster.procs[0].wait(timeout=90)
        assert code == EXIT_CLUSTER, cluster.tail(0)
    finally:
        cluster.kill()
    failure = _failure(cluster, 0)
    assert failure["phase"] == STRATEGY and "InternalError: Barrier failed" in failure["message"], failure
    assert "task:1 heartbeat timeout" in failure["message"], failure


def test_two_workers_leave_out_what_the_champion_flags_and_stay_in_step(converted, two_workers, tmp_path):
    """The chief scores the new arrival with the champion (in a child process, before the strategy); with
    --exclude-flagged the other worker waits for the chief's flagged indices (no collective) and both plan the
    same exact shares without them."""
    storage, bucket, manifest = converted
    first, codes, first_dir = two_workers
    assert codes == [0, 0], first.tail(0) + first.tail(1)
    # The dataset's champion: trained on `manifest` alone (by two_workers, or an earlier run of the module).
    assert read_metrics(storage, first_dir)["champion_run"]
    source = tmp_path / "arrival-2.npy"
    new = make_array(1024, seed=4)
    burst = np.random.default_rng(5).choice(len(new), 51, replace=False)
    new[burst] *= 10  # 5 % of the new arrival far off what the champion learned
    np.save(source, new)
    second = convert(str(source), f"gs://{bucket}/tfrecords/demo/arrival-2/", "demo",
                     ConverterConfig.load({}, shard_target_bytes=2_200_000), storage)
    manifest2 = f"gs://{bucket}/tfrecords/demo/arrival-2/manifest.json"
    assert second.count == 1024
    (tmp_path / "two").mkdir()
    job_dir = f"gs://{bucket}/runs/view-2"
    cluster = Cluster(["--manifest", manifest, "--manifest", manifest2, "--job-dir", job_dir, "--epochs", "1",
                       "--exclude-flagged", *ARGS, "--min-skill", "-1"], tmp_path / "two")
    assert cluster.wait() == [0, 0], cluster.tail(0) + cluster.tail(1)
    metrics = read_metrics(storage, job_dir)
    view = metrics["champion_view"]
    assert [a["manifest"] for a in view["arrivals"]] == [manifest2]  # the champion's own arrival is not new
    assert 51 <= view["flagged"] <= 51 + 40 and view["excluded"] == view["flagged"]
    counted = {a["manifest"]: a for a in metrics["instances"]["arrivals"]}
    assert counted[manifest2]["excluded"] == view["flagged"]
    assert counted[manifest2]["train"] + counted[manifest2]["validation"] == 1024 - view["flagged"]
    epoch = metrics["epochs"][0]
    assert epoch["examples_per_worker"] == [metrics["steps_per_epoch"] * 64] * 2
    assert abs(metrics["instances"]["per_worker_train"][0] - metrics["instances"]["per_worker_train"][1]) <= 1
