"""The production reconcile loop: it releases a waiting follow-up once its predecessor ends, and a failed
pass does not end it."""

from __future__ import annotations

import threading
import time

from landfall.core.errors import TemporaryError
from landfall.reconcile import loop
from landfall.submit import tfjob
from landfall.submit.backends.local import LocalBackend
from landfall.submit.handler import handle_message
from tests.support import convert_arrival, copy_arrival, runtime, set_state


class FlakyFirstList:
    """The backend, except that its first ``list`` fails as an unreachable API server would."""

    def __init__(self, backend: LocalBackend):
        self.backend, self.namespace, self.failed = backend, backend.namespace, 0

    def list(self, dataset=None):
        if not self.failed:
            self.failed += 1
            raise TemporaryError("tfjobs: Kubernetes API unreachable")
        return self.backend.list(dataset)

    def __getattr__(self, name):
        return getattr(self.backend, name)


def test_the_loop_survives_a_failed_pass_and_releases_the_follow_up(emulator_stack, bucket, tmp_path, monkeypatch):
    storage = emulator_stack.storage
    backend = LocalBackend(tmp_path / "state")
    rt = runtime(emulator_stack, bucket, backend)
    first = convert_arrival(storage, bucket, "loop", tmp_path)
    assert handle_message(first.to_json(), {}, rt) == "submitted"
    (active,) = backend.list("loop")
    set_state(backend, tfjob.name_of(active), "Running")
    assert handle_message(copy_arrival(storage, first, 1).to_json(), {}, rt) == "coalesced"
    (follow,) = [j for j in backend.list("loop") if tfjob.name_of(j) != tfjob.name_of(active)]
    assert tfjob.is_suspended(follow)
    set_state(backend, tfjob.name_of(active), "Succeeded")

    monkeypatch.setattr(loop, "MIN_POLL_S", 0.1)
    flaky, stop = FlakyFirstList(backend), threading.Event()
    thread = threading.Thread(target=loop.run, args=(rt.config, storage, flaky, stop, 0.1))
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while tfjob.is_suspended(backend.get(tfjob.name_of(follow))) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()
    assert flaky.failed == 1
    released = backend.get(tfjob.name_of(follow))
    assert not tfjob.is_suspended(released)
    assert len(tfjob.manifests_of(released)) == 2
