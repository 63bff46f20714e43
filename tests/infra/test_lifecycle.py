"""No bucket lifecycle rule deletes what a live snapshot, or a live job's inputs, still names.

Old compacted shards and snapshots are removed only by the collection rule (``landfall.arrival.compaction.collect``,
``landfall.core.artifacts.snapshots.collectable``), which knows which snapshots a live job may read; a lifecycle rule
knows
only names and ages. So every Delete rule of the data bucket that can reach a live (current) object must match
none of the names the code writes for a dataset's data: the arrivals' shards, manifests and retraction records,
the compacted shards and snapshot parts, the snapshots, and a job's ``inputs.json``. The names are the code's own
(``Layout``, ``landfall.core.artifacts.snapshots``, ``landfall.submit.ledger``); the rules are read from infra/ with
python-hcl2, and which objects a rule reaches is Cloud Storage's published lifecycle semantics, below.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from .gcp_rules import Rule
from .tools import INFRA, all_resources, first, unquote

# Object Lifecycle Management, "Lifecycle conditions" (https://cloud.google.com/storage/docs/lifecycle#conditions,
# read 2026-12-01): all conditions of a rule must hold (AND); matchesPrefix / matchesSuffix hold when the name
# starts / ends with any listed value; isLive false (Terraform's with_state "ARCHIVED"), numNewerVersions,
# daysSinceNoncurrentTime and noncurrentTimeBefore hold only for noncurrent versions (a live object has no newer
# version and no noncurrent time); age, createdBefore and the custom-time conditions are eventually met by any object.
NONCURRENT_ONLY = Rule(
    frozenset({"num_newer_versions", "days_since_noncurrent_time", "noncurrent_time_before"}),
    "https://cloud.google.com/storage/docs/lifecycle#conditions",
)
NONCURRENT_STATE = Rule("ARCHIVED", "https://cloud.google.com/storage/docs/lifecycle#isLive")
STORAGE = INFRA / "modules" / "storage" / "main.tf"


def lifecycle_rules(path: Path = STORAGE, bucket: str = "data") -> list[dict[str, Any]]:
    """The data bucket's rules as ``{"action": ..., "condition": {...}}`` with unquoted values."""
    [body] = [b for p, kind, name, b in all_resources(path.parent) if p == path and kind == "google_storage_bucket"
              and name == bucket]
    rules = body.get("lifecycle_rule", [])
    out = []
    for rule in rules if isinstance(rules, list) else [rules]:
        cond = first(rule.get("condition", {})) or {}
        out.append({"action": unquote(first(rule["action"])["type"]),
                    "condition": {k: ([unquote(v) for v in first(val)] if isinstance(first(val), list)
                                      else [unquote(val)]) if k.startswith("matches_") else unquote(val)
                                  for k, val in cond.items()}})
    return out


def deletes_live(rule: dict[str, Any], name: str) -> bool:
    """Whether ``rule`` can, some day, delete the live object ``name``."""
    if rule["action"] != "Delete":
        return False
    cond = rule["condition"]
    if set(cond) & NONCURRENT_ONLY.value or cond.get("with_state") == NONCURRENT_STATE.value:
        return False
    prefixes, suffixes = cond.get("matches_prefix"), cond.get("matches_suffix")
    if prefixes is not None and not any(name.startswith(p) for p in prefixes):
        return False
    return suffixes is None or any(name.endswith(s) for s in suffixes)


def named_by_snapshots() -> dict[str, str]:
    """What a live snapshot or a live job's inputs name, as the code names it: object name -> what it is."""
    from landfall.core.artifacts import snapshots
    from landfall.core.contracts import layout
    from landfall.core.contracts.layout import Layout
    from landfall.submit.ledger import Ledger

    lay, bucket, ds = Layout(), "b", "pump-7"
    arrival = layout.dataset_prefix(lay, ds) + "a1/"
    attempt = snapshots.attempt_prefix(bucket, lay, ds, 3)
    ledger = Ledger(cast(Any, None), bucket, lay)  # names only: no storage call
    names = {
        arrival + layout.shard_name(0, 1): "an arrival's shard (in the delta, or named in place by a snapshot)",
        arrival + "manifest.json": "an arrival's manifest (the commit point; a rewrite reads its statistics)",
        arrival + layout.RETRACTION: "a retraction record (the release's skip list)",
        attempt + "part-00000.tfrecord": "a compacted shard",
        attempt + "part-00000.json": "a snapshot part",
        snapshots.snapshot_uri(bucket, lay, ds, 3): "a snapshot",
        ledger.inputs_uri(ledger.job_name(ds, 3)): "a job's inputs.json (names its snapshot, read on restart)",
    }
    return {uri.removeprefix(f"gs://{bucket}/"): what for uri, what in names.items()}


def test_no_lifecycle_rule_deletes_what_a_live_snapshot_names() -> None:
    rules = lifecycle_rules()
    assert rules, "the data bucket's lifecycle rules were not read"
    doomed = [f"{name} ({what}) by {rule['condition']}" for name, what in named_by_snapshots().items()
              for rule in rules if deletes_live(rule, name)]
    assert doomed == []


def test_the_names_are_the_layouts_prefixes() -> None:
    from landfall.core.contracts.layout import Layout

    lay = Layout()
    names = named_by_snapshots()
    for prefix in (lay.tfrecords_prefix, lay.compacted_prefix, lay.snapshots_prefix, lay.runs_prefix):
        assert any(n.startswith(prefix) for n in names), prefix


def test_noncurrent_rules_remain_and_collection_is_the_only_remover() -> None:
    """The versions a collection (or a retried write) leaves behind are still bounded, and no rule reaches the
    compacted shards or the snapshots at all: only ``compact.collect`` removes them."""
    rules = lifecycle_rules()
    assert any(r["action"] == "Delete" and "num_newer_versions" in r["condition"] for r in rules)
    assert any(r["action"] == "Delete" and "days_since_noncurrent_time" in r["condition"] for r in rules)
    for r in rules:
        for p in r["condition"].get("matches_prefix", []):
            assert not p.startswith(("compacted/", "snapshots/")), r


@pytest.mark.parametrize(("rule", "name", "deleted"), [
    ({"action": "Delete", "condition": {"age": 90, "matches_prefix": ["tfrecords/"]}}, "tfrecords/d/a/m.json", True),
    ({"action": "Delete", "condition": {"age": 1, "matches_prefix": ["tmp/"]}}, "tfrecords/d/a/m.json", False),
    ({"action": "Delete", "condition": {"age": 1}}, "snapshots/d/00000001.json", True),
    ({"action": "Delete", "condition": {"age": 1, "matches_suffix": [".json"]}}, "compacted/d/1-a/part-0.json", True),
    ({"action": "Delete", "condition": {"num_newer_versions": 3, "with_state": "ARCHIVED"}}, "snapshots/x", False),
    ({"action": "Delete", "condition": {"days_since_noncurrent_time": 30}}, "snapshots/x", False),
    ({"action": "Delete", "condition": {"age": 5, "with_state": "ARCHIVED"}}, "snapshots/x", False),
    ({"action": "SetStorageClass", "condition": {"age": 30, "matches_prefix": ["runs/"]}}, "runs/j/inputs.json", False),
])
def test_the_check_tells_a_deleting_rule(rule: dict[str, Any], name: str, deleted: bool) -> None:
    assert deletes_live(rule, name) is deleted
