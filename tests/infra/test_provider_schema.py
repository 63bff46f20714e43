"""Every ``google_*`` resource and data block in infra/ uses only what the real provider's schema has.

``terraform validate`` needs the provider binary, which cannot be fetched here. The schema comes instead from the
vendor's own generated artifact: HashiCorp's prebuilt CDK-for-Terraform bindings, PyPI
``cdktf-cdktf-provider-google`` (generated from the hashicorp/google provider's schema; the Makefile installs it with
``--no-deps``, it is only read, never imported). Its jsii assembly lists, per resource and data source, every
argument and nested block, with whether it is required and, in each property's registry link, its Terraform name.

The bindings' version is pinned next to the provider pin: each ``versions.tf`` names it in a comment, and the
provider constraint must admit exactly the provider version the bindings were generated from, so bumping one
without the other fails here.
"""

from __future__ import annotations

import functools
import json
import re
import tarfile
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from typing import Any

import pytest

from .tools import INFRA, blocks, load_hcl

BINDINGS = "cdktf-cdktf-provider-google"
# Terraform meta-arguments and blocks every resource accepts (not in the provider's schema).
META = {"count", "for_each", "depends_on", "provider", "lifecycle", "provisioner", "connection"}
LINK = re.compile(r"providers/hashicorp/google/([\d.]+)/docs/(resources|data-sources)/(\w+)#(\w+)")


@dataclass
class Schema:
    """One block's schema: arguments (name -> required) and nested blocks (name -> (required, Schema))."""

    attributes: dict[str, bool] = field(default_factory=dict)
    blocks: dict[str, tuple[bool, Schema]] = field(default_factory=dict)


@dataclass
class Provider:
    version: str  # the hashicorp/google version the bindings were generated from
    bindings: str
    resources: dict[str, Schema]
    data_sources: dict[str, Schema]


def _struct_fqn(t: dict[str, Any]) -> str | None:
    """The provider struct a property's type names (a block), through unions and collections."""
    if "fqn" in t:
        return t["fqn"] if t["fqn"].startswith("@cdktf/provider-google.") else None
    if "collection" in t:
        return _struct_fqn(t["collection"]["elementtype"])
    if "union" in t:
        return next((f for u in t["union"]["types"] if (f := _struct_fqn(u))), None)
    return None


@functools.cache
def provider() -> Provider:
    try:
        dist = distribution(BINDINGS)
    except PackageNotFoundError:
        pytest.fail(f"{BINDINGS} is not installed: run `make venv`")
    bundle = Path(str(dist.locate_file(f"cdktf_cdktf_provider_google/_jsii/provider-google@{dist.version}.jsii.tgz")))
    with tarfile.open(bundle) as tar:
        types = json.load(tar.extractfile("package/.jsii"))["types"]  # type: ignore[arg-type]
    versions: set[str] = set()

    def schema(fqn: str, seen: tuple[str, ...] = ()) -> Schema:
        out = Schema()
        for prop in types[fqn].get("properties", []):
            docs = " ".join(prop.get("docs", {}).get(k, "") for k in ("summary", "remarks"))
            m = LINK.search(docs)
            if not m:
                continue  # cdktf's own (meta) properties carry no registry link
            versions.add(m.group(1))
            name, required = m.group(4), not prop.get("optional", False)
            struct = _struct_fqn(prop["type"])
            if struct and types.get(struct, {}).get("datatype") and struct not in seen:
                out.blocks[name] = (required, schema(struct, (*seen, fqn)))
            else:
                out.attributes[name] = required
        return out

    resources: dict[str, Schema] = {}
    data_sources: dict[str, Schema] = {}
    for fqn, t in types.items():
        # A resource's or data source's top-level config (not a nested block such as ServiceConfig) carries
        # Terraform's meta-arguments.
        if t.get("kind") != "interface" or "cdktf.TerraformMetaArguments" not in t.get("interfaces", []):
            continue
        links = [LINK.search(json.dumps(p.get("docs", {}))) for p in t.get("properties", [])]
        kinds = {(m.group(2), m.group(3)) for m in links if m}
        if len(kinds) != 1:
            continue
        (kind, tf_name), = kinds
        (resources if kind == "resources" else data_sources)[f"google_{tf_name}"] = schema(fqn)
    assert len(versions) == 1, versions
    return Provider(versions.pop(), dist.version, resources, data_sources)


