"""The TFJob the submitter creates (landfall.submit.tfjob, the code behind `landfall render-tfjob`) fits the cluster
that k8s/ sets up: same namespace, an existing Workload Identity ServiceAccount, the common labels, and
RBAC that lets both releasers (the submit function and the reconciler) create exactly that kind of object."""

from __future__ import annotations

from typing import Any

import pytest

from .test_terraform import load_module
from .tools import (
    APP_LABELS,
    INFRA,
    NAMESPACE,
    OVERLAYS,
    RECONCILER_SA,
    SUBMITTER_SA,
    TRAINER_SA,
    find,
    render_overlay,
    unquote,
)


@pytest.fixture(scope="module")
def job() -> dict[str, Any]:
    from landfall.submit.config import JobConfig
    from landfall.submit.tfjob import render

    cfg = JobConfig(bucket="landfall-data", backend="kubernetes", trainer_image="trainer:test")
    return render(cfg, name="ds-0123456789", dataset="ds", request_id="req-1",
                  inputs_uri="gs://landfall-data/runs/ds-0123456789/inputs.json")


@pytest.mark.parametrize("env", OVERLAYS)
def test_namespace_agrees(env: str, job: dict[str, Any]) -> None:
    assert job["metadata"]["namespace"] == NAMESPACE
    find(render_overlay(env), "Namespace", job["metadata"]["namespace"])


@pytest.mark.parametrize("env", OVERLAYS)
def test_service_account_agrees(env: str, job: dict[str, Any]) -> None:
    pod = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    assert pod["serviceAccountName"] == TRAINER_SA
    sa = find(render_overlay(env), "ServiceAccount", pod["serviceAccountName"])
    assert sa["metadata"]["namespace"] == job["metadata"]["namespace"]
    assert sa["metadata"]["annotations"]["iam.gke.io/gcp-service-account"].startswith(f"{TRAINER_SA}@")


@pytest.mark.parametrize("env", OVERLAYS)
def test_labels_agree(env: str, job: dict[str, Any]) -> None:
    template_labels = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["metadata"]["labels"]
    for labels in (job["metadata"]["labels"], template_labels):
        assert APP_LABELS.items() <= labels.items()
    for obj in render_overlay(env):
        common = {k: v for k, v in obj["metadata"]["labels"].items() if k.startswith("app.kubernetes.io/")}
        assert {k: v for k, v in common.items() if k in APP_LABELS} == APP_LABELS


@pytest.mark.parametrize("env", OVERLAYS)
@pytest.mark.parametrize("releaser", [SUBMITTER_SA, RECONCILER_SA])
def test_releaser_roles_cover_the_job(env: str, releaser: str, job: dict[str, Any]) -> None:
    group = job["apiVersion"].split("/")[0]
    role = find(render_overlay(env), "Role", releaser)
    assert role["metadata"]["namespace"] == job["metadata"]["namespace"]
    # The overlays grant the JobSet engine's jobsets next to tfjobs (test_engines.py); the TFJob's is its own rule.
    (rule,) = [r for r in role["rules"] if group in r["apiGroups"]]
    assert rule["apiGroups"] == [group] and rule["resources"] == ["tfjobs"] and job["kind"] == "TFJob"
    assert "create" in rule["verbs"]
    # A job is created only when released: it never carries suspend (Kueue owns that field).
    assert "suspend" not in job["spec"]["runPolicy"]
    assert {"create", "get", "list"} <= set(rule["verbs"])


@pytest.mark.parametrize("env", OVERLAYS)
def test_gpu_job_fits_quota_and_nodes(env: str, job: dict[str, Any]) -> None:
    worker = job["spec"]["tfReplicaSpecs"]["Worker"]
    pod = worker["template"]["spec"]
    gpus = sum(int(c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0)) for c in pod["containers"])
    quota = find(render_overlay(env), "ResourceQuota", NAMESPACE)
    assert worker["replicas"] * gpus <= int(quota["spec"]["hard"]["requests.nvidia.com/gpu"])
    # The GPU pool is nvidia-l4 by default and GKE taints it nvidia.com/gpu: the job selects and tolerates it.
    gke = load_module(INFRA / "modules" / "gke")
    assert pod["nodeSelector"]["cloud.google.com/gke-accelerator"] == unquote(
        gke.variables["gpu_accelerator_type"]["default"]
    )
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]


def test_function_environment_defaults_agree(job: dict[str, Any]) -> None:
    variables = load_module(INFRA / "modules" / "functions").variables
    assert unquote(variables["namespace"]["default"]) == job["metadata"]["namespace"]
    pod = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    assert unquote(variables["trainer_service_account"]["default"]) == pod["serviceAccountName"]


@pytest.mark.parametrize("env", OVERLAYS)
def test_reconciler_agrees_with_the_render_config(env: str, job: dict[str, Any]) -> None:
    """The follow-up release loop works on the jobs the function renders: same namespace (JobConfig default),
    same trainer ServiceAccount setting, and an identity the RBAC lets read and create (release) them."""
    from landfall.submit.config import JobConfig

    defaults = JobConfig()
    objs = render_overlay(env)
    dep = find(objs, "Deployment", "landfall-reconciler")
    assert dep["metadata"]["namespace"] == defaults.namespace == job["metadata"]["namespace"]
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    cfg = JobConfig.load({e["name"]: e["value"] for e in c["env"] if e["name"].startswith("LANDFALL_")})
    assert cfg.namespace == defaults.namespace
    assert cfg.trainer_service_account == defaults.trainer_service_account == TRAINER_SA
    assert cfg.backend == "kubernetes"
    # It runs as its own ServiceAccount, which its RoleBinding grants what coalesce.reconcile uses.
    assert pod["serviceAccountName"] == RECONCILER_SA
    binding = find(objs, "RoleBinding", RECONCILER_SA)
    assert {"kind": "ServiceAccount", "name": RECONCILER_SA, "namespace": cfg.namespace} in binding["subjects"]
    from landfall.submit import engine

    rules = find(objs, "Role", binding["roleRef"]["name"])["rules"]
    # The kind it releases (the overlay's engine, jobset) and the TFJob rendered here (the base grants tfjobs).
    for plural in {engine.api(cfg.engine).plural, job["kind"].lower() + "s"}:
        (rule,) = [r for r in rules if plural in r["resources"]]
        assert {"get", "list", "create"} <= set(rule["verbs"]) and rule["resources"] == [plural]
