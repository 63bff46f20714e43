"""Every rejection reason the code can give is listed in docs/arrival.md, and every listed one is given somewhere."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
CODE = REPO / "functions" / "landfall"
# Listed but allowed to be missing from the code: the arrival handler's, for an existing manifest of the
# arrival that cannot be read (its code lands separately).
PRODUCED_ELSEWHERE = {"invalid_manifest"}


def documented_reasons() -> set[str]:
    """The backquoted codes of the docs/arrival.md paragraph that lists "Rejection reasons:" (up to its end)."""
    text = (REPO / "docs" / "arrival.md").read_text()
    start = text.index("Rejection reasons:")
    end = text.find("\n\n", start)
    return set(re.findall(r"`([a-z][a-z0-9_]*)`", text[start : end if end >= 0 else None]))


def _bad_input_calls() -> list[tuple[str, ast.Call]]:
    calls = []
    for path in sorted(CODE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name == "BadInput":
                    calls.append((f"{path.relative_to(REPO)}:{node.lineno}", node))
    return calls


def _reason_arg(call: ast.Call) -> ast.expr | None:
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg == "reason"), None)


# a labelled evaluation file's reasons, and a series dataset's labelled recording's (docs/datasets.md)
LABELLED = ("functions/landfall/arrival/labelled_file.py", "functions/landfall/arrival/labelled_recording.py")


def labelled_reasons_documented() -> set[str]:
    """The backquoted codes of docs/datasets.md's paragraph on bad labelled files (from "Bad labels refuse")."""
    text = (REPO / "docs" / "datasets.md").read_text()
    start = text.index("Bad labels refuse")
    end = text.find("\n\n", start)
    return set(re.findall(r"`([a-z][a-z0-9_]*)`", text[start : end if end >= 0 else None]))


def produced_reasons(labelled: bool = False) -> dict[str, list[str]]:
    """The literal reasons of every ``BadInput`` of an arrival (or, ``labelled``, of a labelled evaluation file)."""
    found: dict[str, list[str]] = {}
    for where, call in _bad_input_calls():
        if where.startswith(LABELLED) != labelled:
            continue
        arg = _reason_arg(call)
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            found.setdefault(arg.value, []).append(where)
    return found


def _literal_or_passed_on(arg: ast.expr | None) -> bool:
    """A string literal, or ``something.reason``: a reason passed on from a ``BadInput`` built elsewhere."""
    return (isinstance(arg, ast.Constant) and isinstance(arg.value, str)) or (
        isinstance(arg, ast.Attribute) and arg.attr == "reason")


def test_every_rejection_names_its_reason_literally():
    calls = _bad_input_calls()
    assert len(calls) > 30  # the scan sees the readers
    computed = [where for where, call in calls if not _literal_or_passed_on(_reason_arg(call))]
    assert computed == [], "a computed reason could escape the documented list"


def test_every_reason_given_is_listed_in_the_readme():
    undocumented = {r: where for r, where in produced_reasons().items() if r not in documented_reasons()}
    assert undocumented == {}


def test_every_labelled_file_reason_is_listed_in_datasets_md_or_arrival_md():
    """``landfall datasets apply`` refuses a bad labelled file with these (docs/datasets.md), or with the
    converter's own reasons for the same formats (docs/arrival.md)."""
    produced = produced_reasons(labelled=True)
    assert {"label_length", "label_values", "no_positives", "no_negatives"} <= set(produced)
    known = labelled_reasons_documented() | documented_reasons()
    assert {r: where for r, where in produced.items() if r not in known} == {}


def test_every_listed_reason_is_given_somewhere():
    documented = documented_reasons()
    assert documented >= PRODUCED_ELSEWHERE
    assert documented - set(produced_reasons()) - PRODUCED_ELSEWHERE == set()
