"""Least-privilege policy over the parsed IaC (python-hcl2) and the rendered overlays (kubectl kustomize).

Every IAM grant in infra/ is enumerated: a project-level role is allowed only if listed below with its
reason; every IAM condition's ``startsWith`` prefix ends in ``/``. Whether the grants allow what each workload does,
as Google evaluates them, is tests/infra/test_authorization.py. Every RBAC rule of every rendered overlay
is enumerated: no cluster-wide write (a ClusterRole write verb not limited to named objects).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from . import gcp_rules as gcp
from .iam_terraform import BUCKET as BUCKET_NAME
from .iam_terraform import custom_roles, grants
from .tools import (
    INFRA,
    K8S,
    NAMESPACE,
    OVERLAYS,
    RECONCILER_SA,
    all_resources,
    blocks,
    expr_text,
    first,
    load_hcl,
    render_dir,
    render_overlay,
)

# (resource name, role) of every project-level grant, with why nothing narrower works.
PROJECT_ROLES: dict[tuple[str, str], str] = {
    ("submitter_cluster_access", "roles/container.clusterViewer"):
        "container.clusters.get to fetch cluster credentials; no Kubernetes objects (RBAC in k8s/ does that)",
    ("build_cluster_access", "roles/container.clusterViewer"):
        "the deploy's cluster credentials; no Kubernetes objects (the landfall-deployer RBAC in k8s/ does that)",
    ("nodes_default", "roles/container.defaultNodeServiceAccount"):
        "GKE nodes' logs and metrics: Google's minimal node role, project-level by design",
    ("fn_build_logs", "roles/logging.logWriter"): "build logs: a log entry's only parent is the project",
    ("test_logs", "roles/logging.logWriter"): "build logs: a log entry's only parent is the project",
    ("build_logs", "roles/logging.logWriter"): "build logs: a log entry's only parent is the project",
    ("fn_build_sources", "roles/storage.objectViewer"):
        "Cloud Functions' staging bucket is Google-created; conditioned on it and our sources bucket by name",
    ("build_operations", "${google_project_iam_custom_role.operations_viewer.name}"):
        "an operation has no allow policy of its own, only the project's; custom role with operations.get only",
    ("vertex_releasers", "${google_project_iam_custom_role.custom_job_submitter.name}"):
        "vertex engine only: Vertex AI grants custom jobs on the project (they have no policy of their own); custom "
        "role with customJobs create, get and list only",
}

PROJECT_IAM = {"google_project_iam_member", "google_project_iam_binding"}
BASIC_ROLES = {"roles/owner", "roles/editor", "roles/viewer"}
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection", "escalate", "bind", "impersonate", "*"}
# Verbs Kubernetes cannot limit with resourceNames: never cluster-wide.
UNNAMEABLE = {"create", "deletecollection", "*"}


def iam_grants() -> list[tuple[Path, str, str, dict[str, Any]]]:
    return [r for r in all_resources() if r[1].endswith(("_iam_member", "_iam_binding", "_iam_policy"))]


def _roles(body: dict[str, Any]) -> list[str]:
    role = expr_text(body.get("role", ""))
    if "each.key" in role or "each.value" in role:
        return [str(v) for v in first(body["for_each"]) if isinstance(v, str)] if isinstance(
            first(body["for_each"]), list) else [expr_text(body["for_each"])]
    return [role]


def test_iam_grants_are_found() -> None:
    kinds = {kind for _, kind, _, _ in iam_grants()}
    assert {"google_project_iam_member", "google_storage_bucket_iam_member", "google_pubsub_topic_iam_member",
            "google_pubsub_subscription_iam_member", "google_service_account_iam_member",
            "google_artifact_registry_repository_iam_member"} <= kinds


def test_no_authoritative_or_basic_grants() -> None:
    for path, kind, name, body in iam_grants():
        assert not kind.endswith(("_iam_policy", "_iam_binding")), f"{path}: {kind}.{name} is authoritative"
        assert not set(_roles(body)) & BASIC_ROLES, f"{path}: {kind}.{name}"


def test_project_level_roles_are_allow_listed() -> None:
    found = set()
    for path, kind, name, body in iam_grants():
        if kind not in PROJECT_IAM:
            continue
        for role in _roles(body):
            found.add((name, role))
            assert (name, role) in PROJECT_ROLES, f"{path}: {kind}.{name} grants {role} project-wide: not allow-listed"
    assert found == set(PROJECT_ROLES), f"stale allow-list entries: {set(PROJECT_ROLES) - found}"
    assert all(reason.strip() for reason in PROJECT_ROLES.values())


def test_pubsub_agent_grants_are_on_its_resources() -> None:
    agent = [(kind, name, body) for _, kind, name, body in iam_grants() if "pubsub_service_agent" in expr_text(
        body.get("member", "")) or "gcp-sa-pubsub" in expr_text(body.get("member", ""))]
    by_kind: dict[str, list[str]] = {}
    for kind, _name, body in agent:
        by_kind.setdefault(kind, []).append(expr_text(body["role"]))
    assert set(by_kind) == {"google_pubsub_topic_iam_member", "google_pubsub_subscription_iam_member",
                            "google_service_account_iam_member"}, by_kind
    assert set(by_kind["google_pubsub_topic_iam_member"]) == {"roles/pubsub.publisher"}
    assert set(by_kind["google_pubsub_subscription_iam_member"]) == {"roles/pubsub.subscriber"}
    # In each module with push subscriptions (the functions', the scorer's), the subscriber grant covers exactly
    # the subscriptions with a dead-letter policy.
    expected = {"functions": {"training_requests", "arrivals"}, "scorer": {"arrivals", "rescore"}}
    for module, subscriptions in expected.items():
        fn = load_hcl(INFRA / "modules" / module / "main.tf")
        with_dlq = {n.strip('"') for b in blocks(fn, "resource") for k, named in b.items()
                    if k.strip('"') == "google_pubsub_subscription" for n, body in named.items()
                    if "dead_letter_policy" in body}
        assert with_dlq == subscriptions, module
        sources = {expr_text(v) for b in blocks(fn, "locals")
                   for v in first(b.get("dead_letter_sources", {})).values()}
        assert sources == {f"${{google_pubsub_subscription.{s}.name}}" for s in with_dlq}, sources


def test_deploy_account_acts_as_exactly_the_accounts_it_deploys() -> None:
    """With every engine: the accounts of what it deploys, and with vertex also the reconcile job's; nobody else
    acts as those, and only the vertex engine's releasers act as the trainer (its CustomJobs' identity)."""
    from .iam_terraform import ENGINES, grants

    expected = {"converter", "submitter", "invoker", "fn-build", "convert-job", "scorer", "scorer-invoker"}
    for engine in ENGINES:
        act_as = {(g.member, g.on.removeprefix("sa:")) for g in grants(engine=engine)
                  if g.role == "roles/iam.serviceAccountUser"}
        vertex = engine == "vertex"
        assert act_as == {*{("build", a) for a in expected | ({"reconciler"} if vertex else set())},
                          *({("submitter", "trainer"), ("reconciler", "trainer")} if vertex else set())}, engine


def test_repository_writers_push_to_their_own_repository() -> None:
    writers = {name: expr_text(body["repository"]) for _, kind, name, body in iam_grants()
               if kind == "google_artifact_registry_repository_iam_member"
               and expr_text(body["role"]) == "roles/artifactregistry.writer"}
    assert writers == {"build_push": "${var.repository_name}", "fn_build_push": "${var.functions_repository_name}"}


# --- one account per workload: the submitter and the reconciler ------------------------------------------


def held_by(account: str) -> dict[str, tuple[str, str, str, str]]:
    """Grants whose member is the account ``landfall-<account>``: name -> (kind, role, target, condition)."""
    out = {}
    for _path, kind, name, body in iam_grants():
        if expr_text(body.get("member", "")) != f'${{google_service_account.sa["{account}"].member}}':
            continue
        target = expr_text(body.get("bucket") or body.get("topic") or body.get("project")
                           or body.get("service_account_id") or body.get("repository") or "")
        cond = body.get("condition")
        out[name] = (kind, expr_text(body["role"]), target, expr_text(first(cond)["expression"]) if cond else "")
    return out


def bucket_access(account: str, name: str) -> set[str]:
    """The roles ``account`` holds on one object of the data bucket ("" = the bucket itself: listing), as IAM
    evaluates the conditions (tests/infra/gcp_rules.py)."""
    resource = gcp.obj(BUCKET_NAME, name) if name else gcp.bucket(BUCKET_NAME)
    return {g.role for g in grants() if g.member == account and g.on == f"bucket:{BUCKET_NAME}"
            and (g.condition is None or gcp.evaluate(g.condition, resource) is True)}


VIEW, USE = "roles/storage.objectViewer", "roles/storage.objectUser"
# The submit stage's bookkeeping (landfall.submit.ledger), which both releasers write.
BOOKKEEPING = ["requests/ds/pending/r1.json", "requests/ds/head.json", "requests/ds/spend.json",
               "received/ds/r1.json", "runs/ds-1/inputs.json", "runs/ds-1/submitted.json"]
# Other stages' objects: neither releaser touches them (both read runs/*/metrics.json only: the reconciler to
# announce, both for the GPU budget, landfall.submit.spend).
OTHERS = ["runs/ds-1/checkpoint", "runs/ds-1/model/saved_model.pb", "models/ds/champion.json",
          "incoming/ds/x.npy", "tmp/a/part-0"]


def test_submitter_holds_only_what_the_function_needs() -> None:
    grants = held_by("submitter")
    assert {n: g[:3] for n, g in grants.items()} == {
        "submitter_read_manifests": ("google_storage_bucket_iam_member", VIEW, "${var.bucket_name}"),
        "submitter_write_rejections": ("google_storage_bucket_iam_member", USE, "${var.bucket_name}"),
        "submitter_bookkeeping": ("google_storage_bucket_iam_member", USE, "${var.bucket_name}"),
        "submitter_read_job_metrics": ("google_storage_bucket_iam_member", VIEW, "${var.bucket_name}"),
        "submitter_cluster_access": ("google_project_iam_member", "roles/container.clusterViewer", "${var.project_id}"),
    }, grants
    # Not the results topic (no topic at all), not the reconciler's result records; the job metrics read only.
    assert not [g for g in grants.values() if g[0] == "google_pubsub_topic_iam_member"]
    assert not [g for g in grants.values() if "result.json" in g[3]], grants
    assert bucket_access("submitter", "runs/ds-1/metrics.json") == {VIEW}
    for name in [*BOOKKEEPING, "rejected/ds/request-r1.json"]:
        assert USE in bucket_access("submitter", name), name
    assert bucket_access("submitter", "tfrecords/ds/a1/manifest.json") == {VIEW}
    assert bucket_access("submitter", "") == {VIEW}  # listing manifests
    for name in [*OTHERS, "runs/ds-1/result.json"]:
        assert bucket_access("submitter", name) == set(), name


def test_reconciler_holds_exactly_its_grants() -> None:
    grants = held_by("reconciler")
    assert {n: g[:3] for n, g in grants.items()} == {
        "reconciler_read_manifests": ("google_storage_bucket_iam_member", VIEW, "${var.bucket_name}"),
        "reconciler_bookkeeping": ("google_storage_bucket_iam_member", USE, "${var.bucket_name}"),
        "reconciler_read_job_metrics": ("google_storage_bucket_iam_member", VIEW, "${var.bucket_name}"),
        "reconciler_collect_read_parts": ("google_storage_bucket_iam_member", VIEW, "${var.bucket_name}"),
        "reconciler_collect_delete": ("google_storage_bucket_iam_member",
                                      "${google_project_iam_custom_role.object_deleter.name}", "${var.bucket_name}"),
        "reconciler_publish_results": ("google_pubsub_topic_iam_member", "roles/pubsub.publisher",
                                       "${var.results_topic_name}"),
    }, grants
    # Releasing: the submit stage's bookkeeping and the manifests; announcing: metrics read, result written.
    for name in [*BOOKKEEPING, "runs/ds-1/result.json"]:
        assert bucket_access("reconciler", name) == {USE}, name
    assert bucket_access("reconciler", "tfrecords/ds/a1/manifest.json") == {VIEW}
    assert bucket_access("reconciler", "tfrecords/ds/a1/retracted.json") == {VIEW}
    assert bucket_access("reconciler", "") == {VIEW}
    assert bucket_access("reconciler", "runs/ds-1/metrics.json") == {VIEW}
    for name in [*OTHERS, "rejected/ds/request-r1.json"]:
        assert bucket_access("reconciler", name) == set(), name
    # Collecting: read the snapshots and their parts, delete (a custom role: delete only) under snapshots/ and
    # compacted/; no compacted shard is read.
    deleter = "custom:object_deleter"
    assert bucket_access("reconciler", "snapshots/ds/00000001.json") == {VIEW, deleter}
    assert bucket_access("reconciler", "compacted/ds/00000001-0a1b2c3d/part-00000.json") == {VIEW, deleter}
    assert bucket_access("reconciler", "compacted/ds/00000001-0a1b2c3d/part-00000.tfrecord") == {deleter}
    assert custom_roles()[deleter] == {"storage.objects.delete"}
    # Nothing project-wide (it reaches the Kubernetes API with its in-cluster token, not clusterViewer).
    assert not [n for n, g in grants.items() if g[0] in PROJECT_IAM]


def test_results_topic_has_exactly_two_publishers() -> None:
    publishers = {expr_text(body["member"]) for _, kind, _n, body in iam_grants()
                  if kind == "google_pubsub_topic_iam_member"
                  and expr_text(body["topic"]) == "${var.results_topic_name}"}
    assert publishers == {'${google_service_account.sa["trainer"].member}',
                          '${google_service_account.sa["reconciler"].member}'}, publishers


def test_scorer_holds_exactly_its_grants() -> None:
    """Detections on arrival: read (only) the arrival's source, its records under tfrecords/, the champion record and
    runs/, where the champion's model is; create-only under scores/; publish detections. Nothing
    project-wide: its logs are its container's output, which Cloud Run collects."""
    create = "roles/storage.objectCreator"
    grants = held_by("scorer")
    assert {n: g[:3] for n, g in grants.items()} == {
        "scorer_read_incoming": ("google_storage_bucket_iam_member", VIEW, "${var.bucket_name}"),
        "scorer_read_arrival_records": ("google_storage_bucket_iam_member", VIEW, "${var.bucket_name}"),
        "scorer_read_champion": ("google_storage_bucket_iam_member", VIEW, "${var.bucket_name}"),
        "scorer_read_models": ("google_storage_bucket_iam_member", VIEW, "${var.bucket_name}"),
        "scorer_read_scores": ("google_storage_bucket_iam_member", VIEW, "${var.bucket_name}"),
        "scorer_create_scores": ("google_storage_bucket_iam_member", create, "${var.bucket_name}"),
        "scorer_publish_detections": ("google_pubsub_topic_iam_member", "roles/pubsub.publisher",
                                      "${var.detections_topic_name}"),
    }, grants
    for name in ("incoming/ds/x.csv", "tfrecords/ds/a1/manifest.json", "tfrecords/ds/a1/retracted.json",
                 "tfrecords/ds/a1/part-00000-of-00001.tfrecord", "models/ds/champion.json",
                 "runs/ds-1/model/saved_model.pb", "config/datasets/ds.json", ""):
        assert bucket_access("scorer", name) == {VIEW}, name
    assert bucket_access("scorer", "scores/ds/a1/ds-1/summary.json") == {VIEW, create}
    for name in ("models/ds/history/1.json", "snapshots/ds/00000001.json", "requests/ds/head.json",
                 "rejected/ds/a1.json", "config/labelled/ds/x.npz", "tmp/a/part-0"):
        assert bucket_access("scorer", name) == set(), name


