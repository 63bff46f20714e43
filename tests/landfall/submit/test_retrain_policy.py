"""The retrain policy through the real submit stage and reconciler (Cloud Storage emulator, local backend), on a
fake clock: a burst becomes one job; a budget holds the next job until the window frees; nothing is lost.

The policy comes from the environment (``LANDFALL_QUIET_S`` ...: ``coalesce.policy_for``'s defaults); the clock
is ``Runtime.clock`` and ``coalesce.reconcile(clock=)``. What a held release looks like is what ``landfall
status`` reports (``status.collect``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from landfall.cli import status
from landfall.core.contracts import layout
from landfall.core.contracts.messages import TrainingRequest
from landfall.submit import coalesce, jobmeta, spend
from landfall.submit.backends.local import LocalBackend
from landfall.submit.handler import handle_message
from tests.support import FakeClock, convert_arrival, copy_arrival, inputs_of, pending_of, runtime, set_state

DAY = 86400.0


def _iso(t: float, timespec: str = "milliseconds") -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec=timespec).replace("+00:00", "Z")


def _setup(emulator_stack, bucket, tmp_path, dataset: str, instances: int = 16):
    """The runtime on a fake clock, and ``arrive()``: the next arrival's manifest, converted now, and its request
    (converted before a job is released, a manifest is in that job's inputs and its request covered)."""
    storage = emulator_stack.storage
    clock = FakeClock()
    rt = runtime(emulator_stack, bucket, LocalBackend(tmp_path / "state"))
    rt.clock = clock
    first = convert_arrival(storage, bucket, dataset, tmp_path, n=instances)
    made = []

    def arrive() -> TrainingRequest:
        made.append(first if not made else copy_arrival(storage, first, len(made)))
        return made[-1]

    return rt, clock, arrive


def _reconcile(rt, clock) -> list[str]:
    return coalesce.reconcile(rt.backend, rt.storage, rt.config, rt.layout, clock=clock)


def _jobs(rt, dataset: str) -> list[dict]:
    return sorted(rt.backend.list(dataset), key=lambda j: inputs_of(rt.storage, j).seq)


def test_fifty_arrivals_over_thirty_seconds_with_quiet_s_10_make_one_job_about_10_s_after_the_last(
        emulator_stack, bucket, tmp_path, monkeypatch):
    monkeypatch.setenv("LANDFALL_QUIET_S", "10")
    rt, clock, arrive = _setup(emulator_stack, bucket, tmp_path, "burst")
    requests = [arrive() for _ in range(50)]
    start = clock.now
    outcomes = []
    for i, request in enumerate(requests):
        clock.now = start + 30.0 * i / (len(requests) - 1)  # 50 arrivals spread over 30 s
        outcomes.append(handle_message(request.to_json(), {}, rt))
        if i % 5 == 0:  # the reconciler passes meanwhile: nothing is quiet yet
            assert _reconcile(rt, clock) == []
    assert outcomes == ["held"] * 50
    last = clock.now
    released, at = [], None
    while not released and clock.now < last + 60:
        clock.advance(0.25)  # a reconciler passing every 0.25 s of the fake clock
        released = _reconcile(rt, clock)
        at = clock.now
    (job,) = _jobs(rt, "burst")
    assert released == [jobmeta.name_of(job)]
    assert last + 10 <= at <= last + 10.25, at - last  # released about 10 s after the last arrival
    inputs = inputs_of(rt.storage, job)
    assert sorted(r["request_id"] for r in inputs.requests) == sorted(r.request_id for r in requests)
    assert {r.manifest for r in requests} <= set(inputs.manifest_uris)
    assert pending_of(rt.storage, bucket, "burst") == []
    # A later arrival waits for this job to end: still one job.
    later = copy_arrival(rt.storage, requests[0], 99)
    assert handle_message(later.to_json(), {}, rt) == "coalesced"
    assert len(_jobs(rt, "burst")) == 1


def test_a_gpu_budget_one_job_exhausts_holds_the_next_until_the_window_frees_and_loses_nothing(
        emulator_stack, bucket, tmp_path, monkeypatch):
    monkeypatch.setenv("LANDFALL_GPU_HOURS_PER_DAY", "1")
    rt, clock, arrive = _setup(emulator_stack, bucket, tmp_path, "budget")
    t0 = clock.now
    a1 = arrive()
    assert handle_message(a1.to_json(), {}, rt) == "submitted"
    (job1,) = _jobs(rt, "budget")
    name1 = jobmeta.name_of(job1)
    # The chief's record: 1 GPU-hour (say 2 workers x 1 GPU for 30 minutes), ended 10 minutes after its release.
    rt.storage.write_bytes(jobmeta.job_dir(bucket, name1) + "/metrics.json", json.dumps({
        "status": "succeeded", "started_at": _iso(t0 + 600 - 1800), "ended_at": _iso(t0 + 600),
        "gpu_seconds": 3600.0, "accelerator": "nvidia-l4", "estimated_cost": 0.56}).encode())
    set_state(rt.backend, name1, "Succeeded")
    clock.now = t0 + 700
    a2 = arrive()
    assert handle_message(a2.to_json(), {}, rt) == "held"
    clock.now = t0 + 800
    a3 = arrive()
    assert handle_message(a3.to_json(), {}, rt) == "held"
    assert pending_of(rt.storage, bucket, "budget") == sorted([a2.request_id, a3.request_id])

    shown = status.collect(rt.config, rt.storage, rt.backend, "budget", clock=clock)["datasets"]["budget"]["retrain"]
    frees = t0 + 600 + DAY  # job 1's GPU-hour leaves the rolling 24 h window
    assert shown["next"]["state"] == "held" and shown["next"]["until"] == _iso(frees, "seconds")
    assert [h["rule"] for h in shown["next"]["holds"]] == ["gpu_hours_per_day"]
    assert shown["spend"]["last_24h"]["gpu_hours"] == 1.0 and shown["spend"]["last_24h"]["estimated_cost"] == 0.56
    assert shown["spend"]["last_30d"]["jobs"] == 1 and shown["spend"]["budget"]["gpu_hours_per_day"] == 1
    held_line, spend_line = status.retrain_lines(shown)  # what `landfall status` prints for the dataset
    assert held_line.startswith(f"held      next release held until {_iso(frees, 'seconds')}: 1 GPU-hours spent")
    assert spend_line.startswith("spend     24 h: 1.000 GPU-h of 1 GPU-h/day, $0.56, 1 job(s) released; 30 d:")

    clock.now = frees - 1
    assert _reconcile(rt, clock) == []
    assert len(_jobs(rt, "budget")) == 1
    clock.now = frees
    (name2,) = _reconcile(rt, clock)  # no new arrival needed
    jobs = _jobs(rt, "budget")
    assert [jobmeta.name_of(j) for j in jobs] == [name1, name2]
    covered = [sorted(r["request_id"] for r in inputs_of(rt.storage, j).requests) for j in jobs]
    assert covered == [[a1.request_id], sorted([a2.request_id, a3.request_id])]
    assert pending_of(rt.storage, bucket, "budget") == []
    # A day on, the first job's spend is outside the 24 h window, still in the 30 days.
    later = status.collect(rt.config, rt.storage, rt.backend, "budget", clock=clock)["datasets"]["budget"]["retrain"]
    assert later["spend"]["last_24h"]["gpu_hours"] == 0 and later["spend"]["last_30d"]["gpu_hours"] == 1.0
    assert "next" not in later


def test_max_jobs_per_day_holds_the_third_job_until_the_first_leaves_the_window(
        emulator_stack, bucket, tmp_path, monkeypatch):
    monkeypatch.setenv("LANDFALL_MAX_JOBS_PER_DAY", "2")
    rt, clock, arrive = _setup(emulator_stack, bucket, tmp_path, "capped")
    t0 = clock.now
    for i in range(2):
        clock.now = t0 + 10 * i
        assert handle_message(arrive().to_json(), {}, rt) == "submitted"
        set_state(rt.backend, jobmeta.name_of(_jobs(rt, "capped")[-1]), "Succeeded")
    clock.now = t0 + 20
    third = arrive()
    assert handle_message(third.to_json(), {}, rt) == "held"
    report = status.collect(rt.config, rt.storage, rt.backend, "capped", clock=clock)["datasets"]["capped"]
    assert report["retrain"]["next"]["until"] == _iso(t0 + DAY, "seconds")
    assert "2 jobs released in the last 24 h" in report["retrain"]["next"]["reason"]
    clock.now = t0 + DAY - 1
    assert _reconcile(rt, clock) == []
    clock.now = t0 + DAY
    assert len(_reconcile(rt, clock)) == 1
    assert [r["request_id"] for r in inputs_of(rt.storage, _jobs(rt, "capped")[-1]).requests] == [third.request_id]


def test_min_new_instances_waits_for_enough_data_or_max_wait_s_and_a_manual_request_goes_at_once(
        emulator_stack, bucket, tmp_path, monkeypatch):
    monkeypatch.setenv("LANDFALL_MIN_NEW_INSTANCES", "40")
    monkeypatch.setenv("LANDFALL_MAX_WAIT_S", "600")
    rt, clock, arrive = _setup(emulator_stack, bucket, tmp_path, "small", instances=16)
    t0 = clock.now
    assert handle_message(arrive().to_json(), {}, rt) == "held"  # 16 of 40
    clock.now = t0 + 1
    assert handle_message(arrive().to_json(), {}, rt) == "held"  # 32 of 40
    assert "add 32 instances" in status.collect(rt.config, rt.storage, rt.backend, "small", clock=clock)[
        "datasets"]["small"]["retrain"]["next"]["reason"]
    clock.now = t0 + 2
    assert handle_message(arrive().to_json(), {}, rt) == "submitted"  # 48: enough
    (job1,) = _jobs(rt, "small")
    assert len(inputs_of(rt.storage, job1).requests) == 3
    set_state(rt.backend, jobmeta.name_of(job1), "Succeeded")
    # Too little again: released max_wait_s after it was recorded, by the reconciler.
    clock.now = t0 + 100
    assert handle_message(arrive().to_json(), {}, rt) == "held"
    clock.now = t0 + 699
    assert _reconcile(rt, clock) == []
    clock.now = t0 + 700
    assert len(_reconcile(rt, clock)) == 1
    set_state(rt.backend, jobmeta.name_of(_jobs(rt, "small")[-1]), "Succeeded")
    # Someone asked for a run: a manual request is not held for what it adds.
    ask = TrainingRequest(dataset="small", manifest=arrive().manifest, request_id=layout.request_id(bucket, "m", 1),
                          reason="manual")
    assert handle_message(ask.to_json(), {}, rt) == "submitted"
    assert len(_jobs(rt, "small")) == 3


def test_a_release_whose_spend_entry_was_lost_is_still_counted_from_its_inputs(emulator_stack, bucket, tmp_path,
                                                                                monkeypatch):
    """A releaser that died between the release and its spend entry: the next decision adds the ended head from
    its ``inputs.json`` (released_at) and the chief's metrics, so the budget still counts it."""
    monkeypatch.setenv("LANDFALL_MAX_JOBS_PER_DAY", "1")
    rt, clock, arrive = _setup(emulator_stack, bucket, tmp_path, "crashed")
    t0 = clock.now
    assert handle_message(arrive().to_json(), {}, rt) == "submitted"
    rt.storage.delete(spend.uri(bucket, rt.layout, "crashed"))  # as if the releaser died before writing it
    (job1,) = _jobs(rt, "crashed")
    set_state(rt.backend, jobmeta.name_of(job1), "Succeeded")
    clock.now = t0 + 60
    assert handle_message(arrive().to_json(), {}, rt) == "held"
    record, _ = spend.read(rt.storage, bucket, rt.layout, "crashed")
    (entry,) = record.jobs
    assert entry["job"] == jobmeta.name_of(job1) and abs(entry["released_at"] - t0) < 1
    assert entry["cost_basis"] == "job_object" and entry["gpu_seconds"] == 0  # no GPU in this test's jobs
    clock.now = entry["released_at"] + DAY
    assert len(_reconcile(rt, clock)) == 1
