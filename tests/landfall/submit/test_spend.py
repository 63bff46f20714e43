"""The spend record stays bounded whatever the history (``landfall.submit.spend.prune``), and its figures are
the window's: 24 h exact, 30 days to the day."""

from __future__ import annotations

import json

from landfall.submit import spend
from landfall.submit.policy import DAY_S, RetrainPolicy

T = 1_800_000_000.0


def _entry(i: int, released: float, hours: float = 1.0) -> dict:
    return {"job": f"j{i}", "seq": i, "released_at": released, "ended_at": released + 600,
            "gpu_seconds": hours * 3600, "estimated_cost": hours * 0.56, "accelerator": "nvidia-l4",
            "cost_basis": "chief"}


def test_forty_days_of_jobs_fold_into_at_most_thirty_one_day_totals_and_one_day_of_entries():
    record = spend.Record("d", [_entry(i, T - 40 * DAY_S + i * 3 * 3600) for i in range(40 * 8)])  # 8 a day
    assert spend.prune(record, T)
    assert len(record.days) <= spend.RETENTION_DAYS + 1
    assert all(e["ended_at"] > T - DAY_S or e["released_at"] > T - DAY_S for e in record.jobs)
    assert len(record.jobs) <= 9 and len(record.to_json()) < 8000
    summary = spend.summary(record, RetrainPolicy(gpu_hours_per_day=4), T)
    in_day = sum(1 for i in range(320) if T - 40 * DAY_S + i * 3 * 3600 + 600 > T - DAY_S)
    assert summary["last_24h"]["gpu_hours"] == in_day
    assert 30 * 8 <= summary["last_30d"]["jobs"] <= 31 * 8  # to the day
    assert summary["last_30d"]["estimated_cost"] == round(summary["last_30d"]["gpu_hours"] * 0.56, 6)
    assert summary["budget"] == {"gpu_hours_per_day": 4, "max_jobs_per_day": None}
    assert not spend.prune(record, T)  # nothing left to fold: not rewritten


def test_a_running_job_is_never_folded_and_shown_running():
    record = spend.Record("d", [{**_entry(1, T - 3 * DAY_S), "ended_at": None, "gpu_seconds": None}])
    spend.prune(record, T)
    assert [e["job"] for e in record.jobs] == ["j1"]
    assert spend.summary(record, RetrainPolicy(), T)["running"] == ["j1"]
    assert json.loads(record.to_json())["schema"] == spend.SPEND_SCHEMA
