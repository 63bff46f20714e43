"""What the functions deploy cannot drift from what the suite installs: ``functions/requirements.txt`` is
``pyproject.toml``'s base dependencies, generated (``make requirements``, tests/functions/requirements.py)."""

from __future__ import annotations

from .requirements import PYPROJECT, REQUIREMENTS, SCORER_REQUIREMENTS, render, render_scorer


def test_requirements_are_generated_from_pyproject() -> None:
    assert REQUIREMENTS.read_text() == render(PYPROJECT.read_text()), (
        "functions/requirements.txt differs from pyproject.toml's dependencies: run `make requirements`")
    assert SCORER_REQUIREMENTS.read_text() == render_scorer(PYPROJECT.read_text()), (
        "scorer/requirements.txt differs from pyproject.toml's dependencies and scorer extra: run `make requirements`")


def test_a_changed_pyproject_fails_the_check() -> None:
    """A range moved in pyproject.toml alone (as kubernetes<38 did while requirements.txt kept <36) is caught."""
    text = PYPROJECT.read_text()
    assert '"kubernetes>=30,<38"' in text
    changed = text.replace('"kubernetes>=30,<38"', '"kubernetes>=30,<39"')
    assert REQUIREMENTS.read_text() != render(changed)
    assert "kubernetes>=30,<39\n" in render(changed)
    dropped = text.replace('  "PyYAML>=6,<7",\n', "")
    assert REQUIREMENTS.read_text() != render(dropped)
    assert SCORER_REQUIREMENTS.read_text() != render_scorer(changed)  # the scorer's carries the base set too
    moved = text.replace('scorer = ["tensorflow-cpu>=2.21,<2.22"]', 'scorer = ["tensorflow-cpu>=2.22,<2.23"]')
    assert moved != text and SCORER_REQUIREMENTS.read_text() != render_scorer(moved)
