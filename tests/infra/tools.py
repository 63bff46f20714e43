"""Helpers of the offline infrastructure checks: where the tools are, rendering overlays, reading HCL."""

from __future__ import annotations

import copy
import functools
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
INFRA = REPO / "infra"
K8S = REPO / "k8s"
OVERLAYS = sorted(p.name for p in (K8S / "overlays").iterdir() if p.is_dir())

NAMESPACE = "landfall-training"
TRAINER_SA = "landfall-trainer"
SUBMITTER_SA = "landfall-submitter"  # the submit function: a Google identity only (RBAC User), no KSA
RECONCILER_SA = "landfall-reconciler"  # the reconciler Deployment: KSA, Google account and RBAC names
APP_LABELS = {
    "app.kubernetes.io/name": "landfall",
    "app.kubernetes.io/managed-by": "landfall",
    "app.kubernetes.io/part-of": "landfall",
}


def tool(name: str) -> str:
    """A checker from the venv (next to this interpreter), else from PATH; a missing tool fails the test."""
    candidates = [Path(sys.executable).parent / name, REPO / ".venv-tools" / "bin" / name]
    for path in candidates:
        if path.is_file():
            return str(path)
    found = shutil.which(name)
    if found:
        return found
    pytest.fail(f"`{name}` is not installed (looked in {', '.join(map(str, candidates))} and PATH); run `make venv`")


def run(args: list[str], *, cwd: Path = REPO, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)


def render_dir(path: Path) -> list[dict[str, Any]]:
    proc = run([tool("kubectl"), "kustomize", str(path)])
    assert proc.returncode == 0, f"kubectl kustomize {path} failed:\n{proc.stderr}"
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


@functools.cache
def _render_overlay(env: str) -> tuple[str, ...]:
    return tuple(yaml.safe_dump(d) for d in render_dir(K8S / "overlays" / env))


def render_overlay(env: str) -> list[dict[str, Any]]:
    """The objects `kubectl kustomize k8s/overlays/<env>` renders (fresh copies)."""
    return [yaml.safe_load(d) for d in _render_overlay(env)]


def find(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    hits = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(hits) == 1, f"expected one {kind}/{name}, found {len(hits)}"
    return hits[0]


def strict(schema: Any) -> Any:
    """The schema with unknown fields rejected: an object schema with `properties` gets
    `additionalProperties: false` unless it keeps unknown fields (x-kubernetes-preserve-unknown-fields)."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: (v if k in ("enum", "default", "example", "required") else strict(v)) for k, v in schema.items()}
    keeps_unknown = schema.get("x-kubernetes-preserve-unknown-fields") or "additionalProperties" in schema
    if "properties" in schema and not keeps_unknown:
        out["additionalProperties"] = False
    return out


# --- HCL ----------------------------------------------------------------------------------------------
def load_hcl(path: Path) -> dict[str, Any]:
    """One ``.tf`` file parsed (a copy: callers may change it). Parsing is slow (python-hcl2 is a Lark
    grammar), and the policy tests read the same files hundreds of times, so a parse is kept per file
    version: path, size and modification time, so a copy of infra/ changed by a test is parsed anew."""
    st = path.stat()
    return copy.deepcopy(_parse_hcl(str(path.resolve()), st.st_size, st.st_mtime_ns))


@functools.cache
def _parse_hcl(path: str, _size: int, _mtime_ns: int) -> dict[str, Any]:
    import hcl2
    from hcl2.utils import SerializationOptions

    # python-hcl2 8's round-trip extras off (comments, block markers, quoted strings, heredoc syntax): values as
    # Terraform reads them, the shape the tests were written against (python-hcl2 7's, without its mangling of the
    # quoted strings inside an expression)
    options = SerializationOptions(with_comments=False, explicit_blocks=False, strip_string_quotes=True,
                                   preserve_heredocs=False)
    with open(path) as f:
        return hcl2.load(f, serialization_options=options)


def blocks(doc: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """Top-level blocks of one kind; python-hcl2 gives a list of one-key dicts (or a dict)."""
    value = doc.get(kind, [])
    return value if isinstance(value, list) else [value]


def labelled(doc: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    """``variable "x" {...}`` blocks as ``{"x": body}``."""
    out: dict[str, dict[str, Any]] = {}
    for block in blocks(doc, kind):
        for name, body in block.items():
            out[name.strip('"')] = body
    return out


def first(value: Any) -> Any:
    """python-hcl2 wraps attribute values in one-element lists (older versions); unwrap."""
    while isinstance(value, list) and len(value) == 1:
        value = value[0]
    return value


def unquote(value: Any) -> Any:
    value = first(value)
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


def expr_text(value: Any) -> str:
    """An attribute's expression as python-hcl2 gives it (``"${...}"`` or a quoted literal), as text."""
    return str(first(value))


def all_resources(root: Path = INFRA) -> list[tuple[Path, str, str, dict[str, Any]]]:
    """Every ``resource "TYPE" "NAME" {...}`` under ``root``: (file, type, name, body)."""
    out: list[tuple[Path, str, str, dict[str, Any]]] = []
    for path in sorted(root.rglob("*.tf")):
        if ".terraform" in path.parts:
            continue
        for block in blocks(load_hcl(path), "resource"):
            for kind, named in block.items():
                for name, body in named.items():
                    out.append((path, kind.strip('"'), name.strip('"'), body))
    return out
