"""The suite's own accounting (issue #67, tests/conftest.py): where a run's time went, folder by folder, and what
``make check`` (``pytest --quick``) leaves out."""

from __future__ import annotations

from types import SimpleNamespace

from tests import conftest


def test_each_folder_gets_every_phase_of_its_tests_and_nothing_else() -> None:
    reports = [SimpleNamespace(nodeid="tests/trainer/test_a.py::t", when=w, duration=d)
               for w, d in (("setup", 2.0), ("call", 5.0), ("teardown", 1.0))]
    reports += [SimpleNamespace(nodeid="tests/landfall/local/deep/test_b.py::t[x]", when="call", duration=3.0),
                SimpleNamespace(nodeid="tests/test_c.py::t", when="call", duration=0.5),
                SimpleNamespace(nodeid="tests/trainer/test_a.py", when="collect", duration=9.0),  # not a test's time
                SimpleNamespace(nodeid="", when="call", duration=4.0), object()]  # a warning, a session report
    spent = conftest.by_folder(reports)
    assert spent == {"tests/trainer": 8.0, "tests/landfall/local": 3.0, "tests": 0.5}


def test_make_check_leaves_out_the_heavy_modules_only() -> None:
    heavy = conftest.heavy_modules()
    assert "tests/infra/test_images.py" in heavy and "tests/landfall/local/test_demo.py" in heavy
    assert all(conftest.MODULE_SECONDS[m] >= conftest.QUICK_LEAVES_OUT for m in heavy)
    assert "tests/test_suite_time.py" not in heavy and len(heavy) < len(conftest.MODULE_SECONDS)
