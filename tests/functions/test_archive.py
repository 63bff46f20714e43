"""The Cloud Functions source archive, built as Terraform's archive_file builds it, and imported in a clean venv.

``infra/modules/functions/main.tf`` zips ``functions/`` with glob ``excludes`` (hashicorp/archive >= 2.5 matches
them with doublestar against each path relative to ``source_dir``; a matching directory is not descended). This
module reads those excludes, builds the same zip, checks what is in it, then installs only the archive's
``requirements.txt`` into a fresh virtual environment and imports every module the archive holds there, so a
deployed module that reaches ``landfall.local``/``landfall.cli`` or a package missing from requirements.txt fails
here rather than at cold start.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from wcmatch import glob as wcglob

from tests.infra.tools import INFRA, REPO, blocks, first, labelled, load_hcl, unquote

FUNCTIONS = REPO / "functions"
MODULE_TF = INFRA / "modules" / "functions" / "main.tf"
ENV_ROOTS = sorted(p.parent for p in (INFRA / "envs").glob("*/functions/variables.tf"))
DEPLOYED = ("landfall/core/", "landfall/arrival/", "landfall/submit/")
# The scorer's own (landfall/detect, and landfall/core/scoring.py that serves a champion with TensorFlow) stays out too.
NOT_DEPLOYED = ("landfall/local/", "landfall/cli/", "landfall/views/", "landfall/reconcile/", "landfall/detect/",
                "landfall/core/scoring.py")


# --- doublestar globs ---------------------------------------------------------------------------------
DOUBLESTAR = wcglob.GLOBSTAR | wcglob.BRACE | wcglob.DOTGLOB


def glob_matches(pattern: str, path: str) -> bool:
    """doublestar's PathMatch: wcmatch's globstar globs, plus doublestar's rule that a trailing ``/**`` also
    matches the directory itself (wcmatch wants the trailing ``/``)."""
    return wcglob.globmatch(path, pattern, flags=DOUBLESTAR) or wcglob.globmatch(path + "/", pattern, flags=DOUBLESTAR)


def excluded(relpath: str, patterns: Iterable[str]) -> bool:
    return any(glob_matches(p, relpath) for p in patterns)


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("**/__pycache__/**", "__pycache__", True),
        ("**/__pycache__/**", "landfall/core/__pycache__/config.cpython-311.pyc", True),
        ("**/__pycache__/**", "landfall/core/config.py", False),
        ("**/*.pyc", "main.cpython-311.pyc", True),
        ("**/*.pyc", "a/b/c.pyc", True),
        ("**/*.pyc", "a/b/c.pyc.txt", False),
        ("landfall/local/**", "landfall/local", True),
        ("landfall/local/**", "landfall/local/demo.py", True),
        ("landfall/local/**", "landfall/localish/demo.py", False),
        ("landfall/local/**", "x/landfall/local/demo.py", False),
        ("landfall/*", "landfall/local/demo.py", False),
        ("landfall/*", "landfall/__init__.py", True),
        ("landfall/**/*.py", "landfall/__init__.py", True),
        ("landfall/**/*.py", "landfall/submit/backends/local.py", True),
        ("**/*.egg-info/**", "landfall.egg-info/PKG-INFO", True),
        ("**/*.egg-info/**", "build/lib/landfall.egg-info/SOURCES.txt", True),
        (".pytest_cache/**", "landfall/.pytest_cache/v/x", False),
        ("*.{py,txt}", "requirements.txt", True),
        ("ma?n.py", "main.py", True),
        ("[!m]ain.py", "main.py", False),
        ("[a-m]ain.py", "main.py", True),
        ("**", "anything/at/all", True),
        ("a.b", "aXb", False),
    ],
)
def test_glob_matcher(pattern: str, path: str, expected: bool) -> None:
    assert glob_matches(pattern, path) is expected, (pattern, path)


# --- the archive --------------------------------------------------------------------------------------
def archive_excludes() -> list[str]:
    """``data "archive_file" "functions"``'s excludes, as Terraform hands them to the provider."""
    found = [
        first(body)
        for block in blocks(load_hcl(MODULE_TF), "data")
        for rtype, named in block.items()
        if rtype.strip('"') == "archive_file"
        for name, body in named.items()
        if name.strip('"') == "functions"
    ]
    assert len(found) == 1, f"expected one archive_file.functions in {MODULE_TF}"
    body = found[0]
    assert unquote(body["source_dir"]) == "${var.source_dir}", body["source_dir"]
    assert unquote(body["type"]) == "zip", body["type"]
    value = body["excludes"]
    if len(value) == 1 and isinstance(value[0], list):  # older python-hcl2 wraps attribute values in a list
        value = value[0]
    excludes = [unquote(e) for e in value]
    assert excludes and all(isinstance(e, str) for e in excludes), body["excludes"]
    return excludes