# --- what infra/ declares ------------------------------------------------------------------------------------------
def declared() -> list[tuple[str, str, str, dict[str, Any]]]:
    """(where, "resource"|"data", type, body) of every google_* block under infra/."""
    out = []
    for tf in sorted(INFRA.rglob("*.tf")):
        if ".terraform" in tf.parts:
            continue
        doc = load_hcl(tf)
        for kind in ("resource", "data"):
            for block in blocks(doc, kind):
                for rtype, named in block.items():
                    rtype = rtype.strip('"')
                    for name, body in named.items():
                        if rtype.startswith("google_"):
                            out.append((f"{tf.relative_to(INFRA)}:{rtype}.{name.strip(chr(34))}", kind, rtype, body))
    return out


def problems(where: str, body: dict[str, Any], schema: Schema, top: bool = True) -> list[str]:
    found: list[str] = []
    given = set()
    for key, value in body.items():
        key = key.strip('"')
        if key == "dynamic":
            for dyn in value if isinstance(value, list) else [value]:
                for label, spec in dyn.items():
                    label = label.strip('"')
                    given.add(label)
                    if label not in schema.blocks:
                        found.append(f"{where}: dynamic {label!r} is not a block of the schema")
                        continue
                    for content in spec.get("content", []):
                        found += problems(f"{where}.{label}", content, schema.blocks[label][1], top=False)
            continue
        if top and key in META:
            continue
        given.add(key)
        if key in schema.blocks:
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, dict):
                    found += problems(f"{where}.{key}", item, schema.blocks[key][1], top=False)
        elif key not in schema.attributes:
            found.append(f"{where}: {key!r} is neither an argument nor a block of the schema")
    required = {n for n, r in schema.attributes.items() if r} | {n for n, (r, _) in schema.blocks.items() if r}
    found += [f"{where}: required {name!r} is not set" for name in sorted(required - given)]
    return found


def check(decls: list[tuple[str, str, str, dict[str, Any]]]) -> list[str]:
    p = provider()
    out = []
    for where, kind, rtype, body in decls:
        table = p.resources if kind == "resource" else p.data_sources
        if rtype not in table:
            out.append(f"{where}: no {kind} {rtype} in hashicorp/google {p.version}")
            continue
        out += problems(where, body, table[rtype])
    return out


def test_the_schema_is_read() -> None:
    p = provider()
    assert len(p.resources) > 500 and len(p.data_sources) > 100
    job = p.resources["google_cloud_run_v2_job"]
    assert job.attributes["name"] is True and job.blocks["template"][0] is True
    containers = job.blocks["template"][1].blocks["template"][1].blocks["containers"][1]
    assert "env" in containers.blocks and containers.attributes["image"] is True


def test_every_google_block_uses_only_the_schema_and_sets_what_it_requires() -> None:
    decls = declared()
    assert len(decls) >= 60
    assert check(decls) == []


def test_the_check_catches_unknown_and_missing_arguments() -> None:
    bad = [("x.tf:google_storage_bucket_iam_member.a", "resource", "google_storage_bucket_iam_member",
            {"bucket": "b", "role": "r", "membr": "m", "condition": [{"title": "t", "expresion": "e"}]}),
           ("x.tf:google_cloud_run_v2_job.j", "resource", "google_cloud_run_v2_job",
            {"name": "j", "location": "l", "template": [{"template": [{"containers": [
                {"image": "i", "dynamic": [{'"envv"': {"for_each": "x", "content": [{}]}}]}]}]}]}),
           ("x.tf:google_no_such_thing.n", "resource", "google_no_such_thing", {})]
    found = check(bad)
    assert any("'membr' is neither" in f for f in found)
    assert any("required 'member' is not set" in f for f in found)
    assert any("'expresion' is neither" in f for f in found)
    assert any("required 'expression' is not set" in f for f in found)
    assert any("dynamic 'envv'" in f for f in found)
    assert any("no resource google_no_such_thing" in f for f in found)


PIN = re.compile(r"#\s*provider schema:\s*cdktf-cdktf-provider-google==([\d.]+)")


def test_the_bindings_are_pinned_next_to_the_provider_pin() -> None:
    p = provider()
    versions_files = sorted(f for f in INFRA.rglob("versions.tf") if ".terraform" not in f.parts)
    assert versions_files
    major, minor, _patch = p.version.split(".")
    for vf in versions_files:
        text = vf.read_text()
        constraint = re.search(r'source\s*=\s*"hashicorp/google"\s*\n\s*version\s*=\s*"([^"]+)"', text)
        assert constraint, f"{vf}: no hashicorp/google pin"
        # "~> X.Y.0" admits X.Y.* only: the bindings' provider minor, nothing newer.
        assert constraint.group(1) == f"~> {major}.{minor}.0", (vf, constraint.group(1), p.version)
        pins = PIN.findall(text)
        assert pins == [p.bindings], f"{vf}: names {pins}, installed {p.bindings} (generated from {p.version})"
    makefile = (INFRA.parent / "Makefile").read_text()
    assert f"{BINDINGS}=={p.bindings}" in makefile
