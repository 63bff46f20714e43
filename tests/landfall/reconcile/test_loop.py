"""The production reconcile loop: it releases a waiting follow-up once its predecessor ends, no failed pass
ends it whatever it raised, and its heartbeat is what the liveness probe checks."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from landfall import cli
from landfall.core.errors import TemporaryError
from landfall.reconcile import loop
from landfall.submit import coalesce, jobmeta
from landfall.submit.backends.local import LocalBackend
from landfall.submit.handler import handle_message
from tests.support import convert_arrival, copy_arrival, inputs_of, runtime, set_state


class FlakyFirstGet:
    """The backend, except that its first ``get`` fails as an unreachable API server would."""

    def __init__(self, backend: LocalBackend):
        self.backend, self.namespace, self.failed = backend, backend.namespace, 0

    def get(self, name):
        if not self.failed:
            self.failed += 1
            raise TemporaryError("tfjobs: Kubernetes API unreachable")
        return self.backend.get(name)

    def __getattr__(self, name):
        return getattr(self.backend, name)


def test_the_loop_survives_a_failed_pass_and_releases_the_follow_up(emulator_stack, bucket, tmp_path, monkeypatch):
    storage = emulator_stack.storage
    backend = LocalBackend(tmp_path / "state")
    rt = runtime(emulator_stack, bucket, backend)
    first = convert_arrival(storage, bucket, "loop", tmp_path)
    assert handle_message(first.to_json(), {}, rt) == "submitted"
    (active,) = backend.list("loop")
    set_state(backend, jobmeta.name_of(active), "Running")
    assert handle_message(copy_arrival(storage, first, 1).to_json(), {}, rt) == "coalesced"
    assert len(backend.list("loop")) == 1  # the follow-up waits as a pending request
    set_state(backend, jobmeta.name_of(active), "Succeeded")

    monkeypatch.setattr(loop, "MIN_POLL_S", 0.1)
    flaky, stop = FlakyFirstGet(backend), threading.Event()
    thread = threading.Thread(target=loop.run, args=(rt.config, storage, flaky, stop, 0.1))
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while len(backend.list("loop")) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()
    assert flaky.failed == 1
    (released,) = [j for j in backend.list("loop") if jobmeta.name_of(j) != jobmeta.name_of(active)]
    assert len(inputs_of(storage, released).manifests) == 2


def test_no_error_ends_the_loop_and_each_pass_beats(monkeypatch, tmp_path, json_logs):
    """A TFJob without Landfall's labels (KeyError) or a bug (RuntimeError): logged at ERROR with the traceback,
    and the loop goes on, touching the heartbeat after every pass; only ``stop`` ends it."""
    heartbeat = tmp_path / "alive"
    stop, passes, beats = threading.Event(), [], []
    outcomes = [KeyError("landfall.io/dataset"), RuntimeError("a bug"), TemporaryError("API unreachable"),
                ["follow-1"], []]

    def reconcile(backend, storage, cfg, layout=None, dataset=None):
        beats.append(heartbeat.stat().st_mtime_ns if heartbeat.exists() else None)
        passes.append(len(passes))
        if len(passes) > len(outcomes):
            stop.set()
            return []
        outcome = outcomes[len(passes) - 1]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    monkeypatch.setattr(coalesce, "reconcile", reconcile)
    monkeypatch.setattr(loop, "MIN_POLL_S", 0.01)
    thread = threading.Thread(target=loop.run, args=(None, None, None, stop, 0.01, heartbeat))
    thread.start()
    thread.join(timeout=20)
    assert not thread.is_alive()
    assert len(passes) == len(outcomes) + 1
    assert None not in beats  # touched when the loop starts, before the first pass
    assert loop.heartbeat_age(heartbeat) < 5
    lines = json_logs()
    errors = [e for e in lines if e["severity"] == "ERROR"]
    assert [e["message"] for e in errors] == ["reconcile pass failed (will retry): KeyError: 'landfall.io/dataset'",
                                              "reconcile pass failed (will retry): RuntimeError: a bug"]
    assert all("Traceback" in e["exception"] for e in errors)
    assert [e["message"] for e in lines if e["severity"] == "WARNING"] == [
        "reconcile pass failed (will retry): API unreachable"]
    assert [e["released"] for e in lines if e["severity"] == "INFO" and "released" in e] == [["follow-1"]]
    # The log line the monitoring's absence alert counts: after the first pass (a failed one), then once a minute.
    (beat,) = [e for e in lines if e["message"] == "reconciler heartbeat"]
    assert (beat["heartbeat"], beat["passes"], beat["failed"], beat["last_pass_ok"]) == (True, 1, 1, False)


def test_the_heartbeat_line_counts_the_passes_since_the_last(monkeypatch, tmp_path, json_logs):
    stop, passes = threading.Event(), []

    def reconcile(backend, storage, cfg, layout=None, dataset=None):
        passes.append(1)
        if len(passes) == 2:
            raise TemporaryError("API unreachable")
        if len(passes) >= 4:
            stop.set()
        return []

    monkeypatch.setattr(coalesce, "reconcile", reconcile)
    monkeypatch.setattr(loop, "MIN_POLL_S", 0.01)
    clock = iter([0.0, 0.0, 30.0, 61.0, 62.0, 200.0, 200.0])
    loop.run(None, None, None, stop, 0.01, monotonic=lambda: next(clock))
    beats = [(e["passes"], e["failed"], e["last_pass_ok"]) for e in json_logs()
             if e["message"] == "reconciler heartbeat"]
    assert beats == [(1, 0, True), (2, 1, True), (1, 0, True)]


def test_the_heartbeat_advances_with_every_pass(monkeypatch, tmp_path):
    heartbeat, stop, seen = tmp_path / "alive", threading.Event(), []

    def reconcile(*_args, **_kwargs):
        seen.append(heartbeat.stat().st_mtime)
        if len(seen) == 3:
            stop.set()
        raise ValueError("every pass fails")

    old = time.time() - 1000
    heartbeat.touch()
    monkeypatch.setattr(coalesce, "reconcile", reconcile)
    monkeypatch.setattr(loop, "MIN_POLL_S", 0.01)
    monkeypatch.setattr(loop, "beat", lambda path: os.utime(path, (old + len(seen), old + len(seen))))
    assert loop.run(None, None, None, stop, 0.01, heartbeat) == 0
    assert seen == [old, old + 1, old + 2]
    assert heartbeat.stat().st_mtime == old + 3  # and after the last pass


def test_check_heartbeat_is_fresh_stale_or_missing(tmp_path, capsys):
    path = tmp_path / "alive"
    check = ["reconcile", "--check-heartbeat", "--heartbeat", str(path)]
    assert cli.main(check) == 1
    assert "never written" in capsys.readouterr().err
    loop.beat(path)
    assert cli.main(check) == 0
    assert cli.main([*check, "--max-age-s", "30"]) == 0
    stale = time.time() - loop.MAX_HEARTBEAT_AGE_S - 5
    os.utime(path, (stale, stale))
    assert cli.main(check) == 1
    assert f"(max {loop.MAX_HEARTBEAT_AGE_S:g} s)" in capsys.readouterr().err
    assert cli.main([*check, "--max-age-s", "600"]) == 0


def test_the_probe_command_imports_no_cloud_sdk(tmp_path):
    """The liveness probe runs every period inside the reconciler's memory limit: it stays cheap."""
    path = tmp_path / "alive"
    loop.beat(path)
    code = ("import sys; from landfall import cli; rc = cli.main(['reconcile', '--check-heartbeat', '--heartbeat', "
            f"{str(path)!r}]); heavy = [m for m in sys.modules if m.startswith(('google.cloud.storage', "
            "'google.api_core', 'kubernetes', 'tensorflow', 'landfall.submit'))]; print(rc, heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "0 []", out.stderr


def test_scheduled_runs_collect_once_an_hour_between_them(monkeypatch):
    """The vertex engine's reconcile job: Cloud Scheduler starts a bounded run every minute (``--for-seconds``). Each
    run is a new process, so the collection rule's "at most once an hour" cannot live in memory: the run that starts
    in an hour's first minute collects, and no other. Without the window every run would collect."""
    from types import SimpleNamespace

    from landfall.reconcile import collect

    collected: list[float] = []
    monkeypatch.setattr(collect, "collect_all", lambda storage, cfg, layout, now, after_each: collected.append(now))
    monkeypatch.setattr(loop, "MIN_POLL_S", 0.0)
    cfg = SimpleNamespace(bucket="landfall-data")

    def one_run(start: float, window: float | None) -> None:
        stop = threading.Event()

        def reconcile(*_args, **_kwargs):
            stop.set()
            return []

        monkeypatch.setattr(coalesce, "reconcile", reconcile)
        loop.run(cfg, None, None, stop, 0.0, clock=lambda: start, collect_window_s=window)

    hour = 1_796_000_400.0  # an hour's start (divisible by 3600)
    assert hour % collect.COLLECT_EVERY_S == 0
    starts = [hour - 120 + 60 * i + 7 for i in range(122)]  # 23:58:07 ... 01:59:07, one run a minute
    for start in starts:
        one_run(start, loop.SCHEDULE_S)
    assert collected == [hour + 7, hour + 3600 + 7]
    collected.clear()
    for start in starts[:5]:
        one_run(start, None)
    assert len(collected) == 5


def test_reconcile_accepts_every_backend_and_a_bound():
    import argparse

    from landfall.cli import reconcile as command
    from landfall.core.config import BACKENDS

    p = argparse.ArgumentParser()
    command.add_arguments("reconcile", p)
    for backend in BACKENDS:
        args = p.parse_args(["--backend", backend, "--for-seconds", "50"])
        assert (args.backend, args.for_seconds) == (backend, 50.0)
    assert p.parse_args([]).for_seconds is None
