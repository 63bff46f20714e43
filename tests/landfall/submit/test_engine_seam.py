"""One list of engines (``landfall.core.config.ENGINES``) serves the config, the submit stage's engine seam and the
local operators; every engine module has what ``landfall.submit.engine.Engine`` says, and the names every engine
shares live in ``landfall.submit.jobmeta``, not in an engine's module."""

from __future__ import annotations

import inspect
import re
import subprocess
from pathlib import Path

import pytest

from landfall.core.config import ENGINES
from landfall.local.controllers import OPERATORS, make_operator
from landfall.submit import engine, jobmeta

REPO = Path(__file__).resolve().parents[3]


def test_one_list_of_engines_serves_the_seam_and_the_local_operators(tmp_path):
    assert tuple(engine.MODULES) == ENGINES == tuple(OPERATORS)
    for name in ENGINES:
        assert isinstance(make_operator(tmp_path / name, engine_name=name), OPERATORS[name])
    with pytest.raises(ValueError, match="engine must be one of"):
        make_operator(tmp_path / "x", engine_name="vertex-or-anything")


@pytest.mark.parametrize("name", ENGINES)
def test_every_engine_module_has_what_the_protocol_says(name):
    module = engine.MODULES[name]
    members = {n for n in dir(engine.Engine) if not n.startswith("_")} | set(engine.Engine.__annotations__)
    for member in members:
        assert hasattr(module, member), f"{name} lacks {member}"
        wanted = getattr(engine.Engine, member, None)
        if callable(wanted):
            assert list(inspect.signature(getattr(module, member)).parameters) == list(
                inspect.signature(wanted).parameters)[1:], (name, member)  # the protocol's, less self


def test_no_module_takes_an_engine_neutral_name_from_an_engine_module():
    """``landfall.submit.jobmeta``'s names (the job's name, labels, annotations, container, their readers) are read
    from it: an engine's module is imported for what only that engine has."""
    shared = [n for n, v in vars(jobmeta).items() if not n.startswith("_") and not inspect.ismodule(v)
              and getattr(v, "__module__", jobmeta.__name__) == jobmeta.__name__]
    assert {"job_name", "job_dir", "DATASET_LABEL", "inputs_of", "CONTAINER", "name_of"} <= set(shared)
    found = subprocess.run(["git", "grep", "-n", "-E", r"\b(tfjob|jobset)\.(" + "|".join(shared) + r")\b", "--",
                            "*.py"], cwd=REPO, capture_output=True, text=True).stdout.splitlines()
    assert found == [], found


def test_one_list_of_backends_each_one_module_with_connect(tmp_path):
    """``open_backend`` loads ``landfall.submit.backends.<name>`` by the name ``LANDFALL_BACKEND`` gives (one of
    ``core.config.BACKENDS``): no if/else per backend; each module's ``connect`` returns what ``Backend`` says."""
    import importlib

    from landfall.core.config import BACKENDS
    from landfall.submit.backends import Backend, open_backend
    from landfall.submit.backends.local import LocalBackend
    from landfall.submit.config import JobConfig

    members = [n for n in dir(Backend) if not n.startswith("_")]
    for name in BACKENDS:
        module = importlib.import_module(f"landfall.submit.backends.{name}")
        assert list(inspect.signature(module.connect).parameters) == ["cfg"], name
        connected = inspect.signature(module.connect).return_annotation
        cls = getattr(module, connected if isinstance(connected, str) else connected.__name__)
        assert all(hasattr(cls, m) for m in members), (name, [m for m in members if not hasattr(cls, m)])
    cfg = JobConfig.load({}, backend="local", local_state=str(tmp_path), engine="jobset")
    opened = open_backend(cfg)
    assert isinstance(opened, LocalBackend) and opened.engine == "jobset" and opened.root == tmp_path
    with pytest.raises(ValueError, match=re.escape(f"backend must be one of {BACKENDS}, not 'nomad'")):
        JobConfig.load({}, backend="nomad")
    # Each engine runs where its jobs can live (core.config.ENGINE_BACKENDS), and nowhere else.
    with pytest.raises(ValueError, match="engine vertex runs on backend customjobs, not 'kubernetes'"):
        JobConfig.load({}, backend="kubernetes", engine="vertex")
    with pytest.raises(ValueError, match="engine tfjob runs on backend kubernetes or local, not 'customjobs'"):
        JobConfig.load({}, backend="customjobs", engine="tfjob")