def archive_files(source_dir: Path, excludes: list[str]) -> list[str]:
    """Paths (relative, ``/``-separated) archive_file puts in the zip: a filepath.Walk that skips a matching
    directory and leaves out a matching file; symlinked directories are followed as the provider does."""
    names: list[str] = []
    for root, dirs, files in os.walk(source_dir, followlinks=True):
        rel_root = Path(root).relative_to(source_dir).as_posix()
        prefix = "" if rel_root == "." else rel_root + "/"
        dirs[:] = sorted(d for d in dirs if not excluded(prefix + d, excludes))
        names += [prefix + f for f in sorted(files) if not excluded(prefix + f, excludes)]
    return sorted(names)


def build_archive(source_dir: Path, excludes: list[str], out: Path) -> list[str]:
    names = archive_files(source_dir, excludes)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in names:
            zf.write(source_dir / name, name)
    return names


def test_env_roots_archive_the_functions_folder() -> None:
    assert ENV_ROOTS, "no infra/envs/*/functions roots"
    for root in ENV_ROOTS:
        default = unquote(labelled(load_hcl(root / "variables.tf"), "variable")["functions_source_dir"]["default"])
        assert (root / default).resolve() == FUNCTIONS, f"{root}: functions_source_dir = {default!r}"


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    tmp = tmp_path_factory.mktemp("functions-archive")
    zip_path = tmp / "functions-source.zip"
    build_archive(FUNCTIONS, archive_excludes(), zip_path)
    with zipfile.ZipFile(zip_path) as zf:
        names = zf.namelist()
        zf.extractall(tmp / "src")
    return tmp / "src", names


def test_archive_contents(archive: tuple[Path, list[str]]) -> None:
    _, names = archive
    for required in ("main.py", "requirements.txt", "landfall/__init__.py"):
        assert required in names, f"{required} is missing from the archive: {names}"
    for prefix in DEPLOYED:
        assert any(n.startswith(prefix) and n.endswith(".py") for n in names), f"no {prefix} files in {names}"
    unwanted = [
        n
        for n in names
        if n.startswith(NOT_DEPLOYED)
        or {"tests", "bench", "__pycache__", ".pytest_cache"} & set(n.split("/"))
        or n.endswith(".pyc")
        or ".egg-info/" in n
    ]
    assert not unwanted, f"the archive holds local tooling or build leftovers: {unwanted}"


# --- the archive, installed and imported ----------------------------------------------------------------
PIP_TIMEOUT = 600
IMPORT_TIMEOUT = 300

IMPORT_SCRIPT = textwrap.dedent(
    """
    import importlib, json, os, sys, traceback
    from pathlib import Path

    here = Path.cwd().resolve()
    failures = {}

    def load(name):
        try:
            importlib.import_module(name)
        except BaseException:
            failures[name] = traceback.format_exc()

    load("main")
    if "main" in sys.modules:
        import main
        for entry in ("on_data_arrival", "on_training_request"):
            if not callable(getattr(main, entry, None)):
                failures["main." + entry] = "missing or not callable"
    load("landfall.submit.handler")
    modules = []
    for path in sorted((here / "landfall").rglob("*.py")):
        parts = list(path.relative_to(here).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules.append(".".join(parts))
        load(modules[-1])
    import landfall
    print(json.dumps({
        "modules": modules,
        "failures": failures,
        "landfall_file": str(Path(landfall.__file__).resolve()),
        "tooling": sorted(m for m in sys.modules if m.split(".")[:2] in (
            ["landfall", "local"], ["landfall", "cli"], ["landfall", "reconcile"], ["landfall", "detect"])),
        "tensorflow": sorted(m for m in sys.modules if m == "tensorflow" or m.startswith("tensorflow.")),
    }))
    """
)


@dataclass
class CleanVenv:
    src: Path
    python: Path
    install_seconds: float


