"""``functions/requirements.txt`` is generated from ``pyproject.toml``'s base dependencies (``make requirements``):
what the Cloud Functions deploy is the set every test installs, with nothing to keep in step by hand.
``tests/functions/test_requirements.py`` fails when the file and ``pyproject.toml`` differ."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = REPO / "pyproject.toml"
REQUIREMENTS = REPO / "functions" / "requirements.txt"
HEADER = """\
# Generated from ../pyproject.toml's [project] dependencies by `make requirements`: do not edit, edit pyproject.toml.
# Deployed with the Cloud Functions (the folder deploys as it is); no TensorFlow here. A test fails when they differ.
"""


def render(pyproject: str) -> str:
    """The requirements file for a ``pyproject.toml``'s text: its base dependencies, in its order, one a line."""
    deps = tomllib.loads(pyproject)["project"]["dependencies"]
    return HEADER + "".join(f"{d}\n" for d in deps)


def main() -> int:
    text = render(PYPROJECT.read_text())
    if REQUIREMENTS.exists() and REQUIREMENTS.read_text() == text:
        print(f"{REQUIREMENTS.relative_to(REPO)}: up to date")
        return 0
    REQUIREMENTS.write_text(text)
    print(f"{REQUIREMENTS.relative_to(REPO)}: written from pyproject.toml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
