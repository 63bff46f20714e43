"""The distribution as the trainer image installs it (``pip install .``, not editable) ships every module."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.infra.tools import REPO


def test_the_wheel_holds_every_module_of_every_package(tmp_path: Path):
    had_build = (REPO / "build").exists()
    try:
        proc = _build_wheel(tmp_path)
    finally:
        if not had_build:  # setuptools builds in the source tree
            shutil.rmtree(REPO / "build", ignore_errors=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # setuptools still ships a subpackage missing from `packages`, with a warning that it soon will not.
    assert "is absent from the `packages` configuration" not in proc.stdout + proc.stderr, proc.stderr
    (wheel,) = tmp_path.glob("landfall-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"landfall/{p.relative_to(REPO / 'functions' / 'landfall').as_posix()}"
                for p in (REPO / "functions" / "landfall").rglob("*.py")}
    expected |= {p.relative_to(REPO).as_posix() for p in (REPO / "trainer").rglob("*.py")  # its halves too
                 if "__pycache__" not in p.parts}
    # Package data read with importlib.resources: the dataset spec's JSON Schema (landfall.core.artifacts.specs).
    expected |= {f"landfall/{p.relative_to(REPO / 'functions' / 'landfall').as_posix()}"
                 for p in (REPO / "functions" / "landfall").rglob("*.schema.json")}
    assert "landfall/core/artifacts/dataset-v1.schema.json" in expected
    # The real public series landfall_bench.realdata reads (bench/data/README.md).
    expected |= {f"landfall_bench/data/{p.relative_to(REPO / 'bench' / 'data').as_posix()}"
                 for p in (REPO / "bench" / "data").rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert "landfall_bench/data/BasicMotions_TRAIN.ts" in expected
    assert "landfall_bench/data/nab-dev/series.json" in expected  # the NAB dev set (landfall bench detect)
    assert len(expected) > 40
    assert not expected - shipped, sorted(expected - shipped)
    assert not any(name.startswith(("tests/", "functions/")) for name in shipped)


def _build_wheel(out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--no-deps",
                           "-w", str(out), str(REPO)], capture_output=True, text=True, timeout=600)
