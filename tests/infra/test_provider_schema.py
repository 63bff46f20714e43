"""Every ``google_*`` resource and data block in infra/ uses only what the real provider's schema has.

``terraform validate`` needs the provider binary, which cannot be fetched here. The schema is instead committed data
read from the provider's own source: ``tests/infra/data/google-provider-<version>.json`` holds, for each resource and
data source type infra/ declares, its arguments (required or optional) and nested blocks, as the Go schema
declarations of https://github.com/hashicorp/terraform-provider-google at the release tag define them, with the tag,
its commit and the date it was read. ``python -m tests.infra.provider_schema_extract <clone> <tag>``
(tests/infra/provider_schema_extract.py) wrote it; docs/versions.md says how it was checked.

The data is pinned next to the provider pin: each ``versions.tf`` names the data file in a comment, and the
provider constraint must admit exactly the provider version the data was extracted from, so bumping one without
the other fails here; a type infra/ starts to use fails until the extraction is run again.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .tools import INFRA, REPO, blocks, load_hcl

# Terraform meta-arguments and blocks every resource accepts (not in the provider's schema).
META = {"count", "for_each", "depends_on", "provider", "lifecycle", "provisioner", "connection"}
PIN = re.compile(r"#\s*provider schema:\s*(tests/infra/data/google-provider-([\d.]+)\.json)")


@dataclass
class Schema:
    """One block's schema: arguments (name -> required) and nested blocks (name -> (required, Schema))."""

    attributes: dict[str, bool] = field(default_factory=dict)
    blocks: dict[str, tuple[bool, Schema]] = field(default_factory=dict)
    deprecated: dict[str, str] = field(default_factory=dict)  # name -> the provider's deprecation message


@dataclass
class Provider:
    version: str  # the hashicorp/google release the data was extracted from
    path: Path
    meta: dict[str, Any]
    resources: dict[str, Schema]
    data_sources: dict[str, Schema]


def _schema(block: dict[str, Any]) -> Schema:
    out = Schema()
    for name, need in block["arguments"].items():
        assert need in ("required", "optional"), (name, need)
        out.attributes[name] = need == "required"
    for name, nested in block["blocks"].items():
        out.blocks[name] = (bool(nested["required"]), _schema(nested))
    out.deprecated = dict(block.get("deprecated", {}))
    assert set(out.deprecated) <= set(out.attributes) | set(out.blocks), out.deprecated
    return out


def versions_files() -> list[Path]:
    return sorted(f for f in INFRA.rglob("versions.tf") if ".terraform" not in f.parts)


@functools.cache
def provider() -> Provider:
    named = {m.group(1) for vf in versions_files() for m in PIN.finditer(vf.read_text())}
    assert len(named) == 1, f"versions.tf files name {sorted(named) or 'no'} provider schema data; expected one"
    path = REPO / named.pop()
    assert path.is_file(), f"{path} is missing: run python -m tests.infra.provider_schema_extract"
    data = json.loads(path.read_text())
    return Provider(data["version"], path, {k: v for k, v in data.items() if k not in ("resources", "data_sources")},
                    {t: _schema(b) for t, b in data["resources"].items()},
                    {t: _schema(b) for t, b in data["data_sources"].items()})


# --- what infra/ declares ------------------------------------------------------------------------------------------
def _marker(key: str) -> bool:
    """python-hcl2's own bookkeeping keys (``__is_block__``, ``__comments__``, ...), not HCL."""
    return key.startswith("__") and key.endswith("__")


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
                    if _marker(rtype) or not isinstance(named, dict):
                        continue
                    for name, body in named.items():
                        if rtype.startswith("google_") and not _marker(name):
                            out.append((f"{tf.relative_to(INFRA)}:{rtype}.{name.strip(chr(34))}", kind, rtype, body))
    return out


