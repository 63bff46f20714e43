"""The local operator: runs recorded TFJobs as the training operator does (replicas, TF_CONFIG, ExitCode
restarts, backoffLimit, activeDeadlineSeconds, suspend, conditions, logs, SIGTERM without orphans), and a
real two-worker training submitted through the submit stage, once clean and once with a worker killed."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from landfall.local.tfjob_controller import Operator
from landfall.submit import engine, jobmeta, tfjob
from landfall.submit.backends.local import LocalBackend
from landfall.submit.config import JobConfig
from landfall.submit.handler import handle_message
from tests.support import convert_arrival, copy_arrival, inputs_of, pending_of, runtime

REPO = Path(__file__).resolve().parents[3]


def script_job(name: str, code: str, workers: int = 2, **cfg) -> dict:
    """A TFJob (a JobSet with ``engine="jobset"``) whose container runs ``python -c code`` (the operator maps
    ``python`` to this interpreter)."""
    config = JobConfig.load({}, bucket="bkt", project="p", workers=workers, gpus_per_worker=0, **cfg)
    job = engine.render(config, name=name, dataset="ops", request_id=name, inputs_uri="gs://bkt/runs/x/inputs.json")
    c = engine.containers_of(job)[0]
    c["command"], c["args"] = ["python", "-c", code], []
    return job


def run_until(op: Operator, name: str, states: tuple[str, ...], timeout_s: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        op.tick()
        job = op.backend.get(name)
        if engine.state(job) in states:
            return job
        time.sleep(0.1)
    op.stop_all()
    raise AssertionError(f"{name} is {engine.state(op.backend.get(name))}, expected {states}")


def reasons(job: dict) -> dict[str, str]:
    return {c["type"]: c["reason"] for c in tfjob.conditions(job) if c["status"] == "True"}


def test_replicas_get_tf_config_and_a_retryable_exit_restarts_all(tmp_path):
    marker = tmp_path / "attempted"
    code = f"""
import json, os, pathlib, sys
cfg = json.loads(os.environ["TF_CONFIG"])
print("TF_CONFIG", json.dumps(cfg), flush=True)
m = pathlib.Path({str(marker)!r} + str(cfg["task"]["index"]))
if not m.exists():  # first attempt: worker 1 fails retryably while worker 0 is still busy
    m.touch()
    if cfg["task"]["index"] == 1:
        sys.exit(130)
    __import__("time").sleep(30)
