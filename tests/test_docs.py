"""The README is the front door and docs/ the reference: every relative link in them resolves.

A link is ``[text](target)`` in Markdown; a target that is not a URL (``http(s)://``, ``mailto:``) is a path
relative to the page that holds it, optionally with a ``#anchor``, which must name a heading of the target page
(GitHub's rule: lower-cased, punctuation but ``-`` and ``_`` dropped, spaces to ``-``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md"), REPO / "infra" / "README.md",
                REPO / "k8s" / "README.md"])
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def links(page: Path) -> list[str]:
    return LINK.findall(FENCE.sub("", page.read_text()))


def anchors(page: Path) -> set[str]:
    out = set()
    for line in FENCE.sub("", page.read_text()).splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path):
    broken = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor}")
    assert broken == [], f"{page.relative_to(REPO)}: {broken}"


def test_the_readme_is_a_front_door():
    text = (REPO / "README.md").read_text()
    assert "make demo" in text and "make test" in text
    assert len(text.splitlines()) <= 150, "reference belongs in docs/, the README stays short (issue #48)"
    for page in (REPO / "docs").glob("*.md"):
        assert f"docs/{page.name}" in text, f"the README's map misses docs/{page.name}"


def test_the_link_checker_sees_a_broken_link(tmp_path: Path):
    page = tmp_path / "p.md"
    page.write_text("# Title\n\n[ok](p.md#title) [bad](missing.md) [code](#nowhere)\n```\n[x](in-fence.md)\n```\n")
    assert links(page) == ["p.md#title", "missing.md", "#nowhere"]
    assert anchors(page) == {"title"}


def test_the_map_names_every_module():
    """docs/architecture.md is where a newcomer finds the room for a change (issue #48): every module of the package,
    the trainer and the benches is named there, in backticks or in one of its drawings."""
    import re

    doc = (REPO / "docs" / "architecture.md").read_text()
    drawings = re.findall(r"```(.*?)```", doc, flags=re.S)
    prose = re.sub(r"```.*?```", "", doc, flags=re.S)
    named = set()
    for quoted in re.findall(r"`([^`]+)`", prose) + drawings:
        named |= set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", quoted))
    modules = [p for root in ("functions/landfall", "trainer", "bench") for p in (REPO / root).rglob("*.py")
               if p.name != "__init__.py" and "__pycache__" not in p.parts]
    assert len(modules) > 150
    missing = sorted(str(p.relative_to(REPO)) for p in modules if p.stem not in named)
    assert not missing, f"docs/architecture.md names no {missing}"
