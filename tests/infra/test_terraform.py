"""Terraform under infra/, checked without a provider registry: `terraform fmt`, and references
(variables, resources, data sources, locals, module inputs and outputs) resolved with python-hcl2."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .tools import INFRA, all_resources, blocks, first, labelled, load_hcl, run, tool, unquote

MODULE_DIRS = sorted({p.parent for p in INFRA.rglob("*.tf") if ".terraform" not in p.parts})
ROOTS = sorted(p for p in MODULE_DIRS if "envs" in p.relative_to(INFRA).parts)
MODULES = sorted(p for p in MODULE_DIRS if "modules" in p.relative_to(INFRA).parts)
# Composition modules (modules/platform) call other modules, as the roots do.
CALLERS = sorted(set(ROOTS) | {p for p in MODULES if any('module "' in f.read_text() for f in p.glob("*.tf"))})
META_ARGS = {"source", "version", "providers", "depends_on", "count", "for_each"}
SKIP_KEYS = {"description", "error_message", "__start_line__", "__end_line__"}

VAR_RE = re.compile(r"(?<![\w.])var\.([A-Za-z_][\w-]*)")
LOCAL_RE = re.compile(r"(?<![\w.])local\.([A-Za-z_][\w-]*)")
MODULE_RE = re.compile(r"(?<![\w.])module\.([A-Za-z_][\w-]*)(?:\.([A-Za-z_][\w-]*))?")
DATA_RE = re.compile(r"(?<![\w.])data\.([a-z][a-z0-9_]*)\.([A-Za-z_][\w-]*)")
RESOURCE_RE = re.compile(r"(?<![\w.])((?:google|google-beta|archive|random|null)_[a-z0-9_]+)\.([A-Za-z_][\w-]*)")


@dataclass
class Module:
    path: Path
    variables: dict[str, dict[str, Any]] = field(default_factory=dict)
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    locals: set[str] = field(default_factory=set)
    resources: set[tuple[str, str]] = field(default_factory=set)
    data: set[tuple[str, str]] = field(default_factory=set)
    modules: dict[str, dict[str, Any]] = field(default_factory=dict)
    terraform: list[dict[str, Any]] = field(default_factory=list)
    expressions: list[tuple[str, str]] = field(default_factory=list)  # (file, expression text)
    moved: list[tuple[str, str, str]] = field(default_factory=list)  # (file, from address, to address)


def _strings(node: Any, out: list[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key not in SKIP_KEYS:
                _strings(value, out)
    elif isinstance(node, list):
        for value in node:
            _strings(value, out)
    elif isinstance(node, str) and "${" in node:
        out.append(node)


def _address(value: Any) -> str:
    text = unquote(value)
    assert isinstance(text, str), value
    return text.removeprefix("${").removesuffix("}")


def load_module(path: Path) -> Module:
    mod = Module(path)
    for tf in sorted(path.glob("*.tf")):
        doc = load_hcl(tf)
        mod.variables |= labelled(doc, "variable")
        mod.outputs |= labelled(doc, "output")
        mod.modules |= labelled(doc, "module")
        mod.terraform += blocks(doc, "terraform")
        for block in blocks(doc, "locals"):
            mod.locals |= set(block)
        for kind, target in (("resource", mod.resources), ("data", mod.data)):
            for block in blocks(doc, kind):
                for rtype, named in block.items():
                    target |= {(rtype.strip('"'), name.strip('"')) for name in named}
        # moved blocks hold addresses, not expressions (`from` no longer exists): checked on their own.
        for block in blocks(doc, "moved"):
            mod.moved.append((tf.name, _address(block.get("from")), _address(block.get("to"))))
        found: list[str] = []
        _strings({k: v for k, v in doc.items() if k != "moved"}, found)
        mod.expressions += [(tf.name, e) for e in found]
    return mod


def module_source(mod: Module, name: str) -> Path:
    source = unquote(mod.modules[name]["source"])
    assert isinstance(source, str) and source.startswith("../"), f"{mod.path}: module {name} is not local"
    return (mod.path / source).resolve()


def _id(p: Path) -> str:
    return str(p.relative_to(INFRA)) if p.is_relative_to(INFRA) else str(p)


def test_layout() -> None:
    assert {p.name for p in (INFRA / "envs").iterdir()} >= {"dev", "prod"}
    assert ROOTS and MODULES
    for root in ROOTS:
        assert (root / "variables.tf").is_file() and (root / "outputs.tf").is_file(), root
    assert (INFRA / "README.md").is_file()


def test_terraform_fmt() -> None:
    proc = run([tool("terraform"), "fmt", "-check", "-recursive", "-diff", str(INFRA)])
    assert proc.returncode == 0, f"terraform fmt -check failed:\n{proc.stdout}{proc.stderr}"


def reference_problems(mod: Module) -> list[str]:
    problems: list[str] = []
    for fname, expr in mod.expressions:
        for name in VAR_RE.findall(expr):
            if name not in mod.variables:
                problems.append(f"{fname}: var.{name} is not declared")
        for name in LOCAL_RE.findall(expr):
            if name not in mod.locals:
                problems.append(f"{fname}: local.{name} is not declared")
        for rtype, name in DATA_RE.findall(expr):
            if (rtype, name) not in mod.data:
                problems.append(f"{fname}: data.{rtype}.{name} is not declared")
        for rtype, name in RESOURCE_RE.findall(re.sub(DATA_RE, "", expr)):
            if (rtype, name) not in mod.resources:
                problems.append(f"{fname}: {rtype}.{name} is not a declared resource")
        for name, output in MODULE_RE.findall(expr):
            if name not in mod.modules:
                problems.append(f"{fname}: module.{name} is not declared")
            elif output and output not in load_module(module_source(mod, name)).outputs:
                problems.append(f"{fname}: module.{name} has no output {output}")
    return problems


@pytest.mark.parametrize("path", MODULE_DIRS, ids=_id)
def test_references_resolve(path: Path) -> None:
    problems = reference_problems(load_module(path))
    assert not problems, "\n".join(problems)


MODULE_STEP = re.compile(r"module\.([A-Za-z_][\w-]*)(\[\d+\])?")


def _instances(mod: Module, address: str) -> tuple[str | None, bool]:
    """Where ``address`` (``module.a[0].module.b``) leads from ``mod``: ``(problem, is_a_declared_instance)``. An
    instance is declared when every call on the path exists and carries an index exactly when it has ``count`` or
    ``for_each`` (Terraform's module instance addresses: https://developer.hashicorp.com/terraform/language/modules/
    develop/refactoring, read 2026-12-05; ``module.a`` of a counted call is the state a call without count left)."""
    steps = address.split(".module.")
    steps = [steps[0], *("module." + s for s in steps[1:])]
    matched = [MODULE_STEP.fullmatch(s) for s in steps]
    if not all(matched):
        return "expected a module address", False
    current, declared = mod, True
    for m in matched:
        name, index = m.group(1), m.group(2)
        if name not in current.modules:
            return f"module {name} is not declared in {_id(current.path)}", False
        counted = any(k in current.modules[name] for k in ("count", "for_each"))
        declared = declared and counted == bool(index)
        current = load_module(module_source(current, name))
    return None, declared


def moved_problems(mod: Module) -> list[str]:
    """`to` is a declared module instance (a chain of calls; an index where the call counts) or the `from` of another
    block (Terraform follows chains of moves), `from` one that is no longer declared: a call removed or moved, or the
    instance before a count was added."""
    problems: list[str] = []
    sources = {old for _f, old, _n in mod.moved}
    for fname, old, new in mod.moved:
        if not all(MODULE_STEP.fullmatch(s) for s in [old.split(".module.")[0],
                                                      *("module." + s for s in old.split(".module.")[1:])]):
            problems.append(f"{fname}: moved from {old}: expected a module address")
        elif _instances(mod, old) == (None, True):
            problems.append(f"{fname}: moved from {old}, which is still declared")
        problem, declared = _instances(mod, new)
        if problem is not None:
            problems.append(f"{fname}: moved to {new}: {problem}")
        elif not declared and new not in sources:  # a chain goes on from a `to` that another block moves
            problems.append(f"{fname}: moved to {new}: not an instance of what is declared (an index exactly where "
                            "a call has count or for_each)")
    return problems


@pytest.mark.parametrize("path", MODULE_DIRS, ids=_id)
def test_moved_blocks_resolve(path: Path) -> None:
    problems = moved_problems(load_module(path))
    assert not problems, "\n".join(problems)


def test_moved_check_catches_mistakes(tmp_path: Path) -> None:
    root, platform = tmp_path / "root", tmp_path / "modules" / "platform"
    root.mkdir()
    platform.mkdir(parents=True)
    (root / "main.tf").write_text(
        '''module "platform" {
  source = "../modules/platform"
}

moved {
  from = module.gke
  to   = module.platform.module.gke
}

moved {
  from = module.platform
  to   = module.platform.module.nope
}

moved {
  from = module.platform.module.gke
  to   = module.platform.module.gke[0]
}

moved {
  from = module.platform.module.net
  to   = module.platform.module.net[0]
}
'''
    )
    (platform / "main.tf").write_text('module "gke" {\n  source = "../gke"\n  count  = 1\n}\n\n'
                                      'module "net" {\n  source = "../net"\n}\n')
    problems = moved_problems(load_module(root))
    assert sorted(p.split(": ", 1)[1] for p in problems) == [
        "moved from module.platform, which is still declared",
        "moved from module.platform.module.net, which is still declared",
        "moved to module.platform.module.net[0]: not an instance of what is declared (an index exactly where a call "
        "has count or for_each)",
        f"moved to module.platform.module.nope: module nope is not declared in {platform}",
    ]


def test_reference_check_catches_mistakes(tmp_path: Path) -> None:
    (tmp_path / "main.tf").write_text(
        '''variable "known" {
  description = "d"
  type        = string
}

locals {
  l = var.known
}

resource "google_pubsub_topic" "t" {
  name   = "${var.known}-${var.unknown}"
  labels = { a = local.l, b = local.missing }
}

resource "google_pubsub_subscription" "s" {
  name  = "s"
  topic = google_pubsub_topic.other.id
  x     = data.google_project.nope.number
  y     = google_pubsub_topic.t.id
  z     = module.absent.value
}
'''
    )
    problems = reference_problems(load_module(tmp_path))
    assert sorted(p.split(": ", 1)[1] for p in problems) == [
        "data.google_project.nope is not declared",
        "google_pubsub_topic.other is not a declared resource",
        "local.missing is not declared",
        "module.absent is not declared",
        "var.unknown is not declared",
    ]


@pytest.mark.parametrize("path", CALLERS, ids=_id)
def test_module_inputs_exist(path: Path) -> None:
    mod = load_module(path)
    assert mod.modules, f"{path} calls no modules"
    problems = []
    for name, body in mod.modules.items():
        target = module_source(mod, name)
        assert target.is_dir(), f"module {name}: {target} does not exist"
        declared = load_module(target).variables
        given = set(body) - META_ARGS - {"__start_line__", "__end_line__"}
        problems += [f"module {name}: input {k} is not a variable of {_id(target)}" for k in given - set(declared)]
        required = {k for k, v in declared.items() if "default" not in v}
        problems += [f"module {name}: required input {k} is missing" for k in required - given]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", MODULE_DIRS, ids=_id)
def test_variables_and_outputs_documented(path: Path) -> None:
    mod = load_module(path)
    for name, body in mod.variables.items():
        assert unquote(body.get("description")), f"{_id(path)}: variable {name} has no description"
        assert "type" in body, f"{_id(path)}: variable {name} has no type"
    for name, body in mod.outputs.items():
        assert unquote(body.get("description")), f"{_id(path)}: output {name} has no description"


def test_inputs_are_validated() -> None:
    for root in ROOTS:
        variables = load_module(root).variables
        for name in ("project_id", "bucket_name", "trainer_image_tag"):
            if name in variables:
                assert "validation" in variables[name], f"{_id(root)}: {name} has no validation"


@pytest.mark.parametrize("path", MODULE_DIRS, ids=_id)
def test_google_provider_pinned(path: Path) -> None:
    mod = load_module(path)
    providers: dict[str, Any] = {}
    for block in mod.terraform:
        for req in block.get("required_providers", []):
            providers |= {k.strip('"'): v for k, v in req.items()}
    google = first(providers.get("google"))
    assert isinstance(google, dict), f"{_id(path)}: google provider not in required_providers"
    assert unquote(google.get("source")) == "hashicorp/google"
    version = unquote(google.get("version"))
    assert isinstance(version, str) and re.fullmatch(r"(~>|=)\s*\d+\.\d+(\.\d+)?", version), version


@pytest.mark.parametrize("path", ROOTS, ids=_id)
def test_roots_use_gcs_backend(path: Path) -> None:
    backends: dict[str, Any] = {}
    for block in load_module(path).terraform:
        for backend in block.get("backend", []):
            backends |= {k.strip('"'): v for k, v in backend.items()}
    assert set(backends) == {"gcs"}, f"{_id(path)}: backend must be gcs, configured at init"


def test_functions_roots_read_existing_platform_outputs() -> None:
    for env in (INFRA / "envs").iterdir():
        platform = load_module(env / "platform").outputs
        functions_root = load_module(env / "functions")
        used = {m for _, e in functions_root.expressions for m in re.findall(r"local\.platform\.(\w+)", e)}
        assert used, env
        assert used <= set(platform), f"{env.name}: platform lacks outputs {sorted(used - set(platform))}"
        states = {}
        for tf in sorted((env / "functions").glob("*.tf")):
            for block in blocks(load_hcl(tf), "data"):
                for kind, named in block.items():
                    if kind.strip('"') == "terraform_remote_state":
                        states |= {name.strip('"'): body for name, body in named.items()}
        platform_state = states["platform"]
        assert unquote(platform_state["backend"]) == "gcs", env
        config = first(platform_state["config"])
        assert unquote(config["prefix"]) == f"landfall/{env.name}/platform", env
        assert unquote(config["bucket"]) == "${var.state_bucket}", env


def test_no_service_account_keys() -> None:
    resources = all_resources()
    assert resources
    assert not [(str(path), name) for path, kind, name, _ in resources if kind == "google_service_account_key"]
    for root in MODULE_DIRS:
        data = {kind for kind, _ in load_module(root).data}
        assert "google_service_account_key" not in data, root


def _strings_of(value: Any) -> list[Any]:
    """A list attribute (older python-hcl2 wraps it in one more list), items unquoted."""
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):
        value = value[0]
    assert isinstance(value, list), value
    return [unquote(v) for v in value]


def test_webhook_firewall_from_control_plane() -> None:
    net = load_module(INFRA / "modules" / "network")
    assert ("google_compute_firewall", "master_to_webhooks") in net.resources
    ports = [unquote(p) for p in net.variables["webhook_ports"]["default"]]
    ports = first(ports) if len(ports) == 1 and isinstance(ports[0], list) else ports
    assert {"443", "6443"} <= {str(p) for p in ports}
    # 9443: the training-operator v1.9 webhook server (k8s/README.md pins the operator to the v1.9 line).
    assert {"443", "6443", "9443"} <= {str(p) for p in ports}
    (firewall,) = [body for path, kind, name, body in all_resources(INFRA / "modules" / "network")
                   if (kind, name) == ("google_compute_firewall", "master_to_webhooks")]
    assert unquote(firewall["direction"]) == "INGRESS"
    assert _strings_of(firewall["source_ranges"]) == ["${var.master_cidr}"]  # the control plane's /28 only
    assert _strings_of(firewall["target_tags"]) == ["${var.node_tag}"]
    allow = first(firewall["allow"])
    assert unquote(allow["protocol"]) == "tcp" and unquote(allow["ports"]) == "${var.webhook_ports}"


def test_functions_conventions() -> None:
    text = (INFRA / "modules" / "functions" / "main.tf").read_text()
    for needle in (
        'name        = "on-data-arrival"',
        'entry_point     = "on_data_arrival"',
        'name        = "on-training-request"',
        'entry_point     = "on_training_request"',
        'runtime         = "python311"',
        'name    = "landfall-gcs-notifications-arrival"',
        "max_delivery_attempts = var.max_delivery_attempts",
        "output_sha256",
    ):
        assert needle in text, needle
    for env in ("LANDFALL_BUCKET", "LANDFALL_REQUEST_TOPIC", "LANDFALL_BACKEND", "LANDFALL_GKE_ENDPOINT",
                "LANDFALL_GKE_CA_CERT", "LANDFALL_NAMESPACE", "LANDFALL_TRAINER_IMAGE",
                "LANDFALL_TRAINER_SERVICE_ACCOUNT", "LANDFALL_DEAD_LETTER_SUBSCRIPTION", "GOOGLE_CLOUD_PROJECT"):
        assert re.search(rf"^\s+{env}\s+=", text, re.M), env
    variables = load_module(INFRA / "modules" / "functions").variables
    assert unquote(variables["max_delivery_attempts"]["default"]) == 5
    assert unquote(variables["namespace"]["default"]) == "landfall-training"
    assert unquote(variables["trainer_service_account"]["default"]) == "landfall-trainer"
    pubsub = load_module(INFRA / "modules" / "pubsub").variables
    assert unquote(pubsub["topic_name"]["default"]) == "landfall-training-requests"
    assert unquote(pubsub["dead_letter_topic_name"]["default"]) == "landfall-training-requests-dead-letter"
    assert unquote(pubsub["notification_topic_name"]["default"]) == "landfall-gcs-notifications"
    assert unquote(pubsub["arrival_dead_letter_topic_name"]["default"]) == "landfall-gcs-notifications-dead-letter"


def test_bucket_settings() -> None:
    text = (INFRA / "modules" / "storage" / "main.tf").read_text()
    assert text.count("uniform_bucket_level_access = true") == 2
    assert text.count('public_access_prevention    = "enforced"') == 2
    for prefix in ("runs/", "rejected/", "received/", "tmp/"):
        assert f'matches_prefix = ["{prefix}"]' in text, prefix
