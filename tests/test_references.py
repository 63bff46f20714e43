"""Whatever names code is code (issue #54): every repository path, Python module (or name in one), ``landfall`` and
``landfall bench`` command and ``make`` target that the README, ``docs/``, the Dockerfiles, ``cloudbuild*.yaml``,
``k8s/`` and ``infra/`` name exists. A rename that misses one of them fails here.

What counts as a reference:
- a path: a token that starts with one of the repository's top folders (``trainer/training/pipeline.py``,
  ``tests/infra/...``), not inside a URL; one with ``*`` must match a file, one with a placeholder (``<dataset>``,
  ``{...}``, ``N``-style upper-case parts, ``...``) is not checked;
- a module: a dotted name that starts with ``landfall.``, ``trainer.`` or ``landfall_bench.``; its longest prefix
  that is a module file must hold the rest as a top-level name (a function, a class, an assignment), read from the
  source, nothing imported;
- a command: ``landfall X`` and ``landfall bench X`` where X is a lower-case word, ``python -m X``, ``make X``.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TOPS = [*sorted(p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))
                and p.name != "landfall-demo"), ".ci"]
ROOTS = {"landfall": REPO / "functions" / "landfall", "trainer": REPO / "trainer", "landfall_bench": REPO / "bench"}
EXTENSIONS = {"py", "md", "yaml", "yml", "json", "tf", "txt", "png", "html", "csv", "toml", "hcl", "tfvars", "lock",
              "log", "jsonl", "parquet", "npy", "npz", "xlsx", "ts", "keras", "pb", "index", "tfrecord", "gz", "zip",
              "sh", "cfg", "ini", "svg", "io", "com", "dev", "org", "net"}


def sources() -> list[Path]:
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    dockerfiles = sorted(REPO.glob("*/Dockerfile"))
    builds = sorted(REPO.glob("cloudbuild*.yaml"))
    k8s = sorted(p for p in (REPO / "k8s").rglob("*") if p.is_file() and p.suffix in (".yaml", ".yml", ".md"))
    infra = sorted(p for p in (REPO / "infra").rglob("*") if p.is_file() and p.suffix in (".tf", ".md", ".tfvars")
                   and ".terraform" not in p.parts)
    return pages + dockerfiles + builds + k8s + infra


TOP = "|".join(re.escape(t) for t in TOPS)
PATH = re.compile(rf"(?<![\w./:@-])((?:{TOP})/[\w./*<>{{}}$\-]*)")
MODULE = re.compile(r"(?<![\w./-])((?:landfall_bench|landfall|trainer)(?:\.[A-Za-z_]\w*)+)(?![\w/-]|\.\w)")
LANDFALL = re.compile(r"(?<![\w./-])landfall (bench )?([a-z][a-z-]+)\b")
PYTHON_M = re.compile(r"python3? -m ([\w.]+)")
MAKE = re.compile(r"(?:`|\$ |&& )make (?:-C \S+ )?([a-z][\w-]*)")  # as a command: in backticks, after a prompt or &&


def placeholder(path: str) -> bool:
    return bool(re.search(r"<|>|\{|\}|\$|\.\.\.|(?:^|/)[A-Z][A-Z_]+(?:/|$|\.)", path))


@functools.cache
def loggers() -> frozenset[str]:
    """Logger names the code gives (``getLogger("landfall.rejections")``): the log filters and the docs name them."""
    names = set()
    for root in ROOTS.values():
        for py in root.rglob("*.py"):
            names |= set(re.findall(r"(?:getLogger|logs\.get)\(\s*[\"']([\w.]+)[\"']", py.read_text()))
    return frozenset(names)


def path_exists(path: str) -> bool:
    """A file or folder, a glob that matches, or ``folder/module.name``: a name in that Python file."""
    if "*" in path:
        return any(REPO.glob(path))
    if (REPO / path).exists():
        return True
    stem, _, name = path.rpartition(".")
    module = REPO / f"{stem}.py"
    return module.is_file() and name in top_level_names(module)


@functools.cache
def top_level_names(module: Path) -> frozenset[str]:
    tree = ast.parse(module.read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return frozenset(names)


def module_exists(dotted: str) -> bool:
    """``a.b.c.d``: the longest prefix that is a module or package, then the rest a top-level name of it (one level:
    a class's method is not checked further)."""
    parts = dotted.split(".")
    base = ROOTS[parts[0]]
    for i in range(len(parts), 0, -1):
        path = base.joinpath(*parts[1:i])
        for candidate in (path.with_suffix(".py") if i > 1 else None, path / "__init__.py"):
            if candidate is not None and candidate.is_file():
                rest = parts[i:]
                if not rest:
                    return True
                if (candidate.parent / rest[0]).is_dir() or (candidate.parent / f"{rest[0]}.py").is_file():
                    return False  # a submodule name that the loop would have found
                return rest[0] in top_level_names(candidate)
    return False


@functools.cache
def commands() -> tuple[frozenset[str], frozenset[str]]:
    from landfall.cli import COMMANDS, PASSTHROUGH
    from landfall_bench.cli import BENCHES

    return frozenset(COMMANDS) | frozenset(PASSTHROUGH), frozenset(BENCHES)


@functools.cache
def make_targets() -> frozenset[str]:
    text = (REPO / "Makefile").read_text()
    return frozenset(re.findall(r"^([a-z][\w-]*):", text, re.M))


def stale(text: str, where: str) -> list[str]:
    found = []
    for m in PATH.finditer(text):
        path = m.group(1).rstrip(".,:;)`'\"")
        if not path or placeholder(path):
            continue
        if not path_exists(path):
            found.append(f"{where}: path {path}")
    for m in MODULE.finditer(text):
        dotted = m.group(1).rstrip(".")
        if dotted.rsplit(".", 1)[-1] in EXTENSIONS:
            continue  # a file name (trainer.json), a domain (landfall.dev)
        if not module_exists(dotted) and dotted not in loggers():
            found.append(f"{where}: module {dotted}")
    top, benches = commands()
    for m in LANDFALL.finditer(text):
        bench, word = m.groups()
        if bench and word not in benches:
            found.append(f"{where}: command landfall bench {word}")
    for m in re.finditer(r"`landfall ([a-z][a-z-]+)", text):
        if m.group(1) not in top:
            found.append(f"{where}: command landfall {m.group(1)}")
    for m in PYTHON_M.finditer(text):
        name = m.group(1).rstrip(".")
        if name.split(".")[0] in ROOTS and not module_exists(name):
            found.append(f"{where}: python -m {name}")
    for m in MAKE.finditer(text):
        if m.group(1) not in make_targets():
            found.append(f"{where}: make {m.group(1)}")
    return found


def table_files(line: str, where: str) -> list[str]:
    """A Markdown table row whose first cell names folders (`trainer/`): the bare file names the row quotes
    (`task.py`) are files of those folders."""
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    folders = [f for f in re.findall(r"`([\w./-]+/)`", cells[0]) if (REPO / f).is_dir()] if line.startswith("|") \
        else []
    found = []
    for name in re.findall(r"`([\w-]+\.(?:py|yaml|json|md|txt))`", " ".join(cells[1:])) if folders else []:
        if not any((REPO / f / name).exists() for f in folders):
            found.append(f"{where}: path {folders[0]}{name}")
    return found


def check(path: Path) -> list[str]:
    found = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        found += stale(line, f"{path.relative_to(REPO)}:{n}") + table_files(line, f"{path.relative_to(REPO)}:{n}")
    return found


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_name_exists(path: Path) -> None:
    assert check(path) == []


def test_the_checker_finds_a_stale_name() -> None:
    """Each kind, caught: the README's layout table named trainer/data.py, renamed trainer/pipeline.py (now
    trainer/training/pipeline.py); the converter image checked landfall.core.services.cloudrun, moved to
    landfall.arrival.cloudrun."""
    row = "| `trainer/training/` | the training half (`inputs.py`, `model.py`, `data.py`, ...) |"
    assert table_files(row, "README") == ["README: path trainer/training/data.py"]
    assert table_files(row.replace("data.py", "pipeline.py"), "README") == []
    assert stale("see `trainer/data.py`", "README") == ["README: path trainer/data.py"]
    assert stale("see `trainer/pipeline.py`, `trainer.verdict`", "README") == [
        "README: path trainer/pipeline.py", "README: module trainer.verdict"]  # moved into the trainer's halves
    assert stale("`trainer/training/pipeline.py`", "x") == []
    assert stale("import landfall.core.services.cloudrun", "x") == ["x: module landfall.core.services.cloudrun"]
    assert stale("`landfall.arrival.cloudrun`, `trainer.train.strategy_kind`", "x") == []
    assert stale("`trainer.train.no_such_name`", "x") == ["x: module trainer.train.no_such_name"]
    assert stale("run `landfall frobnicate`, `landfall bench nothing`", "x") == [
        "x: command landfall bench nothing", "x: command landfall frobnicate"]
    assert stale("`make demo`, `make nosuchtarget`", "x") == ["x: make nosuchtarget"]
    assert stale("python -m landfall.arrival.task; python -m trainer.nothing", "x") == [
        "x: module trainer.nothing", "x: python -m trainer.nothing"]
    names = 'logger="landfall.rejections", "trainer.kubeflow.org/trainjob", `tests/infra/tools.load_hcl`'
    assert stale(names, "x") == []
    assert stale("changes make one job; `make nosuch`", "x") == ["x: make nosuch"]
    assert stale("gs://BUCKET/tfrecords/<dataset>/ and https://github.com/a/b/docs/x.md", "x") == []
    assert stale("`tests/infra/*.py` and `tests/nothing/*.py`", "x") == ["x: path tests/nothing/*.py"]
