"""The fault list (issue #67): each deliberate fault of ``tests/mutants.toml`` applied alone to this checkout, the
test modules of its area run against it, and the table of which test caught each.

    .venv/bin/python tests/mutants.py [--only NAME ...] [--table FILE]     (``make mutants``)

A fault is an exact snippet of a file (``find``, which must occur exactly once) and what it becomes (``replace``).
The file is changed in place, because the editable install maps the packages to this working tree (a copy elsewhere
would not be imported), and its original bytes are always written back: after the run, on an error, on Ctrl-C and on
SIGTERM. So the runner refuses a tree with changes to tracked files (it would run faults on top of them, and a crash
in the middle of the restore would mix them).

Each fault's tests run as ``python -m pytest -x -q -n 0 -p no:cacheprovider --timeout 300 --junitxml ...``: caught
when pytest exits 1 (a test failed), 2 or 3 (interrupted, or an internal error: an import of a moved module fails at
collection) or the run passes its wall-clock limit; MISSED when it exits 0; 4 and 5 (a bad command line, no tests
collected) are errors of the list. Exit status: 0 when every fault was caught, 1 when one was missed, stale (its
``find`` not exactly once in its file) or an error of the list, 2 when the runner refused to start.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIST = REPO / "tests" / "mutants.toml"
LIMIT_S = 600  # wall clock for one fault's tests; past it the fault counts as caught (a hang is a failure)
PYTEST_TIMEOUT_S = 300  # pytest-timeout, per test
FIELDS = ("name", "what", "file", "find", "replace", "tests")

CAUGHT, MISSED, STALE, ERROR = "yes", "MISSED", "stale", "error"


@dataclasses.dataclass(frozen=True)
class Fault:
    name: str
    what: str
    file: str
    find: str
    replace: str
    tests: tuple[str, ...]


@dataclasses.dataclass
class Result:
    fault: Fault
    caught: str  # CAUGHT, MISSED, STALE or ERROR
    test: str = ""  # the first test that failed (a node id), or why there is none
    seconds: float = 0.0


def load(path: Path = LIST) -> list[Fault]:
    """The list, checked for its fields' types (``ValueError`` naming the entry otherwise)."""
    data = tomllib.loads(path.read_text())
    faults = []
    for i, entry in enumerate(data.get("fault", [])):
        missing = [f for f in FIELDS if f not in entry]
        extra = sorted(set(entry) - set(FIELDS))
        if missing or extra:
            raise ValueError(f"fault {i + 1} ({entry.get('name', '?')}): missing {missing}, unknown {extra}")
        tests = entry["tests"]
        if not all(isinstance(entry[f], str) for f in FIELDS[:-1]) or not isinstance(tests, list) or not tests \
                or not all(isinstance(t, str) for t in tests):
            raise ValueError(f"fault {i + 1} ({entry['name']}): every field a string, tests a non-empty list of them")
        faults.append(Fault(*(entry[f] for f in FIELDS[:-1]), tuple(tests)))
    return faults


def occurrences(fault: Fault, root: Path = REPO) -> int:
    path = root / fault.file
    return path.read_text().count(fault.find) if path.is_file() else 0


def dirty(root: Path = REPO) -> list[str]:
    """Changes to tracked files (``git status --porcelain --untracked-files=no``), one line each."""
    out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, check=True,
                         capture_output=True, text=True).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def verdict(returncode: int | None) -> str:
    """pytest's exit status (None: killed at the wall-clock limit) as the fault's outcome."""
    if returncode is None or returncode in (1, 2, 3):
        return CAUGHT  # a test failed, the run was interrupted or collection broke, or it hung
    if returncode == 0:
        return MISSED
    return ERROR  # 4: a bad command line (a test path that is gone), 5: no tests collected


def first_failure(junit: Path) -> str:
    """The node id of the first test that failed or errored in a junit XML report ('' when none did)."""
    try:
        root = ET.parse(junit).getroot()
    except (OSError, ET.ParseError):
        return ""
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            module = case.get("classname", "")
            name = case.get("name", "")
            parts = module.split(".")
            # classname is "tests.x.test_mod" or "tests.x.test_mod.TestClass": back to a path and node id
            for cut in range(len(parts), 0, -1):
                path = Path(*parts[:cut]).with_suffix(".py")
                if (REPO / path).is_file():
                    return "::".join([path.as_posix(), *parts[cut:], name])
            return f"{module}::{name}" if module else name
    return ""


class Stop(Exception):
    """SIGTERM, raised in the main thread so the ``finally`` that restores the file runs."""


@contextmanager
def applied(fault: Fault, root: Path = REPO) -> Iterator[None]:
    """The file with the fault in it; its original bytes back afterwards, whatever happens."""
    path = root / fault.file
    original = path.read_bytes()
    text = original.decode()
    try:
        path.write_bytes(text.replace(fault.find, fault.replace, 1).encode())
        yield
    finally:
        # Ctrl-C or SIGTERM again now would leave the file half written: held until it is whole.
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            path.write_bytes(original)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)


