"""A job's queued time apart from its training time in ``landfall status`` (issue #41): a job waiting for capacity
(Kueue holds it suspended until its ProvisioningRequest is provisioned, or its pods wait for nodes) shows how long it
has waited so far; once the chief starts, the queue ends and GPU time (training) begins, as the cost record counts."""

from __future__ import annotations

from landfall.cli.status import job_times


def test_a_waiting_job_counts_its_queue_so_far_and_a_started_one_splits_queue_from_training():
    created = "2026-12-03T10:00:00Z"
    now = lambda: 1796292000.0 + 90  # noqa: E731 (2026-12-03T10:01:30Z)
    waiting = job_times({"created": created, "metrics": None}, now)
    assert waiting == {"queued_s": 90.0, "waiting": True, "training_s": None}
    running = job_times({"created": created, "metrics": {"started_at": "2026-12-03T10:00:40+00:00"}}, now)
    assert running == {"queued_s": 40.0, "waiting": False, "training_s": 50.0}
    done = job_times({"created": created, "metrics": {"started_at": "2026-12-03T10:00:40+00:00",
                                                      "ended_at": "2026-12-03T10:01:10+00:00"}}, now)
    assert done == {"queued_s": 40.0, "waiting": False, "training_s": 30.0}
    assert job_times({"created": "", "metrics": None}, now)["queued_s"] is None  # no creation time: unknown


def test_the_report_shows_the_same_split():
    from landfall.views import page

    assert page.times_html({"queued_s": 90.0, "waiting": True, "training_s": None}) == (
        '<br><span class="queued">queued 90 s so far: waiting for capacity</span>')
    assert "queued 40 s, then training 30 s" in page.times_html({"queued_s": 40.0, "waiting": False,
                                                                     "training_s": 30.0})
    assert page.times_html({"queued_s": None}) == ""
