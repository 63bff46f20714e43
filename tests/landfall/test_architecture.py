"""What the import layers cannot say: what the deployed entry points import, fakes that share no code with
what they check, and subpackages that say what they are. The layers themselves are import-linter contracts
in pyproject.toml, run by ``make test``."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEPLOYED = ("landfall.core", "landfall.arrival", "landfall.submit")
SUBPACKAGES = ("core", "core.contracts", "core.rules", "core.services", "core.artifacts", "core.quality", "arrival",
               "submit", "detect", "reconcile", "local", "cli")


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at the top or inside functions (lazy imports count)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out |= {f"{node.module}.{a.name}" for a in node.names} if node.module == "landfall" else {node.module}
    return out


def test_the_entry_points_import_only_deployed_subpackages():
    ours = {m for m in imported_modules(REPO / "functions" / "main.py") if m.split(".")[0] == "landfall"}
    assert ours, "main.py imports nothing of landfall?"
    assert all(m.startswith(DEPLOYED) for m in ours), sorted(ours)


def test_the_fakes_share_no_code_with_what_they_check():
    for fake in (REPO / "tests" / "fakes").glob("*.py"):
        assert not {m for m in imported_modules(fake) if m.split(".")[0] in ("landfall", "trainer")}, fake


@pytest.mark.parametrize("name", SUBPACKAGES)
def test_each_subpackage_says_what_it_is_what_it_may_import_and_who_imports_it(name):
    doc = importlib.import_module(f"landfall.{name}").__doc__ or ""
    lines = [line for line in doc.strip().splitlines() if line.strip()]
    assert len(lines) >= 3, doc
    assert lines[1].startswith("May import") and lines[2].startswith("Imported by"), doc
