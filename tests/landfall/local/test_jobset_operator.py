"""The local JobSet controller (``landfall.local.jobset_controller``) against JobSet's published behaviour, encoded as
data with its source: pods per index with the env a pod gets, the Job's podFailurePolicy and backoffLimit, the
JobSet's failurePolicy (restarts counted in ``status.restarts``), successPolicy, the conditions and reasons
JobSet writes, suspend, and ttlSecondsAfterFinished. Scripts stand in for the trainer (cheap); the real
trainer runs under both engines in tests/landfall/local/test_operator.py."""

from __future__ import annotations

import json
import os
import time

import pytest

from landfall.core.errors import NotFound
from landfall.local.controllers import make_operator
from landfall.local.jobset_controller import JobSetOperator, jobset_action, pod_failure_action
from landfall.submit import jobset
from tests.landfall.local.test_operator import run_until, script_job

# kubernetes-sigs/jobset pkg/constants/constants.go and pkg/controllers/failure_policy.go (main, read
# 2026-12-01); Kubernetes batch/v1 Job failure reasons (https://kubernetes.io/docs/concepts/workloads/controllers/job/).
JOBSET = {
    "source": "https://github.com/kubernetes-sigs/jobset/blob/main/pkg/constants/constants.go",
    "read": "2026-12-01",
    "completed": ("Completed", "AllJobsCompleted", "jobset completed successfully"),
    "fail_action": ("Failed", "FailJobSetFailurePolicyAction", "applying FailJobSet failure policy action"),
    "max_restarts": ("Failed", "ReachedMaxRestarts", "jobset failed due to reaching max number of restarts"),
    "no_policy": ("Failed", "FailedJobs", "jobset failed due to one or more job failures"),
    "suspended": ("Suspended", "SuspendedJobs", "jobset is suspended"),
    "resumed": ("Suspended", "ResumeJobs", "jobset is resumed"),
    # messageWithFirstFailedJob: "%s (first failed job: %s)"; child Job names: <jobset>-<rjob>-<index>
    "first_failed": "{message} (first failed job: {jobset}-{rjob}-{index})",
    "default_action": "RestartJobSet",
}
JOB_REASONS = {"pod_failure_policy": "PodFailurePolicy", "backoff": "BackoffLimitExceeded",
               "deadline": "DeadlineExceeded"}


def script_jobset(name: str, code: str, workers: int = 2, **kw) -> dict:
    return script_job(name, code, workers, engine="jobset", **kw)


def condition(js: dict, kind: str) -> tuple[str, str, str]:
    (c,) = [c for c in jobset.conditions(js) if c["type"] == kind]
    return c["type"], c["reason"], c["message"]


def first_failed(key: str, name: str) -> tuple[str, str, str]:
    kind, reason, message = JOBSET[key]
    return kind, reason, JOBSET["first_failed"].format(message=message, jobset=name, rjob="worker", index=0)


@pytest.fixture
def op(tmp_path):
    operator = make_operator(tmp_path / "state", poll_s=0.1, engine_name="jobset")
    assert isinstance(operator, JobSetOperator) and operator.backend.api.plural == "jobsets"
    yield operator
    operator.stop_all()


def test_policies_match_as_the_controllers_do() -> None:
    js = script_jobset("p", "")
    spec = js["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert [pod_failure_action(spec, "tensorflow", c) for c in (1, 3, 127, 128, 137, 255)] == [
        "FailJob", "FailJob", "FailJob", "Count", "Count", "Count"]
    assert pod_failure_action(spec, "sidecar", 3) == "Count"  # the rule names the trainer's container
    assert jobset_action(js["spec"], "worker", JOB_REASONS["pod_failure_policy"]) == "FailJobSet"
    assert jobset_action(js["spec"], "worker", JOB_REASONS["deadline"]) == "FailJobSet"
    assert jobset_action(js["spec"], "worker", JOB_REASONS["backoff"]) == JOBSET["default_action"]
    assert jobset_action({}, "worker", JOB_REASONS["backoff"]) is None


