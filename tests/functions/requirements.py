"""``functions/requirements.txt`` is generated from ``pyproject.toml``'s base dependencies (``make requirements``):
what the Cloud Functions deploy is the set every test installs, with nothing to keep in step by hand. So is
``scorer/requirements.txt`` (the scorer image's): the base dependencies and the ``scorer`` extra.
``tests/functions/test_requirements.py`` fails when a file and ``pyproject.toml`` differ."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = REPO / "pyproject.toml"
REQUIREMENTS = REPO / "functions" / "requirements.txt"
SCORER_REQUIREMENTS = REPO / "scorer" / "requirements.txt"
HEADER = """\
# Generated from ../pyproject.toml's [project] dependencies by `make requirements`: do not edit, edit pyproject.toml.
# Deployed with the Cloud Functions (the folder deploys as it is); no TensorFlow here. A test fails when they differ.
"""
SCORER_HEADER = """\
# Generated from ../pyproject.toml's [project] dependencies and its `scorer` extra by `make requirements`: do not
# edit, edit pyproject.toml. The scorer image (scorer/Dockerfile) installs these, then the landfall package alone.
"""


def render(pyproject: str) -> str:
    """The requirements file for a ``pyproject.toml``'s text: its base dependencies, in its order, one a line."""
    deps = tomllib.loads(pyproject)["project"]["dependencies"]
    return HEADER + "".join(f"{d}\n" for d in deps)


def render_scorer(pyproject: str) -> str:
    """The scorer image's requirements: the base dependencies, then the ``scorer`` extra, one a line."""
    project = tomllib.loads(pyproject)["project"]
    deps = [*project["dependencies"], *project["optional-dependencies"]["scorer"]]
    return SCORER_HEADER + "".join(f"{d}\n" for d in deps)


def main() -> int:
    source = PYPROJECT.read_text()
    for path, text in ((REQUIREMENTS, render(source)), (SCORER_REQUIREMENTS, render_scorer(source))):
        if path.exists() and path.read_text() == text:
            print(f"{path.relative_to(REPO)}: up to date")
            continue
        path.write_text(text)
        print(f"{path.relative_to(REPO)}: written from pyproject.toml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
