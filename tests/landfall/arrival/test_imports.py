"""The arrival stage's modules use one another by public names only (#39): no ``from landfall.x import _y`` and no
``module._y`` on an imported Landfall module. (No import circle among them is ``lint-imports``' acyclic_siblings
contract in pyproject.toml; grimp counts imports inside functions, so a lazy import does not hide one.)"""

from __future__ import annotations

import ast
from pathlib import Path

import landfall.arrival

ARRIVAL = Path(landfall.arrival.__file__).parent


def private_uses(source: str) -> list[str]:
    """Every private name ``source`` takes from another Landfall module, as ``line: text``."""
    tree = ast.parse(source)
    modules: set[str] = set()  # local names bound to Landfall modules
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("landfall"):
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
                modules.add(alias.asname or alias.name)  # may be a module (from landfall.arrival import formats)
        elif isinstance(node, ast.Import):
            modules |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.startswith("landfall")}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_the_checker_finds_what_it_is_meant_to_refuse() -> None:
    bad = ("from landfall.arrival.converter import _commit\nfrom landfall.arrival import formats\n"
           "def f():\n    return formats._Counted\n")
    assert private_uses(bad) == ["1: from landfall.arrival.converter import _commit", "4: formats._Counted"]
    assert private_uses("from landfall import __version__\nfrom landfall.arrival import commit\n"
                        "commit.publish_shards\n") == []


def test_no_arrival_module_uses_another_modules_private_names() -> None:
    offences = {path.name: found for path in sorted(ARRIVAL.glob("*.py"))
                if (found := private_uses(path.read_text()))}
    assert offences == {}
