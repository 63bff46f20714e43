"""The emulator launchers fail loudly; the functions stay free of TensorFlow."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from landfall.local import emulators

FUNCTIONS = Path(__file__).parents[3] / "functions"


def test_a_configured_emulator_that_is_missing_is_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv("LANDFALL_PUBSUB_EMULATOR", str(tmp_path / "nope"))
    with pytest.raises(emulators.EmulatorError, match="LANDFALL_PUBSUB_EMULATOR"):
        emulators.start_pubsub(tmp_path, "p")


def test_an_emulator_that_dies_at_start_is_an_error(monkeypatch, tmp_path):
    fake = tmp_path / "cloud-pubsub-emulator"
    fake.write_text("echo 'cannot bind' >&2; exit 3\n")
    monkeypatch.setenv("LANDFALL_PUBSUB_EMULATOR", str(fake))
    with pytest.raises(emulators.EmulatorError, match="exited with 3"):
        emulators.start_pubsub(tmp_path, "p", timeout=10)


def test_the_deployed_functions_never_import_tensorflow():
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import main; "
            "from landfall.submit import handler; from landfall.arrival import handler; "
            "bad = [m for m in ('tensorflow', 'tf_keras', 'keras', 'matplotlib') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code, str(FUNCTIONS)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_fake_gcs_server_runs_under_go_s_soft_memory_limit_unless_the_environment_sets_one(tmp_path, monkeypatch):
    """The emulator's GOMEMLIMIT (emulators.GCS_MEMORY_LIMIT, why: docs/benchmarks.md, the local stack's memory)
    is in its environment; a GOMEMLIMIT the user set is kept."""
    def environ_of(pid: int) -> dict[str, str]:
        raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        return dict(item.decode().split("=", 1) for item in raw if b"=" in item)

    monkeypatch.delenv("GOMEMLIMIT", raising=False)
    proc, _ = emulators.start_gcs(tmp_path / "a")
    try:
        assert environ_of(proc.pid)["GOMEMLIMIT"] == emulators.GCS_MEMORY_LIMIT == "2GiB"
    finally:
        proc.stop()
    monkeypatch.setenv("GOMEMLIMIT", "6GiB")
    proc, _ = emulators.start_gcs(tmp_path / "b")
    try:
        assert environ_of(proc.pid)["GOMEMLIMIT"] == "6GiB"
    finally:
        proc.stop()


def _late(failures: int, calls: list[float]):
    """A start-up call that the emulator answers late ``failures`` times, as the client sees it: google-api-core's
    ``DeadlineExceeded`` (the ``504 Deadline Exceeded`` of a busy machine) through Landfall's error mapping."""
    import time

    from google.api_core import exceptions as gexc

    from landfall.core.services.google_api import mapped_errors

    def call() -> str:
        calls.append(time.monotonic())
        with mapped_errors("projects/p/subscriptions/s", "Pub/Sub"):
            if len(calls) <= failures:
                raise gexc.DeadlineExceeded("Deadline Exceeded")
        return "created"

    return call


def test_a_start_up_call_answered_late_is_retried_within_its_bound_then_names_the_service_and_the_bound():
    import time

    from landfall.core.errors import Invalid

    calls: list[float] = []
    assert emulators.ready_call("Pub/Sub emulator", "create subscription s", _late(3, calls), bound_s=30) == "created"
    assert len(calls) == 4 and calls[-1] - calls[0] < 10  # backoff from 0.2 s
    calls.clear()
    started = time.monotonic()
    with pytest.raises(emulators.EmulatorError, match=r"^Pub/Sub emulator: create subscription s still failing after "
                                                      r"1\.5 s of retries \(the bound\): .*Deadline Exceeded"):
        emulators.ready_call("Pub/Sub emulator", "create subscription s", _late(10**6, calls), bound_s=1.5)
    # google-api-core's Retry never sleeps past its deadline (jittered backoff): it gives up within the bound, after
    # retrying, but may stop before the bound when the next sleep would overrun it
    assert time.monotonic() - started < 1.5 + 5 and len(calls) >= 2

    def refused() -> None:
        calls.append(0.0)
        raise Invalid("bad subscription name")

    calls.clear()
    with pytest.raises(Invalid):  # a permanent answer is not retried
        emulators.ready_call("Pub/Sub emulator", "create subscription s", refused, bound_s=30)
    assert len(calls) == 1