def problems(where: str, body: dict[str, Any], schema: Schema, top: bool = True,
             deprecated: list[str] | None = None) -> list[str]:
    """What the body sets that the schema lacks, and what it requires that the body does not set; arguments the
    provider deprecates (removed in a later major release) that the body sets are added to ``deprecated``."""
    found: list[str] = []
    given = set()
    for key, value in body.items():
        key = key.strip('"')
        if _marker(key):
            continue
        if key == "dynamic":
            for dyn in value if isinstance(value, list) else [value]:
                for label, spec in dyn.items():
                    label = label.strip('"')
                    if _marker(label):
                        continue
                    given.add(label)
                    if label not in schema.blocks:
                        found.append(f"{where}: dynamic {label!r} is not a block of the schema")
                        continue
                    for content in spec.get("content", []):
                        found += problems(f"{where}.{label}", content, schema.blocks[label][1], False, deprecated)
            continue
        if top and key in META:
            continue
        given.add(key)
        if key in schema.blocks:
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, dict):
                    found += problems(f"{where}.{key}", item, schema.blocks[key][1], False, deprecated)
        elif key not in schema.attributes:
            found.append(f"{where}: {key!r} is neither an argument nor a block of the schema")
    required = {n for n, r in schema.attributes.items() if r} | {n for n, (r, _) in schema.blocks.items() if r}
    found += [f"{where}: required {name!r} is not set" for name in sorted(required - given)]
    if deprecated is not None:
        deprecated += [f"{where}: {name!r} is deprecated: {schema.deprecated[name]}"
                       for name in sorted(given & set(schema.deprecated))]
    return found


def check(decls: list[tuple[str, str, str, dict[str, Any]]], deprecated: list[str] | None = None) -> list[str]:
    p = provider()
    out = []
    for where, kind, rtype, body in decls:
        table = p.resources if kind == "resource" else p.data_sources
        if rtype not in table:
            out.append(f"{where}: no {kind} {rtype} in {p.path.name} (hashicorp/google {p.version}): "
                       "a type the data lacks; extract it again")
            continue
        out += problems(where, body, table[rtype], deprecated=deprecated)
    return out


