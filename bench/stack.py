"""A ``landfall up`` stack for the end-to-end benchmarks (``series_stack``, ``quarantine_stack``): started in a
scratch state folder with its own emulators, both functions and the local operator, as a user starts it; stopped
(SIGTERM, then SIGKILL of its process group) whatever happened."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

_STACK_ENV = ("PUBSUB_EMULATOR_HOST", "STORAGE_EMULATOR_HOST", "GOOGLE_CLOUD_PROJECT", "LANDFALL_BUCKET")


def landfall(env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """One ``landfall`` command in its own process, as an operator types it."""
    return subprocess.run([sys.executable, "-m", "landfall.cli", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def wait_for(predicate: Any, timeout: float, what: str) -> Any:
    """``predicate()``'s first truthy value, polled every second; ``TimeoutError`` naming ``what`` past ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(1.0)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


@contextlib.contextmanager
def local_stack(state: Path, extra: Sequence[str] = (), env: dict[str, str] | None = None,
                ready_s: float = 180) -> Iterator[tuple[dict[str, Any], dict[str, str]]]:
    """``landfall up --state-dir state *extra``; yields its ``stack.json`` and the environment its commands run in
    (``env`` over this process's, without another stack's emulators; trainer output quiet). This process's own
    Google clients are pointed at the stack's emulators too."""
    run_env = {k: v for k, v in os.environ.items() if k not in _STACK_ENV}
    run_env.update({"LANDFALL_STATE_DIR": str(state), "LANDFALL_TRAINER_ARGS": json.dumps(["--verbose", "0"])})
    run_env.update(env or {})
    up = subprocess.Popen([sys.executable, "-m", "landfall.cli", "up", "--state-dir", str(state), *extra],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=run_env, start_new_session=True)
    try:
        def ready() -> Any:
            try:
                info = json.loads((state / "stack.json").read_text())
            except (FileNotFoundError, ValueError):
                return None
            return info if "processes" in info else None

        info = wait_for(ready, ready_s, "landfall up")
        for key, value in (("STORAGE_EMULATOR_HOST", info["storage_emulator_host"]),
                           ("PUBSUB_EMULATOR_HOST", info["pubsub_emulator_host"]),
                           ("GOOGLE_CLOUD_PROJECT", info["project"])):
            os.environ[key] = value
        yield info, run_env
    finally:
        up.send_signal(signal.SIGTERM)
        try:
            up.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(up.pid, signal.SIGKILL)