def _run(args: list[str], *, cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def _output(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"


def _clean_env() -> dict[str, str]:
    return {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}


@pytest.fixture(scope="module")
def clean_venv(archive: tuple[Path, list[str]], memory_root: Path) -> Iterator[CleanVenv]:
    """The archive's requirements installed into a new venv, in memory (``memory_root``: some 8,000 files that
    nothing needs on disk), removed after the module."""
    src, _ = archive
    venv = Path(tempfile.mkdtemp(prefix="functions-venv-", dir=memory_root)) / "venv"
    # Only the interpreter and pip's own settings (index, certificates, proxy) carry over; nothing of this venv.
    pip_env = {
        k: v for k, v in os.environ.items() if not k.startswith("PYTHON") and k not in ("VIRTUAL_ENV", "PIP_USER")
    }
    proc = _run([sys.executable, "-m", "venv", str(venv)], cwd=src, env=pip_env, timeout=300)
    assert proc.returncode == 0, f"python -m venv failed:\n{_output(proc)}"
    python = venv / "bin" / "python"
    start = time.monotonic()
    proc = _run(
        # --no-compile: the imports below compile what they load; byte-compiling every installed file first (as
        # Cloud Functions' build may) checks nothing more and took a third of this fixture's time (22.5 s against
        # 15.0 s, alone).
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", "--no-compile", "-r",
         "requirements.txt"],
        cwd=src,
        env=pip_env,
        timeout=PIP_TIMEOUT,
    )
    assert proc.returncode == 0, f"pip install -r requirements.txt (from the archive) failed:\n{_output(proc)}"
    yield CleanVenv(src, python, time.monotonic() - start)
    shutil.rmtree(venv.parent, ignore_errors=True)


def test_clean_venv_has_no_landfall_distribution(clean_venv: CleanVenv) -> None:
    proc = _run(
        [str(clean_venv.python), "-m", "pip", "list", "--disable-pip-version-check", "--format=json"],
        cwd=clean_venv.src,
        env=_clean_env(),
        timeout=120,
    )
    assert proc.returncode == 0, f"pip list failed:\n{_output(proc)}"
    installed = {d["name"].lower().replace("_", "-") for d in json.loads(proc.stdout)}
    assert "landfall" not in installed, "the landfall distribution is installed in the clean venv"
    assert "tensorflow" not in installed, "requirements.txt pulls in TensorFlow"
    assert "functions-framework" in installed, sorted(installed)


def test_the_deployed_set_is_the_tested_set(clean_venv: CleanVenv) -> None:
    """Every distribution `pip install -r requirements.txt` resolves for the functions is the version this suite
    runs its tests of behaviour on: the functions' tests ran on what deploys (issue #54)."""
    code = ("import json, importlib.metadata as m; "
            "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))")
    proc = _run([str(clean_venv.python), "-c", code], cwd=clean_venv.src, env=_clean_env(), timeout=120)
    assert proc.returncode == 0, _output(proc)

    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    deployed = {norm(k): v for k, v in json.loads(proc.stdout).items()}
    suite = {norm(d.metadata["Name"]): d.version for d in importlib.metadata.distributions()}
    differ = [f"{name}: deployed {version}, tested {suite.get(name, 'not installed')}"
              for name, version in sorted(deployed.items())
              if name not in ("pip", "setuptools", "wheel") and suite.get(name) != version]
    assert not differ, ("the functions would deploy other versions than the suite tested; rebuild the venv "
                        f"(make clean test) or bound the range in pyproject.toml: {differ}")


def test_archive_imports_in_clean_venv(clean_venv: CleanVenv) -> None:
    proc = _run(
        [str(clean_venv.python), "-c", IMPORT_SCRIPT],
        cwd=clean_venv.src,
        env=_clean_env(),
        timeout=IMPORT_TIMEOUT,
    )
    assert proc.returncode == 0, f"the import script failed:\n{_output(proc)}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    failures = result["failures"]
    assert not failures, "imports failed in the clean venv (only the archive's requirements.txt installed):\n" + (
        "\n".join(f"== {name}\n{tb}" for name, tb in failures.items())
    )
    src = clean_venv.src.resolve()
    assert Path(result["landfall_file"]).is_relative_to(src), f"landfall came from {result['landfall_file']}"
    assert not result["tooling"], f"deployed code loaded local tooling: {result['tooling']}"
    assert not result["tensorflow"], f"deployed code loaded TensorFlow: {result['tensorflow'][:5]}"
    for prefix in DEPLOYED:
        package = prefix.rstrip("/").replace("/", ".")
        assert package in result["modules"], f"{package} was not imported: {result['modules']}"
