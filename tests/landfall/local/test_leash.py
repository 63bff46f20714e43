"""No orphans (#46): what a test worker or ``landfall up`` starts dies with it, even when it is SIGKILLed.

A pytest-xdist worker that crashed inside TensorFlow left its session's Pub/Sub emulator and fake-gcs-server
running, parent 1, an hour after the suite. Here a real worker stand-in (a Python process starting both emulators
the way the session fixture does, ``landfall.local.emulators``) is SIGKILLed, and no process of theirs survives.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from landfall.local import leash

REPO = Path(__file__).resolve().parents[3]

WORKER = """
import sys, time
from pathlib import Path
from landfall.local import emulators
state = Path(sys.argv[1])
ps, host = emulators.start_pubsub(state, "landfall-local")
gcs, url = emulators.start_gcs(state)
print(ps.pid, gcs.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead: it only waits for its parent to read its status
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


def _group(pgid: int) -> list[int]:
    """Every live process whose process group is ``pgid``."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                out.append(int(d.name))
    return out


def _gone(pids: list[int], timeout: float = 20.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


def test_a_sigkilled_test_worker_leaves_no_emulator_behind(tmp_path):
    worker = subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE,
                              text=True)
    try:
        line = worker.stdout.readline()
        assert line, f"the worker started no emulator (exit {worker.poll()})"
        leaders = [int(p) for p in line.split()]
        members = [p for g in leaders for p in _group(g)]
        assert len(members) >= 4  # each emulator's watcher and the emulator itself (java, the Go binary)
        worker.kill()  # SIGKILL: nothing in the worker runs after this
        worker.wait(10)
        assert _gone(members) == [], "processes outlived the worker that started them"
    finally:
        if worker.poll() is None:
            worker.kill()


def test_a_child_started_from_a_thread_that_ends_lives_on_and_its_exit_is_the_childs():
    """``PR_SET_PDEATHSIG`` alone would kill a child when the *thread* that started it ends; the leash does not."""
    box: list[subprocess.Popen] = []
    t = threading.Thread(target=lambda: box.append(leash.popen([sys.executable, "-c", "import time; time.sleep(1.5)"])))
    t.start()
    t.join()
    time.sleep(0.5)
    assert box[0].poll() is None  # the thread is gone, the child is not
    assert box[0].wait(10) == 0
    assert leash.popen(["sh", "-c", "exit 3"]).wait(10) == 3
    crash = leash.popen([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"])
    assert crash.wait(10) == -signal.SIGSEGV  # a child ended by a signal ends its leash by the same signal
    killed = leash.popen([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    assert killed.wait(10) == -signal.SIGKILL  # SIGKILL too, which has no handler to reset


def test_the_child_dies_when_its_watcher_is_killed_and_the_group_answers_killpg(tmp_path):
    pid_file = tmp_path / "pid"
    proc = leash.popen([sys.executable, "-c", f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid()));"
                                              " time.sleep(600)"])
    deadline = time.monotonic() + 10
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child = int(pid_file.read_text())
    assert os.getpgid(child) == proc.pid  # the watcher leads the child's group: killpg(proc.pid) reaches it
    proc.kill()
    proc.wait(10)
    assert _gone([child], 10) == []
