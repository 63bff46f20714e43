"""Child processes that die with the process that started them, however it ends (issue #46).

``popen(argv, ...)`` starts ``argv`` under a leash: a small stdlib-only watcher (this file run as a script) that is
the leader of a new process group and session, starts ``argv`` in that group, and holds the read end of a pipe
whose write end only the starting process holds. When the starter exits for any reason (a return, a crash, a
SIGKILL) the kernel closes its end, the watcher reads end-of-file, sends SIGTERM to the group, and SIGKILL after
``GRACE_S``. Nothing polls the parent's pid (pids are reused) and nothing depends on which thread started the
child (Linux's ``PR_SET_PDEATHSIG`` fires when the starting *thread* ends, which kills an emulator that a worker
thread started).

To the caller the leash is the child: the ``Popen`` it returns is the watcher's, whose pid leads the group (so
``os.killpg(p.pid, ...)`` reaches the child, as with ``start_new_session=True``), and whose exit status is the
child's: a child ended by a signal ends the watcher by the same signal.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import subprocess
import sys
import time
import weakref
from pathlib import Path
from typing import Any

GRACE_S = 5.0
PR_SET_PDEATHSIG = 1  # linux/prctl.h
_libc = ctypes.CDLL(None, use_errno=True)  # loaded here: a forked child only calls it


def popen(argv: list[str], **kwargs: Any) -> subprocess.Popen:
    """``subprocess.Popen(argv, start_new_session=True, **kwargs)``, leashed to this process's life."""
    kwargs.pop("start_new_session", None)
    read, write = os.pipe()  # both non-inheritable: the read end passes to the watcher alone (pass_fds)
    try:
        proc = subprocess.Popen([sys.executable, "-I", str(Path(__file__).resolve()), str(read), "--", *argv],
                                start_new_session=True, pass_fds=(read, *kwargs.pop("pass_fds", ())), **kwargs)
    except BaseException:
        os.close(write)
        raise
    finally:
        os.close(read)
    weakref.finalize(proc, os.close, write)  # held while the caller holds the Popen: a long-lived operator leaks none
    return proc


def stop_group(proc: subprocess.Popen[bytes], grace_s: float = GRACE_S) -> None:
    """SIGTERM the group ``proc`` leads (a leashed child: ``popen``), SIGKILL what is left after ``grace_s``."""
    if proc.poll() is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # stragglers of an exited leader
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)


def _die_with_parent() -> None:
    """The watcher's ``preexec_fn``: the child gets SIGKILL when the watcher ends (Linux's ``PR_SET_PDEATHSIG``,
    which fires when the starting *thread* ends: the watcher has one). Never from a process that runs gRPC: Python
    code between ``fork`` and ``exec`` there runs gRPC's fork handlers, which abort the child."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _watch(fd: int, argv: list[str]) -> int:  # runs in the watcher
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: None)  # the group's signal reaches the child too; wait for it to end
    try:  # and the child dies with the watcher (one thread here, so the thread rule of PDEATHSIG is no trap)
        child = subprocess.Popen(argv, preexec_fn=_die_with_parent)
    except OSError as exc:
        print(f"leash: cannot start {argv[0]}: {exc}", file=sys.stderr, flush=True)
        return 127
    parent_gone = False
    while child.poll() is None:
        try:
            ready, _, _ = select.select([fd], [], [], 0.2)
        except InterruptedError:
            continue
        if ready and not os.read(fd, 1):
            parent_gone = True
            break
    if parent_gone:
        os.killpg(0, signal.SIGTERM)
        deadline = time.monotonic() + GRACE_S
        while child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.killpg(0, signal.SIGKILL)  # the child's own children too; this ends the watcher as well
    code = child.wait()
    if code < 0:  # the same end as the child's
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # those two have no handler to reset
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        time.sleep(1)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    read_fd, sep, *command = sys.argv[1:]
    raise SystemExit(_watch(int(read_fd), command))
