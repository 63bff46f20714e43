"""No two modules share a base name unless they play the same role (issue #56).

The rule, as data:

- ``SAME_ROLE``: names every package may have, each in the same role: its settings (``config``), its entry point's
  handler (``handler``), its exception or exit-code root (``errors``), the entry point of a container that runs it
  (``task``).
- A module of ``landfall.cli`` is named after the command (or command group) it implements (``landfall score`` is
  ``landfall.cli.score``), and a module of ``landfall_bench`` after what it measures (``landfall_bench.train``
  measures ``trainer.train``): each may share its name with the one library module it fronts, and with nothing else.
- Every other module (the library: ``landfall`` outside ``cli``, ``trainer``) has a base name of its own.

Read from the files of ``functions/landfall``, ``trainer`` and ``bench``; each check is shown to fail on a deliberate
clash."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOTS = {"landfall": REPO / "functions" / "landfall", "trainer": REPO / "trainer", "landfall_bench": REPO / "bench"}
SAME_ROLE = {"config", "handler", "errors", "task"}
FRONTS = ("landfall.cli.", "landfall_bench.")  # packages whose modules are named after what they front


def modules() -> list[str]:
    out = []
    for top, root in ROOTS.items():
        for path in root.rglob("*.py"):
            if path.name == "__init__.py" or "data" in path.relative_to(root).parts:
                continue
            out.append(".".join((top, *path.relative_to(root).with_suffix("").parts)))
    return sorted(out)


def clashes(names: list[str], commands: set[str]) -> list[str]:
    """Each group of modules sharing a base name against the rule, as one line."""
    groups: dict[str, list[str]] = defaultdict(list)
    for name in names:
        groups[name.rsplit(".", 1)[-1]].append(name)
    out = []
    for base, group in sorted(groups.items()):
        if len(group) < 2 or base in SAME_ROLE:
            continue
        library = [m for m in group if not m.startswith(FRONTS)]
        unnamed = [m for m in group if m.startswith("landfall.cli.") and m not in commands]
        if len(library) > 1 or unnamed:
            out.append(f"{base}: {', '.join(sorted(group))}")
    return out


def command_modules() -> set[str]:
    from landfall.cli import COMMANDS

    return {module for module, _ in COMMANDS.values()}


def test_no_two_modules_share_a_name_unless_in_the_same_role():
    assert clashes(modules(), command_modules()) == []


def test_the_rule_fails_on_a_deliberate_clash():
    names = modules()
    assert clashes([*names, "landfall.core.rules.compaction"], command_modules()) == [
        "compaction: landfall.arrival.compaction, landfall.core.rules.compaction"]
    assert clashes([*names, "landfall.cli.timestamps"], command_modules()) == [  # a cli module that is no command
        "timestamps: landfall.cli.timestamps, landfall.core.rules.timestamps"]
    assert clashes([*names, "trainer.handler"], command_modules()) == []  # the same role in each package