def test_detections_have_one_publisher_and_score_requests_none() -> None:
    """The scorer alone publishes detections; score requests are published by operators with their own credentials
    (as `landfall republish` publishes training requests): no workload account holds a grant on that topic."""
    topics: dict[str, set[str]] = {}
    for _, kind, _n, body in iam_grants():
        if kind == "google_pubsub_topic_iam_member":
            topics.setdefault(expr_text(body["topic"]), set()).add(expr_text(body["member"]))
    assert topics["${var.detections_topic_name}"] == {'${google_service_account.sa["scorer"].member}'}
    assert not [t for t in topics if "score_requests" in t], topics
    # The request topic's publishers are the two converters, as before: the scorer reads requests, never sends one.
    assert topics["${var.topic_name}"] == {'${google_service_account.sa["converter"].member}',
                                           '${google_service_account.sa["convert-job"].member}'}


def test_nobody_acts_as_the_reconciler_account_but_its_ksa() -> None:
    on_it = [(name, expr_text(body["role"])) for _, kind, name, body in iam_grants()
             if kind == "google_service_account_iam_member"
             and 'sa["reconciler"]' in expr_text(body["service_account_id"])]
    assert on_it == [("reconciler_workload_identity", "roles/iam.workloadIdentityUser")], on_it
    # With the vertex engine there is no KSA: the build deploys the reconcile job as it (test above), nobody else.