"""
    op = Operator(tmp_path / "state", poll_s=0.1)
    op.backend.create(script_job("restart-ok", code))
    job = run_until(op, "restart-ok", ("Succeeded", "Failed"))
    assert tfjob.state(job) == "Succeeded", job["status"]
    assert job["status"]["local"]["restarts"] == 1
    assert job["status"]["completionTime"] and job["status"]["startTime"]
    types = [c["type"] for c in tfjob.conditions(job)]
    assert types[:1] == ["Created"] and {"Running", "Restarting", "Succeeded"} <= set(types)
    logs = [op.backend.log_path("restart-ok", i).read_text() for i in range(2)]
    configs = [[json.loads(line.split(" ", 1)[1]) for line in log.splitlines() if line.startswith("TF_CONFIG")]
               for log in logs]
    assert [len(c) for c in configs] == [2, 2]  # both replicas ran twice: all are restarted
    for attempt in range(2):
        first, second = configs[0][attempt], configs[1][attempt]
        assert first["cluster"] == second["cluster"] and len(set(first["cluster"]["worker"])) == 2
        assert [first["task"], second["task"]] == [{"type": "worker", "index": 0}, {"type": "worker", "index": 1}]
        assert all(w.startswith("127.0.0.1:") for w in first["cluster"]["worker"])
    assert "attempt 2 (worker-1 exited with code 130)" in logs[0]


def test_permanent_exit_fails_backoff_limit_and_deadline(tmp_path):
    op = Operator(tmp_path / "state", poll_s=0.1)
    op.backend.create(script_job("perm", "import sys; sys.exit(3)", workers=1))
    op.backend.create(script_job("flaky", "import sys; sys.exit(129)", workers=1, backoff_limit=2))
    op.backend.create(script_job("slow", "import time; time.sleep(60)", workers=2, active_deadline_seconds=2))
    perm = run_until(op, "perm", ("Succeeded", "Failed"))
    flaky = run_until(op, "flaky", ("Succeeded", "Failed"))
    slow = run_until(op, "slow", ("Succeeded", "Failed"))
    assert reasons(perm)["Failed"] == "TFJobFailed" and perm["status"]["local"]["restarts"] == 0
    assert reasons(flaky)["Failed"] == "BackoffLimitExceeded" and flaky["status"]["local"]["restarts"] == 2
    assert reasons(slow)["Failed"] == "DeadlineExceeded"
    for r in slow["status"]["local"]["replicas"]:
        with pytest.raises(ProcessLookupError):
            os.kill(r["pid"], 0)


def test_a_follow_up_waits_as_pending_requests_and_is_released_when_its_predecessor_ends(
        emulator_stack, bucket, tmp_path):
    storage = emulator_stack.storage
    first = convert_arrival(storage, bucket, "chain", tmp_path)
    rt = runtime(emulator_stack, bucket, LocalBackend(tmp_path / "state"))
    assert handle_message(first.to_json(), {}, rt) == "submitted"
    (active,) = rt.backend.list("chain")
    # Swap the trainer for a script that waits for a file, so the test decides when the job ends.
    gate = tmp_path / "gate"
    wait = f"import pathlib, time\nwhile not pathlib.Path({str(gate)!r}).exists(): time.sleep(0.05)"
    containers = active["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    containers[0]["command"], containers[0]["args"] = ["python", "-c", wait], []
    rt.backend.patch(jobmeta.name_of(active), {"spec": {"tfReplicaSpecs": {"Worker": {"template": {"spec": {
        "containers": containers}}}}}})
    op = Operator(tmp_path / "state", config=rt.config, storage=storage, poll_s=0.1)
    run_until(op, jobmeta.name_of(active), ("Running",))
    second = copy_arrival(storage, first, 1)
    assert handle_message(second.to_json(), {}, rt) == "coalesced"
    op.tick()
    assert [jobmeta.name_of(j) for j in rt.backend.list("chain")] == [jobmeta.name_of(active)]
    assert pending_of(storage, bucket, "chain") == [second.request_id]
    gate.touch()
    run_until(op, jobmeta.name_of(active), ("Succeeded",))
    op.tick()  # the operator's reconcile releases the follow-up, which then starts
    (follow,) = [j for j in op.backend.list("chain") if jobmeta.name_of(j) != jobmeta.name_of(active)]
    op.stop_all()
    assert set(inputs_of(storage, follow).manifest_uris) == {first.manifest, second.manifest}
    assert pending_of(storage, bucket, "chain") == []
    # Released in this tick's reconcile and started by the same tick: its replicas run now.
    assert tfjob.state(follow) == "Running"


def operator_process(state: Path, log: Path, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "landfall.cli", "operator", "--state", str(state), "--poll-s",
                             "0.2"], cwd=REPO, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                            env={**os.environ, **(env or {})})


def _running_in_group(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is alive and not a zombie (Linux ``/proc/<pid>/stat``)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone while listed
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def test_sigterm_stops_the_replicas_and_exits_cleanly(tmp_path):
    state = tmp_path / "state"
    backend = LocalBackend(state)
    backend.create(script_job("sleepy", "import time; time.sleep(120)", workers=2))
    proc = operator_process(state, tmp_path / "operator.log")
    try:
        deadline = time.monotonic() + 30
        while not (backend.get("sleepy").get("status") or {}).get("local"):
            assert time.monotonic() < deadline and proc.poll() is None, (tmp_path / "operator.log").read_text()
            time.sleep(0.1)
        pids = [r["pid"] for r in backend.get("sleepy")["status"]["local"]["replicas"]]
        assert (state / "operator.pid").exists()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, (tmp_path / "operator.log").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    for pid in pids:  # the whole process group is gone: no member left running (an unreaped zombie is not running:
        # the clean clone's run once found the killed group's dead child not yet reaped by the container's init)
        deadline = time.monotonic() + 10
        while _running_in_group(pid):
            assert time.monotonic() < deadline, f"process group {pid} still runs after the operator exited"
            time.sleep(0.1)
    assert not (state / "operator.pid").exists()


# -- a real two-worker training, submitted through the submit stage and run by `landfall operator` -------
TINY = ("--units", "8,4", "--learning-rate", "0.005", "--health-check-interval-s", "2", "--verbose", "0")
# Early stopping on, each epoch's input order a function of (seed, worker, epoch), no dropout (its masks come from
# stateful random ops a checkpoint does not hold): a restarted run must then end exactly as an uninterrupted one.
CONVERGING = (*TINY, "--learning-rate", "0.02", "--dropout", "0", "--deterministic", "--early-stopping-patience", "2",
              "--early-stopping-reductions", "1", "--early-stopping-smoothing", "1",
              "--early-stopping-min-delta", "0.05", "--min-skill", "-1")
CEILING = 12


def _containers(obj):
    """The first ``containers`` list in a rendered job (a TFJob's or a JobSet's pod template)."""
    if isinstance(obj, dict):
        if "containers" in obj:
            return obj["containers"]
        obj = list(obj.values())
    if isinstance(obj, list):
        for value in obj:
            found = _containers(value)
            if found:
                return found
    return None


def uninterrupted(job: dict, job_dir: str, tmp_path: Path) -> None:
    """The job's own trainer command and environment, run once more by two workers on loopback into ``job_dir``,
    with nobody killed: the reference a restarted run must match."""
    from landfall.local.tfjob_controller import command_of
    from tests.trainer.test_distributed import Cluster

    (container,) = [c for c in _containers(job) if c.get("name") == jobmeta.CONTAINER]
    args = command_of(container)[3:]  # after python -m trainer.task
    args[args.index("--job-dir") + 1] = job_dir
    env = {e["name"]: str(e["value"]) for e in container.get("env") or [] if "value" in e}
    logs = tmp_path / "reference"
    logs.mkdir()
    cluster = Cluster(args, logs, n=2, **env)
    assert cluster.wait() == [0, 0], cluster.tail(0) + cluster.tail(1)


NODE_GRACE_S = 15.0  # GKE's graceful node shutdown gives a preempted Spot node's non-system Pods 15 s of its 30 s


def node_disappears(pid: int, grace_s: float = NODE_GRACE_S) -> float:
    """A Spot node's preemption as the worker's processes see it: SIGTERM to all of them (the notice), SIGKILL to
    what is left after ``grace_s``. Returns how long the worker took to go."""
    started = time.monotonic()
    os.killpg(pid, signal.SIGTERM)
    while time.monotonic() - started < grace_s:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return time.monotonic() - started
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    return time.monotonic() - started


def read_metrics(storage, uri: str) -> dict:
    try:
        return json.loads(storage.read_bytes(uri))
    except Exception:
        return {}


@pytest.mark.parametrize("engine_name", ["tfjob", "jobset"], ids=["worker-killed", "jobset-worker-killed"])
def test_local_backend_trains_two_workers_to_succeeded(emulator_stack, bucket, tmp_path, engine_name):
    """The same training under both engines; under ``jobset`` the trainer builds its TF_CONFIG from the pod's
    JobSet labels and JOB_COMPLETION_INDEX, and the JobSet controller restarts the whole group.

    Worker 1 is killed after epoch 1 (exit 137, retryable): the operator or controller restarts every replica,
    and they resume at the next epoch from the backup checkpoint. Then worker 1's node disappears as a preempted Spot
    node does (issue #41): SIGTERM to its processes mid-epoch, SIGKILL after GKE's 15 s; the trainer finishes the
    epoch in progress, every worker exits 143 after it is saved, and the third attempt resumes at the next epoch,
    repeating nothing. Early stopping is on (epochs a ceiling of 12): the twice restarted TFJob stops at the same
    epoch, keeps the same best epoch and ends with the same weights as the same job run again with nobody killed
    (``--deterministic``, no dropout); the JobSet's restarts resume from the same backup, as its logs show. A clean
    two-worker run through the operator is ``landfall up``'s test (tests/landfall/local/test_stack.py) and the
    demo's; the chief noticing a dead peer on its own is tests/trainer/test_distributed.py's."""
    storage = emulator_stack.storage
    request = convert_arrival(storage, bucket, "train", tmp_path, n=512)
    state = tmp_path / "state"
    rt = runtime(emulator_stack, bucket, LocalBackend(state, engine_name=engine_name), epochs=CEILING,
                 batch_size_per_worker=32, trainer_args=CONVERGING, backoff_limit=2, engine=engine_name)
    assert handle_message(request.to_json(), {}, rt) == "submitted"  # only records the job
    (job,) = rt.backend.list("train")
    assert job["kind"] == {"tfjob": "TFJob", "jobset": "JobSet"}[engine_name]
    name = jobmeta.name_of(job)
    assert engine.state(job) == "Pending"
    metrics_uri = f"gs://{bucket}/runs/{name}/metrics.json"
    proc = operator_process(state, tmp_path / "operator.log", {"TF_CPP_MIN_LOG_LEVEL": "2",
                                                               "CUDA_VISIBLE_DEVICES": "",
                                                               "LANDFALL_ENGINE": engine_name})
    try:
        deadline = time.monotonic() + 240
        killed = preempted = False
        killed_at, gone_s = 0.0, None
        while not engine.is_finished(job := rt.backend.get(name)):
            assert time.monotonic() < deadline and proc.poll() is None, _diagnose(state, name, tmp_path)
            epochs = read_metrics(storage, metrics_uri).get("epochs", [])
            if not killed and len(epochs) >= 1:
                pid = job["status"]["local"]["replicas"][1]["pid"]
                time.sleep(0.4)  # into epoch 2 (its steps take ~0.7 s here), not past it
                os.kill(pid, signal.SIGKILL)  # worker 1 dies after epoch 1, without notice
                killed, killed_at = True, time.time()
            elif (killed and not preempted and job["status"]["local"]["restarts"] == 1
                  and any(e.get("attempt") == 2 for e in epochs)):
                time.sleep(0.4)  # mid-epoch
                gone_s = node_disappears(job["status"]["local"]["replicas"][1]["pid"])
                preempted = True
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert engine.state(job) == "Succeeded", _diagnose(state, name, tmp_path)
    assert job["status"]["local"]["restarts"] == 2
    if engine_name == "jobset":
        assert job["status"]["restarts"] == 2
        assert job["status"]["replicatedJobsStatus"][0]["succeeded"] == 1  # its one Job, all indexes done
    else:
        assert job["status"]["replicaStatuses"]["Worker"]["succeeded"] == 2
    metrics = read_metrics(storage, metrics_uri)
    assert metrics["status"] == "succeeded", metrics
    run = metrics["epochs_run"]
    assert [e["epoch"] for e in metrics["epochs"]] == list(range(1, run + 1))
    assert 2 <= run < CEILING and metrics["stopped_early"] is True  # converged before the ceiling
    if engine_name == "tfjob":
        assert "Restarting" in [c["type"] for c in tfjob.conditions(job)]
    assert metrics.get("restarts") == 2
    # The notice: worker 1 finished the epoch in progress and every worker stopped after its backup, within the
    # 15 s; the third attempt resumed at the next epoch: no step was trained twice.
    (notice,) = metrics["preemptions"]
    saved = notice["epoch"]
    assert (notice["attempt"], notice["worker"], notice["workers"], notice["steps_lost"]) == (2, 1, [1], 0)
    assert 2 <= saved < run and gone_s is not None and gone_s < NODE_GRACE_S, (notice, gone_s)
    assert notice["seconds_after_notice"] < NODE_GRACE_S
    # Attempt 1 ran until the kill: epoch 1, or epoch 2 too when the kill, timed from the metrics the chief had
    # already mirrored, landed after epoch 2 ended (seen under load). Each epoch is still trained by one attempt.
    first = [e["attempt"] for e in metrics["epochs"]].count(1)
    assert 1 <= first < saved, metrics["epochs"]
    assert [e["attempt"] for e in metrics["epochs"]] == [1] * first + [2] * (saved - first) + [3] * (run - saved)
    for i in range(2):  # every replica of each restart resumed from the backup, none from scratch
        log = rt.backend.log_path(name, i).read_text()
        assert f"resuming at epoch {first + 1} from the backup checkpoint" in log  # after the kill
        assert f"resuming at epoch {saved + 1} from the backup checkpoint" in log  # after the notice: nothing redone
        assert "early-stopping state restored" in log  # the rule's state came back with the checkpoint
    # Work lost per preemption. With notice: none (0 steps: the epoch in progress was finished and saved). Without
    # (the SIGKILL after attempt 1's last epoch): the next epoch's steps run before the kill, redone by the restart.
    before_kill = metrics["epochs"][first - 1]
    from datetime import datetime
    lost_s = killed_at - datetime.fromisoformat(before_kill["finished_at"].replace("Z", "+00:00")).timestamp()
    steps = metrics["steps_per_epoch"]
    step_s = float(np.median([e["train_s"] for e in metrics["epochs"]])) / steps
    lost_steps = min(steps, round(max(0.0, lost_s) / step_s))
    print(f"\n[{engine_name}] work lost per preemption: with notice 0 steps (worker gone {gone_s:.1f} s after "
          f"SIGTERM, notice at step {notice['notice_step']}/{notice['steps_per_epoch']} of epoch {saved}, epoch "
          f"saved {notice['seconds_after_notice']:.1f} s after it); without notice (SIGKILL) ~{lost_steps}/{steps} "
          f"steps of epoch {first + 1} ({lost_s:.1f} s) redone")
    # The same job, nobody killed: the same stopping epoch, best epoch and held-out losses, the same weights. Run for
    # the TFJob only: resuming exactly is the trainer's (its backup checkpoint, its deterministic input order), and
    # each JobSet restart above resumed from that same backup at the epoch after the last saved one, as the logs show;
    # a reference run per engine cost a two-worker training more and checked the trainer twice (issue #67).
    if engine_name != "tfjob":
        return
    reference = f"gs://{bucket}/runs/{name}-uninterrupted"
    uninterrupted(job, reference, tmp_path)
    ref = read_metrics(storage, f"{reference}/metrics.json")
    assert (ref["epochs_run"], ref["best_epoch"], ref["stopped_early"], ref["restarts"]) == (
        run, metrics["best_epoch"], True, 0)
    assert [e["val_loss"] for e in metrics["epochs"]] == pytest.approx([e["val_loss"] for e in ref["epochs"]],
                                                                       rel=1e-4)
    got, want = (np.load(io.BytesIO(storage.read_bytes(f"{d}/model/weights.npz"))) for d in (
        f"gs://{bucket}/runs/{name}", reference))
    assert sorted(got.files) == sorted(want.files)
    for key in want.files:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-4, atol=1e-5)


def _diagnose(state: Path, name: str, tmp_path: Path) -> str:
    out = [(tmp_path / "operator.log").read_text()[-3000:]]
    for log in sorted((state / "logs" / name).glob("*.log")) if (state / "logs" / name).exists() else []:
        out.append(f"--- {log.name}\n" + log.read_text()[-3000:])
    return "\n".join(out)


@pytest.mark.parametrize("engine_name", ["tfjob", "jobset"])
def test_a_worker_that_dies_of_sigsegv_after_its_results_is_restarted_and_the_job_succeeds(tmp_path, engine_name):
    """A native crash after the results are complete (#46): the replica ends by SIGSEGV (the trainer's own crash
    point, ``trainer.faults``), which both engines' ExitCode policies retry (a signal: 128 + 11); the restart finds
    the work done (tests/trainer/test_crash_after_fit.py: it exits 0 without training) and the job succeeds."""
    from landfall.local.controllers import make_operator
    from trainer import faults

    marker = tmp_path / "crashed"
    code = f"""
import os
os.environ[{faults.ENV!r}] = {f"{faults.FINISHED}:{marker}"!r}
from trainer import faults
faults.at(faults.FINISHED)
print("RESTARTED, NOTHING LEFT TO DO", flush=True)
"""
    op = make_operator(tmp_path / "state", poll_s=0.1, engine_name=engine_name)
    try:
        op.backend.create(script_job("segv", code, workers=1, engine=engine_name))
        job = run_until(op, "segv", ("Succeeded", "Failed"), timeout_s=60)
    finally:
        op.stop_all()
    assert engine.state(job) == "Succeeded", job["status"]
    assert job["status"]["local"]["restarts"] == 1 and marker.exists()
    log = op.backend.log_path("segv", 0).read_text()
    assert log.count("RESTARTED, NOTHING LEFT TO DO") == 1