def test_pods_get_their_index_labels_and_a_retryable_exit_restarts_the_group(op, tmp_path) -> None:
    marker = tmp_path / "attempted"
    code = f"""
import json, os, pathlib, sys
from trainer.training.cluster import Cluster
cluster = Cluster.from_env()
print("POD", json.dumps({{k: os.environ.get(k) for k in ("LANDFALL_JOBSET_NAME", "LANDFALL_REPLICATED_JOB",
      "LANDFALL_JOB_INDEX", "JOB_COMPLETION_INDEX", "TF_CONFIG")}}), flush=True)
print("BUILT", cluster.built_tf_config, flush=True)
m = pathlib.Path({str(marker)!r} + os.environ["JOB_COMPLETION_INDEX"])
if not m.exists():
    m.touch()
    if os.environ["JOB_COMPLETION_INDEX"] == "1":
        sys.exit(130)
    __import__("time").sleep(30)
"""
    op.env["TF_CONFIG"] = '{"cluster": {}}'  # an operator's own TF_CONFIG never reaches a JobSet pod
    op.backend.create(script_jobset("restart-ok", code))
    js = run_until(op, "restart-ok", ("Succeeded", "Failed"))
    assert condition(js, "Completed") == JOBSET["completed"], js["status"]
    assert js["status"]["restarts"] == 1 and js["status"]["restartsCountTowardsMax"] == 1
    assert js["status"]["terminalState"] == "Completed"
    logs = [op.backend.log_path("restart-ok", i).read_text() for i in range(2)]
    for i, log in enumerate(logs):
        pods = [json.loads(line[4:]) for line in log.splitlines() if line.startswith("POD ")]
        built = [json.loads(line[6:]) for line in log.splitlines() if line.startswith("BUILT ")]
        assert len(pods) == len(built) == 2  # both pods ran twice: the group restarts, not one pod
        env, built = pods[0], built[1]
        assert env == {"LANDFALL_JOBSET_NAME": "restart-ok", "LANDFALL_REPLICATED_JOB": "worker",
                       "LANDFALL_JOB_INDEX": "0", "JOB_COMPLETION_INDEX": str(i), "TF_CONFIG": None}
        assert built["task"] == {"type": "worker", "index": i} and len(set(built["cluster"]["worker"])) == 2
        assert all(w.startswith("127.0.0.1:") for w in built["cluster"]["worker"])
        assert f"pod restart-ok-worker-0-{i}" in log and "attempt 2 (restart 1: BackoffLimitExceeded" in log


def test_permanent_exit_max_restarts_and_deadline_fail_the_jobset(op) -> None:
    op.backend.create(script_jobset("perm", "import sys; sys.exit(3)", workers=2))
    op.backend.create(script_jobset("flaky", "import sys; sys.exit(129)", workers=1, backoff_limit=2))
    op.backend.create(script_jobset("killed", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
                                    workers=1, backoff_limit=0))
    op.backend.create(script_jobset("slow", "import time; time.sleep(60)", workers=2, active_deadline_seconds=2))
    perm = run_until(op, "perm", ("Succeeded", "Failed"))
    assert condition(perm, "Failed") == first_failed("fail_action", "perm") and perm["status"].get("restarts", 0) == 0
    flaky = run_until(op, "flaky", ("Succeeded", "Failed"))
    assert condition(flaky, "Failed") == first_failed("max_restarts", "flaky") and flaky["status"]["restarts"] == 2
    killed = run_until(op, "killed", ("Succeeded", "Failed"))  # exit 128+9: retryable, but no restart left
    assert condition(killed, "Failed") == first_failed("max_restarts", "killed")
    slow = run_until(op, "slow", ("Succeeded", "Failed"))
    assert condition(slow, "Failed") == first_failed("fail_action", "slow")  # DeadlineExceeded -> FailJobSet
    assert slow["status"]["terminalState"] == "Failed" and slow["status"].get("restarts", 0) == 0
    for r in slow["status"]["local"]["replicas"]:
        with pytest.raises(ProcessLookupError):
            os.kill(r["pid"], 0)


def test_no_failure_policy_fails_on_the_first_failed_job(op) -> None:
    js = script_jobset("strict", "import sys; sys.exit(200)", workers=1)
    del js["spec"]["failurePolicy"]
    op.backend.create(js)
    done = run_until(op, "strict", ("Succeeded", "Failed"))
    assert condition(done, "Failed") == first_failed("no_policy", "strict")


def test_suspend_resume_and_ttl(op) -> None:
    op.backend.create(script_jobset("held", "import time; time.sleep(0.5)", workers=1,
                                    ttl_seconds_after_finished=1))
    op.backend.patch("held", {"spec": {"suspend": True}})
    held = run_until(op, "held", ("Suspended",))
    assert condition(held, "Suspended")[:2] == JOBSET["suspended"][:2] and "local" not in held["status"]
    op.backend.patch("held", {"spec": {"suspend": None}})
    done = run_until(op, "held", ("Succeeded",))
    assert condition(done, "Suspended")[:2] == JOBSET["resumed"][:2]
    assert condition(done, "Completed") == JOBSET["completed"]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # ttlSecondsAfterFinished: 1 -> deleted a second after it completed
        op.tick()
        try:
            op.backend.get("held")
        except NotFound:
            break
        time.sleep(0.2)
    else:
        raise AssertionError("the finished JobSet was not deleted after its ttlSecondsAfterFinished")
