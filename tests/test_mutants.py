"""The fault list of issue #67 (``tests/mutants.toml``) stays runnable: it parses, holds at least 20 faults with
unique names, and every fault's file exists, its ``find`` occurs exactly once there and differs from ``replace``, and
every test path it names exists. A rename that leaves the list behind fails here, in ``make test``, not months later
in ``make mutants``. The runner's own rules (``tests/mutants.py``: pytest's exit code read as caught or missed, the
first failing test read from the junit report, the refusal on a changed tree, the file always restored) are checked
without running the suite."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests import mutants

REPO = Path(__file__).resolve().parents[1]
FAULTS = mutants.load()


def test_the_list_parses_and_holds_at_least_20_uniquely_named_faults():
    assert len(FAULTS) >= 20
    names = [f.name for f in FAULTS]
    assert len(set(names)) == len(names), sorted(n for n in names if names.count(n) > 1)
    assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", n) for n in names), names
    assert all(f.what.strip() and f.tests for f in FAULTS)


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.name)
def test_each_fault_still_applies_and_names_tests_that_exist(fault: mutants.Fault):
    path = REPO / fault.file
    assert path.is_file(), f"{fault.name}: no file {fault.file}"
    assert fault.find != fault.replace, f"{fault.name}: find and replace are the same"
    count = path.read_text().count(fault.find)
    assert count == 1, f"{fault.name}: its find occurs {count} times in {fault.file} (stale: update the list)"
    for test in fault.tests:
        assert (REPO / test.split("::")[0]).is_file(), f"{fault.name}: no test module {test}"


def test_pytests_exit_code_is_caught_or_missed():
    assert [mutants.verdict(code) for code in (1, 2, 3, None)] == [mutants.CAUGHT] * 4  # None: timed out
    assert mutants.verdict(0) == mutants.MISSED
    assert mutants.verdict(4) == mutants.verdict(5) == mutants.ERROR  # a bad path, no tests: the list is wrong


def test_the_first_failing_test_is_read_from_the_junit_report(tmp_path: Path):
    report = tmp_path / "junit.xml"
    report.write_text(
        '<?xml version="1.0"?><testsuites><testsuite>'
        '<testcase classname="tests.test_mutants" name="test_ok"/>'
        '<testcase classname="tests.test_mutants" name="test_b[x]"><failure message="no"/></testcase>'
        '<testcase classname="tests.test_mutants" name="test_c"><error message="no"/></testcase>'
        "</testsuite></testsuites>")
    assert mutants.first_failure(report) == "tests/test_mutants.py::test_b[x]"
    assert mutants.first_failure(tmp_path / "missing.xml") == ""


def test_a_fault_is_applied_and_the_original_bytes_always_come_back(tmp_path: Path):
    target = tmp_path / "m.py"
    target.write_bytes(b"x = 1\ny = 2\n")
    fault = mutants.Fault("f", "w", "m.py", "y = 2", "y = 3", ("t",))
    assert mutants.occurrences(fault, tmp_path) == 1
    with pytest.raises(KeyboardInterrupt), mutants.applied(fault, tmp_path):
        assert target.read_bytes() == b"x = 1\ny = 3\n"
        raise KeyboardInterrupt
    assert target.read_bytes() == b"x = 1\ny = 2\n"


def test_a_stale_fault_is_reported_not_run(tmp_path: Path):
    stale = mutants.Fault("gone", "w", "tests/test_mutants.py", "a snippet no file holds " * 2, "x", ("t",))
    result = mutants.run_one(stale)
    assert (result.caught, result.test) == (mutants.STALE, "find occurs 0 times in tests/test_mutants.py")


def test_the_runner_refuses_a_tree_with_changed_tracked_files_in_one_line(monkeypatch, capsys):
    monkeypatch.setattr(mutants, "dirty", lambda root=REPO: ["M trainer/task.py"])
    assert mutants.main([]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refusing" in err and "trainer/task.py" in err


def test_the_table_names_each_fault_and_its_outcome():
    fault = FAULTS[0]
    text = mutants.table([mutants.Result(fault, mutants.CAUGHT, "tests/x.py::test_y", 1.3)])
    assert text.splitlines()[0].startswith("| fault | what | file | caught |")
    assert f"| `{fault.name}` |" in text and "| yes | `tests/x.py::test_y` | 1.3 |" in text