# --- conditions --------------------------------------------------------------------------------------------
def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def starts_with_args(text: str) -> list[str]:
    """The literal argument of every ``startsWith(...)``, quotes and escapes removed."""
    out = []
    for m in re.finditer(r"startsWith\(", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        out.append(text[m.end():i - 1].replace("\\", "").strip().strip('"'))
    return out


def condition_expressions(root: Path = INFRA) -> list[tuple[str, str]]:
    """Every condition expression in ``root``, with the locals it refers to substituted."""
    out = []
    for path in sorted(root.rglob("*.tf")):
        doc = load_hcl(path)
        local_text = {k: " ".join(_strings(v)) for b in blocks(doc, "locals") for k, v in b.items()}
        for block in blocks(doc, "resource"):
            for kind, named in block.items():
                for name, body in named.items():
                    for cond in body.get("condition", []) if isinstance(body.get("condition"), list) else []:
                        text = expr_text(cond["expression"])
                        for key, value in local_text.items():
                            text = text.replace(f"local.{key}", value)
                        out.append((f"{path.relative_to(root)}:{kind.strip(chr(34))}.{name.strip(chr(34))}", text))
    return out


def test_every_condition_prefix_ends_in_slash() -> None:
    conditions = condition_expressions()
    assert len(conditions) >= 10
    prefixes = 0
    for where, text in conditions:
        for arg in starts_with_args(text):
            prefixes += 1
            assert arg.endswith("/"), f"{where}: startsWith({arg!r}) matches any name that merely begins so"
    assert prefixes >= 8


def test_condition_check_catches_a_missing_slash(tmp_path: Path) -> None:
    (tmp_path / "main.tf").write_text(
        'locals {\n  p = "resource.name.startsWith(\\"projects/_/buckets/b\\")"\n}\n'
        'resource "google_project_iam_member" "m" {\n  project = "p"\n  role = "r"\n  member = "m"\n'
        '  condition {\n    title = "t"\n    expression = local.p\n  }\n}\n'
    )
    [(_where, text)] = condition_expressions(tmp_path)
    assert starts_with_args(text) == ["projects/_/buckets/b"]


# --- RBAC ----------------------------------------------------------------------------------------------------
def _kueue_overlay(tmp: Path) -> Path:
    """overlays/prod with the Kueue component switched on (a copy of k8s/, as tests/infra/test_kueue.py does)."""
    from .test_kueue import enable_in_prod

    k8s = tmp / "k8s"
    shutil.copytree(K8S, k8s)
    enable_in_prod(k8s)
    return k8s / "overlays" / "prod"


def cluster_wide_writes(objs: list[dict[str, Any]]) -> list[str]:
    problems = []
    for obj in objs:
        if obj["kind"] != "ClusterRole":
            continue
        for rule in obj.get("rules", []):
            verbs = set(rule.get("verbs", []))
            writes = verbs & WRITE_VERBS
            if not writes:
                continue
            if writes & UNNAMEABLE or not rule.get("resourceNames"):
                problems.append(f"ClusterRole/{obj['metadata']['name']}: {sorted(writes)} on {rule.get('resources')}")
    for obj in objs:
        if obj["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            assert obj["roleRef"]["name"] not in ("cluster-admin", "admin", "edit"), obj["metadata"]
    return problems


@pytest.mark.parametrize("name", [*OVERLAYS, "prod+kueue"])
def test_no_cluster_wide_write_verbs(name: str, tmp_path: Path) -> None:
    objs = render_dir(_kueue_overlay(tmp_path)) if name == "prod+kueue" else render_overlay(name)
    assert any(o["kind"] == "ClusterRole" for o in objs)
    assert cluster_wide_writes(objs) == []


def test_rbac_check_catches_cluster_wide_writes() -> None:
    role = {"kind": "ClusterRole", "metadata": {"name": "x"},
            "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "patch"]},
                      {"apiGroups": [""], "resources": ["namespaces"], "resourceNames": ["a"], "verbs": ["create"]},
                      {"apiGroups": [""], "resources": ["namespaces"], "resourceNames": ["a"], "verbs": ["patch"]}]}
    assert len(cluster_wide_writes([role])) == 2


# Subjects that include the reconciler's pods (its ServiceAccount, its username, the groups it is in).
RECONCILER_USER = f"system:serviceaccount:{NAMESPACE}:{RECONCILER_SA}"
RECONCILER_GROUPS = {"system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}", "system:authenticated"}
# Both kinds' jobs: the base's tfjobs and the overlays' engine's jobsets (k8s/components/jobset).
RECONCILER_MAY = {(group, plural, verb)
                  for group, plural in (("kubeflow.org", "tfjobs"), ("jobset.x-k8s.io", "jobsets"))
                  for verb in ("create", "get", "list")}


def _covers_reconciler(subject: dict[str, Any]) -> bool:
    if subject["kind"] == "ServiceAccount":
        return subject["name"] == RECONCILER_SA and subject.get("namespace") == NAMESPACE
    if subject["kind"] == "User":
        return subject["name"] == RECONCILER_USER
    return subject["kind"] == "Group" and subject["name"] in RECONCILER_GROUPS


def reconciler_permissions(objs: list[dict[str, Any]]) -> tuple[set[tuple[str, str, str]], list[str]]:
    """(apiGroup, resource, verb) the rendered RBAC gives the reconciler's pods, and what is wrong beyond that
    (a cluster-wide binding, resourceNames, a binding to a role that is not rendered)."""
    roles = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o
             for o in objs if o["kind"] in ("Role", "ClusterRole")}
    granted, problems = set(), []
    for b in objs:
        if b["kind"] not in ("RoleBinding", "ClusterRoleBinding") or not any(map(_covers_reconciler, b["subjects"])):
            continue
        where = f"{b['kind']}/{b['metadata']['name']}"
        if b["kind"] == "ClusterRoleBinding":
            problems.append(f"{where}: cluster-wide")
        ns = b["metadata"].get("namespace") if b["roleRef"]["kind"] == "Role" else None
        role = roles.get((b["roleRef"]["kind"], ns, b["roleRef"]["name"]))
        if role is None:
            problems.append(f"{where}: {b['roleRef']['kind']}/{b['roleRef']['name']} is not among the rendered objects")
            continue
        for rule in role.get("rules", []):
            if rule.get("resourceNames") or rule.get("nonResourceURLs"):
                problems.append(f"{where}: {rule}")
            granted |= {(g, r, v) for g in rule.get("apiGroups", []) for r in rule.get("resources", [])
                        for v in rule.get("verbs", [])}
    return granted, problems


@pytest.mark.parametrize("name", [*OVERLAYS, "prod+kueue"])
def test_reconciler_may_only_create_get_list_jobs(name: str, tmp_path: Path) -> None:
    objs = render_dir(_kueue_overlay(tmp_path)) if name == "prod+kueue" else render_overlay(name)
    granted, problems = reconciler_permissions(objs)
    assert problems == []
    assert granted == RECONCILER_MAY, granted - RECONCILER_MAY or RECONCILER_MAY - granted


def test_reconciler_rbac_check_catches_more() -> None:
    objs = render_overlay(OVERLAYS[0])
    wider = [*objs, {"kind": "ClusterRoleBinding", "metadata": {"name": "x"},
                     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                     "subjects": [{"kind": "Group", "name": f"system:serviceaccounts:{NAMESPACE}"}]}]
    assert reconciler_permissions(wider)[1]  # cluster-wide, and a role that is not rendered
    role = next(o for o in objs if o["kind"] == "Role" and o["metadata"]["name"] == RECONCILER_SA)
    role["rules"][0]["verbs"].append("patch")
    assert ("kubeflow.org", "tfjobs", "patch") in reconciler_permissions(objs)[0]
