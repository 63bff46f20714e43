"""The retrain policy's one decision (``landfall.submit.policy.decide``) and its configuration, on made-up times."""

from __future__ import annotations

import pytest

from landfall.core.rules import cost
from landfall.submit.policy import DAY_S, DEFAULT_MAX_WAIT_S, PastJob, RetrainPolicy, Waiting, decide

T = 1_800_000_000.0


def test_everything_off_by_default_releases_at_once():
    policy = RetrainPolicy.load({})
    assert not policy.active
    assert decide(policy, [Waiting(T)], [PastJob(T - 10, T - 5, 1e9)] * 50, T).release


def test_env_defaults_and_a_spec_section_over_them():
    base = RetrainPolicy.load({"LANDFALL_QUIET_S": "10", "LANDFALL_GPU_HOURS_PER_DAY": "2.5"})
    assert (base.quiet_s, base.gpu_hours_per_day, base.max_jobs_per_day) == (10.0, 2.5, 0)
    spec = RetrainPolicy.from_mapping({"max_jobs_per_day": 3, "quiet_s": 30}, base)
    assert (spec.quiet_s, spec.gpu_hours_per_day, spec.max_jobs_per_day) == (30, 2.5, 3)
    assert RetrainPolicy.from_mapping(None, base) == base
    with pytest.raises(ValueError, match="unknown field"):
        RetrainPolicy.from_mapping({"quiet": 3}, base)
    with pytest.raises(ValueError, match="max_jobs_per_day must be a number >= 0"):
        RetrainPolicy.from_mapping({"max_jobs_per_day": -1})
    with pytest.raises(ValueError, match="must not exceed max_wait_s"):
        RetrainPolicy(quiet_s=60, max_wait_s=30)
    with pytest.raises(ValueError, match="LANDFALL_QUIET_S"):
        RetrainPolicy.load({"LANDFALL_QUIET_S": "soon"})


def test_quiet_period_until_the_last_request_is_quiet_s_old_or_the_oldest_max_wait_s():
    policy = RetrainPolicy(quiet_s=10, max_wait_s=60)
    burst = [Waiting(T + i) for i in range(5)]  # T .. T+4
    held = decide(policy, burst, [], T + 13.9)
    assert not held.release and held.holds[0].rule == "quiet_s" and held.until == T + 14
    assert decide(policy, burst, [], T + 14).release
    # A trickle that never goes quiet is released max_wait_s after its oldest request.
    trickle = [Waiting(T + 5 * i) for i in range(20)]
    assert decide(policy, trickle, [], T + 59).until == T + 60
    assert decide(policy, trickle, [], T + 60).release
    # Unset, the bound is a day.
    day_long = [Waiting(T), Waiting(T + DEFAULT_MAX_WAIT_S - 1)]
    assert decide(RetrainPolicy(quiet_s=10), day_long, [], T + DEFAULT_MAX_WAIT_S - 0.5).until == T + DEFAULT_MAX_WAIT_S


def test_min_new_instances_counts_what_the_arrivals_add_and_a_manual_request_satisfies_it():
    policy = RetrainPolicy(min_new_instances=100, max_wait_s=3600)
    small = [Waiting(T, 30), Waiting(T + 1, 40)]
    held = decide(policy, small, [], T + 2)
    assert held.holds[0].rule == "min_new_instances" and "70 instances" in held.reason
    assert held.until == T + 3600  # held at most max_wait_s after the oldest
    assert decide(policy, [*small, Waiting(T + 2, 30)], [], T + 3).release
    assert decide(policy, [*small, Waiting(T + 2, 0, manual=True)], [], T + 3).release
    assert decide(policy, small, [], T + 3600).release


def test_max_jobs_per_day_over_a_rolling_window():
    policy = RetrainPolicy(max_jobs_per_day=2)
    jobs = [PastJob(T - DAY_S - 5, T - DAY_S), PastJob(T - 1000, T - 900), PastJob(T - 100, T - 50)]
    held = decide(policy, [Waiting(T)], jobs, T)
    assert held.holds[0].rule == "max_jobs_per_day" and "2 jobs released" in held.reason
    assert held.until == T - 1000 + DAY_S  # the oldest of the two in the window leaves it
    assert decide(policy, [Waiting(T)], jobs, T - 1000 + DAY_S).release
    assert decide(RetrainPolicy(max_jobs_per_day=3), [Waiting(T)], jobs, T).release


def test_gpu_budget_counts_ended_jobs_and_frees_when_enough_leave_the_window():
    policy = RetrainPolicy(gpu_hours_per_day=2)
    jobs = [PastJob(T - 5000, T - 4000, 3600), PastJob(T - 3000, T - 2000, 1800), PastJob(T - 900, T - 100, 3600)]
    held = decide(policy, [Waiting(T)], jobs, T)  # 2.5 GPU-hours in the window
    assert held.holds[0].rule == "gpu_hours_per_day" and held.until == T - 4000 + DAY_S
    assert decide(policy, [Waiting(T)], jobs, T - 4000 + DAY_S).release  # 1.5 h left < 2
    assert decide(policy, [Waiting(T)], jobs[:2], T).release  # 1.5 h: under the budget
    # A job still running (no end, no GPU-seconds yet) does not count.
    assert decide(RetrainPolicy(gpu_hours_per_day=1), [Waiting(T)], [PastJob(T - 10)], T).release


def test_every_hold_reported_and_until_is_when_all_have_ended():
    policy = RetrainPolicy(quiet_s=10, max_jobs_per_day=1, gpu_hours_per_day=1)
    held = decide(policy, [Waiting(T)], [PastJob(T - 3600, T - 60, 7200)], T + 1)
    assert {h.rule for h in held.holds} == {"quiet_s", "max_jobs_per_day", "gpu_hours_per_day"}
    assert held.until == max(T - 3600 + DAY_S, T - 60 + DAY_S, T + 10)


def test_cost_fields_from_the_price_table():
    fields = cost.fields(2, 4, 900, "nvidia-l4", "chief")
    assert fields["gpu_seconds"] == 7200 and fields["estimated_cost"] == pytest.approx(2 * 0.56)
    assert cost.fields(2, 1, 3600, "nvidia-l4", "chief", env={"LANDFALL_GPU_PRICES": '{"nvidia-l4": 1.5}'})[
        "estimated_cost"] == pytest.approx(3.0)
    assert cost.fields(1, 1, 60, "no-such-gpu", "chief")["estimated_cost"] is None  # unknown, not free
    assert cost.fields(2, 0, 600, "nvidia-l4", "chief")["estimated_cost"] == 0.0  # no GPU, no GPU cost