def run_tests(fault: Fault, limit_s: float = LIMIT_S) -> tuple[int | None, str]:
    """pytest on the fault's tests, in a process group of its own (killed whole at the limit)."""
    with tempfile.TemporaryDirectory(prefix="landfall-mutant-") as tmp:
        junit = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-n", "0", "-p", "no:cacheprovider",
               "--timeout", str(PYTEST_TIMEOUT_S), "--junitxml", str(junit), *fault.tests]
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}  # no .pyc of a faulty file left behind
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=limit_s)
            code: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            _kill(proc)
            proc.communicate()
            return None, f"timed out after {limit_s:g} s"
        except BaseException:
            _kill(proc)
            proc.communicate()
            raise
        failed = first_failure(junit)
        if not failed and code not in (0, 1):
            tail = [line for line in out.decode(errors="replace").splitlines() if line.strip()][-1:]
            failed = f"pytest exit {code}: {tail[0][:160] if tail else ''}"
        return code, failed


def _kill(proc: subprocess.Popen) -> None:
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def run_one(fault: Fault, limit_s: float = LIMIT_S) -> Result:
    t0 = time.monotonic()
    count = occurrences(fault)
    if count != 1 or fault.find == fault.replace:
        why = "find equals replace" if fault.find == fault.replace else f"find occurs {count} times in {fault.file}"
        return Result(fault, STALE, why)
    with applied(fault):
        code, failed = run_tests(fault, limit_s)
    return Result(fault, verdict(code), failed, time.monotonic() - t0)


def clean_failures(faults: Sequence[Fault], limit_s: float = LIMIT_S) -> dict[tuple[str, ...], str]:
    """``--check-clean``: each distinct set of tests run once on the unchanged tree; the sets that do not pass there
    (a missing tool or emulator, a test broken by itself) with their first failure. A fault whose tests fail without
    it proves nothing, so ``main`` reports it as an error of the list instead of caught."""
    failing: dict[tuple[str, ...], str] = {}
    for tests in dict.fromkeys(f.tests for f in faults):
        code, failed = run_tests(Fault("clean", "", "", "", "", tests), limit_s)
        if code != 0:
            failing[tests] = f"fails on the clean tree too: {failed or f'pytest exit {code}'}"
    return failing


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(results: Sequence[Result]) -> str:
    lines = ["| fault | what | file | caught | first test that failed | seconds |", "|---|---|---|---|---|---|"]
    for r in results:
        test = f"`{_cell(r.test)}`" if r.test and r.caught == CAUGHT else _cell(r.test)
        lines.append(f"| `{r.fault.name}` | {_cell(r.fault.what)} | `{r.fault.file}` | {r.caught} | {test} | "
                     f"{r.seconds:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="tests/mutants.py")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these faults")
    parser.add_argument("--table", type=Path, metavar="FILE", help="also write the Markdown table to FILE")
    parser.add_argument("--limit", type=float, default=LIMIT_S, help="wall-clock seconds for one fault's tests")
    parser.add_argument("--check-clean", action="store_true",
                        help="first run each fault's tests on the unchanged tree: a fault whose tests fail there too "
                             "is an error, not caught (doubles the time; for a new machine or a changed list)")
    args = parser.parse_args(argv)
    changed = dirty()
    if changed:
        print(f"mutants: refusing to run: tracked files are changed ({', '.join(changed[:3])}"
              f"{' ...' if len(changed) > 3 else ''}); commit or stash them first: the faults are applied in place",
              file=sys.stderr)
        return 2
    faults = load()
    if args.only:
        unknown = sorted(set(args.only) - {f.name for f in faults})
        if unknown:
            print(f"mutants: no fault named {', '.join(unknown)} in {LIST.relative_to(REPO)}", file=sys.stderr)
            return 2
        faults = [f for f in faults if f.name in args.only]

    def stop(signum: int, frame: object) -> None:
        raise Stop(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, stop)
    results: list[Result] = []
    t0 = time.monotonic()
    try:
        unusable = clean_failures(faults, args.limit) if args.check_clean else {}
        for i, fault in enumerate(faults, 1):
            print(f"[{i}/{len(faults)}] {fault.name} ({fault.file}) ...", end=" ", flush=True)
            result = (Result(fault, ERROR, unusable[fault.tests]) if fault.tests in unusable
                      else run_one(fault, args.limit))
            results.append(result)
            print(f"{result.caught} in {result.seconds:.1f} s{': ' + result.test if result.test else ''}", flush=True)
    except (KeyboardInterrupt, Stop):
        print("\nmutants: stopped; every file is restored", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    wall = time.monotonic() - t0
    text = table(results)
    bad = [r for r in results if r.caught != CAUGHT]
    summary = (f"{len(results) - len(bad)} of {len(results)} faults caught in {wall:.0f} s"
               + (f"; not caught: {', '.join(f'{r.fault.name} ({r.caught})' for r in bad)}" if bad else ""))
    print("\n" + text + "\n" + summary)
    if args.table:
        args.table.write_text(text + "\n" + summary + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