def test_the_schema_is_read() -> None:
    p = provider()
    meta = p.meta
    assert meta["provider"] == "registry.terraform.io/hashicorp/google"
    assert meta["source"] == "https://github.com/hashicorp/terraform-provider-google"
    assert meta["tag"] == f"v{p.version}" and p.path.name == f"google-provider-{p.version}.json"
    assert re.fullmatch(r"[0-9a-f]{40}", meta["commit"]), meta["commit"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", meta["read"]) and meta["commit_date"][:10] <= meta["read"]
    job = p.resources["google_cloud_run_v2_job"]
    assert job.attributes["name"] is True and job.attributes["location"] is True and job.blocks["template"][0] is True
    containers = job.blocks["template"][1].blocks["template"][1].blocks["containers"][1]
    assert "env" in containers.blocks and containers.attributes["image"] is True
    member = p.resources["google_storage_bucket_iam_member"]
    assert {n for n, r in member.attributes.items() if r} == {"bucket", "role", "member"}
    assert member.blocks["condition"][0] is False
    assert {n for n, r in member.blocks["condition"][1].attributes.items() if r} == {"expression", "title"}
    # Computed-only attributes are no arguments; the SDK's implicit id and timeouts are.
    bucket = p.resources["google_storage_bucket"]
    assert "self_link" not in bucket.attributes and "url" not in bucket.attributes
    assert bucket.attributes["id"] is False and "create" in bucket.blocks["timeouts"][1].attributes


def test_the_data_is_of_the_newest_provider_release() -> None:
    """The provider release recorded as newest (tests/infra/upstream_releases.json, the same snapshot's tags)."""
    p = provider()
    recorded = json.loads((Path(__file__).parent / "upstream_releases.json").read_text())["repositories"]
    released = recorded["hashicorp/terraform-provider-google"]["released"]
    newest = max(released, key=lambda t: tuple(int(x) for x in re.findall(r"\d+", t)))
    assert p.meta["tag"] == newest, (p.meta["tag"], newest)
    assert p.meta["commit_date"][:10] == released[newest]


def test_the_data_holds_exactly_the_types_infra_declares() -> None:
    p = provider()
    used = {(kind, rtype) for _, kind, rtype, _ in declared()}
    held = {("resource", t) for t in p.resources} | {("data", t) for t in p.data_sources}
    assert used == held, f"extract again: missing {sorted(used - held)}, unused {sorted(held - used)}"


def test_every_google_block_uses_only_the_schema_and_sets_what_it_requires() -> None:
    decls = declared()
    assert len(decls) >= 60
    deprecated: list[str] = []
    assert check(decls, deprecated) == []
    # What the provider deprecates goes in its next major release (docs/versions.md): infra/ sets none of it.
    assert deprecated == []


def test_the_check_catches_unknown_and_missing_arguments() -> None:
    bad = [("x.tf:google_storage_bucket_iam_member.a", "resource", "google_storage_bucket_iam_member",
            {"bucket": "b", "role": "r", "membr": "m", "condition": [{"title": "t", "expresion": "e"}]}),
           ("x.tf:google_cloud_run_v2_job.j", "resource", "google_cloud_run_v2_job",
            {"name": "j", "location": "l", "template": [{"template": [{"containers": [
                {"image": "i", "dynamic": [{'"envv"': {"for_each": "x", "content": [{}]}}]}]}]}]}),
           ("x.tf:google_compute_subnetwork.s", "resource", "google_compute_subnetwork",
            {"name": "s", "network": "n", "enable_flow_logs": True, "__is_block__": True}),
           ("x.tf:google_no_such_thing.n", "resource", "google_no_such_thing", {})]
    found = check(bad)
    assert any("'membr' is neither" in f for f in found)
    assert any("required 'member' is not set" in f for f in found)
    assert any("'expresion' is neither" in f for f in found)
    assert any("required 'expression' is not set" in f for f in found)
    assert any("dynamic 'envv'" in f for f in found)
    # Removed in 7.0 (the upgrade guide: log_config replaces it): the 7.x data must say so.
    assert any("google_compute_subnetwork.s: 'enable_flow_logs' is neither" in f for f in found)
    assert not any("__is_block__" in f for f in found)
    assert any("no resource google_no_such_thing" in f for f in found)
    assert len(found) == 7, found


def test_the_check_reports_deprecated_arguments() -> None:
    cluster = ("x.tf:google_container_cluster.c", "resource", "google_container_cluster",
               {"name": "c", "binary_authorization": [{"enabled": True}]})
    deprecated: list[str] = []
    assert check([cluster], deprecated) == []
    assert deprecated == ["x.tf:google_container_cluster.c.binary_authorization: 'enabled' is deprecated: "
                          "Deprecated in favor of evaluation_mode."]
    cluster[3]["binary_authorization"] = [{"evaluation_mode": "PROJECT_SINGLETON_POLICY_ENFORCE"}]
    deprecated.clear()
    assert check([cluster], deprecated) == [] and deprecated == []


def test_the_data_is_pinned_next_to_the_provider_pin() -> None:
    p = provider()
    files = versions_files()
    assert files
    major, minor, _patch = p.version.split(".")
    for vf in files:
        text = vf.read_text()
        constraint = re.search(r'source\s*=\s*"hashicorp/google"\s*\n\s*version\s*=\s*"([^"]+)"', text)
        assert constraint, f"{vf}: no hashicorp/google pin"
        # "~> X.Y.0" admits X.Y.* only: the data's provider minor, nothing newer.
        assert constraint.group(1) == f"~> {major}.{minor}.0", (vf, constraint.group(1), p.version)
        pins = PIN.findall(text)
        assert pins == [(str(p.path.relative_to(REPO)), p.version)], f"{vf}: names {pins}, data is {p.version}"
