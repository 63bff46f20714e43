"""k8s/components/kueue-flex-start and kueue-spot, with the optional GPU pools of infra/modules/gke (#41).

Rendered the way an operator turns them on (components/kueue plus one or both, for either engine), every Kueue
object validates against Kueue's published CRDs (tests/infra/crds/kueue, strict, as test_kueue.py does); the pools
follow GKE's rules and the flavors match the pools, both as recorded with their sources in tests/infra/gke_capacity.py;
the queues fit their pools and, together, the namespace's ResourceQuota; and a job either engine renders is admitted
to the flavor and then tolerates every taint of its nodes."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from . import gke_capacity as rules
from .test_engines import KUEUE_DEFAULT, released_job, with_engine
from .test_kueue import CRD, GROUP, MACHINES, quantity, requests_of, schema_errors, tolerates
from .test_terraform import load_module
from .tools import (
    INFRA,
    K8S,
    NAMESPACE,
    OVERLAYS,
    RECONCILER_SA,
    SUBMITTER_SA,
    blocks,
    find,
    first,
    load_hcl,
    render_dir,
    render_overlay,
    run,
    tool,
    unquote,
)

FLEX, SPOT = "kueue-flex-start", "kueue-spot"
COMBOS = {"flex": (FLEX,), "spot": (SPOT,), "both": (FLEX, SPOT)}
# component -> (LocalQueue = ClusterQueue = ResourceFlavor name, the Terraform pool, its max-nodes variable)
QUEUES = {FLEX: ("landfall-gpu-flex", "gpu_flex_start", "gpu_flex_start_max_nodes"),
          SPOT: ("landfall-gpu-spot", "gpu_spot", "gpu_spot_pool_max_nodes")}
NEW_KINDS = {"AdmissionCheck", "ProvisioningRequestConfig"}


# --- rendering ---------------------------------------------------------------------------------------------------
def with_components(tmp: Path, engine: str, components: tuple[str, ...]) -> Path:
    """k8s/ with overlays/prod as k8s/README.md says: components/kueue uncommented, then the capacity components."""
    k8s = with_engine(tmp, engine, kueue=True)
    path = k8s / "overlays" / "prod" / "kustomization.yaml"
    doc = yaml.safe_load(path.read_text())
    assert "../../components/kueue" in doc["components"]
    doc["components"] += [f"../../components/{c}" for c in components]
    path.write_text(yaml.safe_dump(doc))
    return k8s / "overlays" / "prod"


@pytest.fixture(scope="module", params=[(e, c) for e in ("tfjob", "jobset") for c in COMBOS],
                ids=lambda p: f"{p[0]}-{p[1]}")
def rendered(request, tmp_path_factory) -> tuple[str, tuple[str, ...], list[dict[str, Any]]]:
    engine, combo = request.param
    objs = render_dir(with_components(tmp_path_factory.mktemp(f"{engine}-{combo}"), engine, COMBOS[combo]))
    return engine, COMBOS[combo], objs


def kueue_objects(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if o["apiVersion"].split("/")[0] == GROUP]


# --- Terraform ---------------------------------------------------------------------------------------------------
def pools(main: Path = INFRA / "modules" / "gke" / "main.tf") -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for block in blocks(load_hcl(main), "resource"):
        for kind, named in block.items():
            if kind.strip('"') == "google_container_node_pool":
                out |= {name.strip('"'): body for name, body in named.items()}
    return out


def attr(body: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = body
    for key in path:
        value = first(value)
        if not isinstance(value, dict) or key not in value:
            return KeyError
        value = value[key]
    return unquote(value)


def queued_pool_problems(body: dict[str, Any]) -> list[str]:
    """Where a node pool departs from GKE's rules for queued provisioning (gke_capacity.QUEUED_POOL)."""
    found = [f"{'.'.join(p)} must be {v!r}, is {attr(body, p)!r}" for p, v in rules.QUEUED_POOL.items()
             if attr(body, p) != v]
    found += [f"{k} must not be set" for k in rules.QUEUED_POOL_FORBIDDEN if k in body]
    return found


def pool_name(body: dict[str, Any], accelerator: str) -> str:
    """The pool's name as Terraform evaluates it for this accelerator (the only interpolation it uses)."""
    expr = unquote(body["name"])
    template = '${replace(var.gpu_accelerator_type, "nvidia-", "")}'
    assert template in expr, expr
    return expr.replace(template, accelerator.removeprefix("nvidia-"))


def node_taints(body: dict[str, Any]) -> set[rules.Taint]:
    """Every taint of the pool's nodes: the ones Terraform declares and the ones GKE adds itself."""
    node_config = first(body["node_config"])
    taints = {(unquote(t["key"]), unquote(t["value"]), rules.TERRAFORM_EFFECT[unquote(t["effect"])])
              for t in map(first, node_config.get("taint", []))}
    if node_config.get("guest_accelerator"):
        taints.add(rules.GPU_TAINT)
    if attr(body, ("queued_provisioning", "enabled")) is True:
        taints.add(rules.QUEUED_TAINT)
    return taints


def node_labels(body: dict[str, Any], accelerator: str) -> dict[str, str]:
    """The labels GKE puts on the pool's nodes that a flavor may select."""
    labels = {rules.NODEPOOL_LABEL: pool_name(body, accelerator),
              "cloud.google.com/gke-accelerator": accelerator}
    if attr(first(body["node_config"]), ("spot",)) is True:
        labels[rules.SPOT_LABEL[0]] = rules.SPOT_LABEL[1]
    return labels


def prod_default(name: str) -> Any:
    return unquote(load_module(INFRA / "envs" / "prod" / "platform").variables[name]["default"])


# --- tests: infra ------------------------------------------------------------------------------------------------
def test_the_pools_are_optional_and_off_by_default() -> None:
    for root in ("dev", "prod"):
        variables = load_module(INFRA / "envs" / root / "platform").variables
        for flag in ("gpu_flex_start_pool", "gpu_spot_pool"):
            assert unquote(variables[flag]["default"]) is False, (root, flag)
    found = pools()
    for name, flag in (("gpu_flex_start", "gpu_flex_start_pool"), ("gpu_spot", "gpu_spot_pool")):
        assert unquote(found[name]["count"]) == f"${{var.{flag} ? 1 : 0}}", name
    # Turned on from the roots through modules/platform to modules/gke.
    for mod, call in ((INFRA / "modules" / "platform", "gke"), (INFRA / "envs" / "prod" / "platform", "platform")):
        args = load_module(mod).modules[call]
        for flag in ("gpu_flex_start_pool", "gpu_flex_start_max_nodes", "gpu_spot_pool", "gpu_spot_pool_max_nodes"):
            assert unquote(args[flag]) == f"${{var.{flag}}}", (mod, flag)


def test_the_flex_start_pool_follows_gkes_queued_provisioning_rules() -> None:
    body = pools()["gpu_flex_start"]
    assert queued_pool_problems(body) == [], rules.QUEUED_POOL_RULE
    # The same GPUs and machine as the on-demand pool, so the same workers fit.
    main = first(pools()["gpu"]["node_config"])
    flex = first(body["node_config"])
    assert flex["guest_accelerator"] == main["guest_accelerator"] and flex["machine_type"] == main["machine_type"]
    assert unquote(first(body["autoscaling"])["total_max_node_count"]) == "${var.gpu_flex_start_max_nodes}"
    assert not flex.get("spot") and not flex.get("taint")


def test_the_queued_pool_check_catches_departures() -> None:
    body = pools()["gpu_flex_start"]
    for path in rules.QUEUED_POOL:
        broken = copy.deepcopy(body)
        target = broken
        for key in path[:-1]:
            target = first(target[key])
        del target[path[-1]]
        assert any(".".join(path) in p for p in queued_pool_problems(broken)), path
    fixed = {**copy.deepcopy(body), "node_count": 2}
    assert queued_pool_problems(fixed) == ["node_count must not be set"]
    on_demand = pools()["gpu"]
    assert len(queued_pool_problems(on_demand)) >= 4  # the on-demand pool is none of these


def test_the_spot_pool_is_spot_and_tainted() -> None:
    body = pools()["gpu_spot"]
    node_config = first(body["node_config"])
    assert unquote(node_config["spot"]) is True
    assert node_taints(body) == {rules.SPOT_TAINT, rules.GPU_TAINT}, rules.SPOT_RULE
    assert attr(body, ("autoscaling", "total_min_node_count")) == 0
    assert unquote(first(body["autoscaling"])["total_max_node_count"]) == "${var.gpu_spot_pool_max_nodes}"
    assert first(pools()["gpu"]["node_config"])["guest_accelerator"] == node_config["guest_accelerator"]


# --- tests: k8s --------------------------------------------------------------------------------------------------
def test_the_components_are_optional() -> None:
    for component in (FLEX, SPOT):
        doc = yaml.safe_load((K8S / "components" / component / "kustomization.yaml").read_text())
        assert doc["kind"] == "Component" and doc["apiVersion"] == "kustomize.config.k8s.io/v1alpha1"
    for env in OVERLAYS:
        objs = render_overlay(env)
        assert not kueue_objects(objs), env
        assert find(objs, "ResourceQuota", NAMESPACE)["spec"]["hard"]["requests.nvidia.com/gpu"] == "8"


def test_every_kueue_object_validates_against_its_crd(rendered) -> None:
    _, components, objs = rendered
    kinds = {o["kind"] for o in kueue_objects(objs)}
    assert kinds == {"ResourceFlavor", "ClusterQueue", "LocalQueue"} | (NEW_KINDS if FLEX in components else set())
    for obj in kueue_objects(objs):
        errors = schema_errors(obj)
        assert not errors, f"{obj['kind']}/{obj['metadata']['name']}:\n" + "\n".join(errors)
        namespaced = CRD[obj["kind"]]["spec"]["scope"] == "Namespaced"
        assert ("namespace" in obj["metadata"]) == namespaced
    for component in components:
        name = QUEUES[component][0]
        lq = find(objs, "LocalQueue", name)
        assert lq["metadata"]["namespace"] == NAMESPACE and lq["spec"]["clusterQueue"] == name
        cq = find(objs, "ClusterQueue", name)
        assert cq["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}}
        ((flavor,),) = [g["flavors"] for g in cq["spec"]["resourceGroups"]]
        assert flavor["name"] == name and find(objs, "ResourceFlavor", name)


def test_the_schema_check_catches_mistakes_in_the_new_kinds(tmp_path: Path) -> None:
    objs = render_dir(with_components(tmp_path, "jobset", (FLEX,)))
    prc = find(objs, "ProvisioningRequestConfig", "landfall-flex-start")
    check = find(objs, "AdmissionCheck", "landfall-flex-start")
    cq = find(objs, "ClusterQueue", "landfall-gpu-flex")
    assert not schema_errors(prc) and not schema_errors(check) and not schema_errors(cq)
    typo = copy.deepcopy(prc)
    typo["spec"]["retryStrategy"]["backoffLimit"] = typo["spec"]["retryStrategy"].pop("backoffLimitCount")
    assert schema_errors(typo)
    no_class = copy.deepcopy(prc)
    del no_class["spec"]["provisioningClassName"]
    assert schema_errors(no_class)
    no_controller = copy.deepcopy(check)
    del no_controller["spec"]["controllerName"]
    assert schema_errors(no_controller)
    # v1beta1's spec.admissionChecks list is gone from v1beta2: only admissionChecksStrategy.
    old = copy.deepcopy(cq)
    old["spec"]["admissionChecks"] = [old["spec"].pop("admissionChecksStrategy")["admissionChecks"][0]["name"]]
    assert schema_errors(old)
    assert schema_errors({**prc, "apiVersion": f"{GROUP}/v1beta1"})  # no longer served


def test_flex_start_wires_the_provisioning_admission_check(rendered) -> None:
    _, components, objs = rendered
    if FLEX not in components:
        assert not [o for o in objs if o["kind"] in NEW_KINDS]
        return
    cq = find(objs, "ClusterQueue", "landfall-gpu-flex")
    (strategy,) = cq["spec"]["admissionChecksStrategy"]["admissionChecks"]
    assert strategy["onFlavors"] == ["landfall-gpu-flex"]
    check = find(objs, "AdmissionCheck", strategy["name"])
    assert check["spec"]["controllerName"] == rules.PROVISIONING_CONTROLLER, rules.PROVISIONING_RULE
    params = check["spec"]["parameters"]
    assert (params["apiGroup"], params["kind"]) == (GROUP, "ProvisioningRequestConfig")
    prc = find(objs, "ProvisioningRequestConfig", params["name"])["spec"]
    assert prc["provisioningClassName"] == rules.QUEUED_CLASS, rules.QUEUED_CLASS_RULE
    assert prc["managedResources"] == ["nvidia.com/gpu"]
    retry = prc["retryStrategy"]
    assert set(retry) == {"backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds"}
    # Kueue's own defaults (the CRD) are 3 retries from a 60 s base: this one waits longer and gives up later.
    defaults = first([v for v in CRD["ProvisioningRequestConfig"]["spec"]["versions"] if v["name"] == "v1beta2"])
    props = defaults["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["retryStrategy"]["properties"]
    assert "b*2^(n-1)" in props["backoffLimitCount"]["description"]  # the formula the comments quote
    assert retry["backoffLimitCount"] > props["backoffLimitCount"]["default"]
    assert retry["backoffBaseSeconds"] > props["backoffBaseSeconds"]["default"]
    delays = [min(retry["backoffBaseSeconds"] * 2 ** (n - 1), retry["backoffMaxSeconds"])
              for n in range(1, retry["backoffLimitCount"] + 1)]
    assert delays == [120, 240, 480, 960, 1800]  # about an hour of back-off in all (k8s/README.md)


def test_flavors_select_their_pool_and_admitted_workers_tolerate_every_taint(rendered) -> None:
    """Kueue admits a worker to the flavor only if, per taint of the flavor, the worker or the flavor tolerates it;
    once admitted the worker carries the flavor's tolerations and nodeLabels, and must then schedule on the pool."""
    engine, components, objs = rendered
    for phrase in rules.FLAVOR_TAINT_PHRASES:  # the rule as the CRD states it (gke_capacity.FLAVOR_RULE)
        version = first([v for v in CRD["ResourceFlavor"]["spec"]["versions"] if v["name"] == "v1beta2"])
        spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        assert phrase in spec["nodeTaints"]["description"]
        assert rules.FLAVOR_TOLERATION_PHRASE in spec["tolerations"]["description"]
    accelerator = prod_default("gpu_accelerator_type")
    for component in components:
        name, pool, _ = QUEUES[component]
        body = pools()[pool]
        flavor = find(objs, "ResourceFlavor", name)["spec"]
        job = released_job(objs, queue_name=name)
        assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == name
        if job["kind"] == "JobSet":
            pod_specs = [rj["template"]["spec"]["template"]["spec"] for rj in job["spec"]["replicatedJobs"]]
        else:
            pod_specs = [rs["template"]["spec"] for rs in job["spec"]["tfReplicaSpecs"].values()]
        taints = node_taints(body)
        declared = {(t["key"], t.get("value", ""), t["effect"]) for t in flavor["nodeTaints"]}
        assert declared == taints, (component, rules.GPU_TAINT_RULE, rules.QUEUED_TAINT_RULE, rules.SPOT_RULE)
        labels = node_labels(body, accelerator)
        assert flavor["nodeLabels"].items() <= labels.items(), (component, rules.NODEPOOL_LABEL_RULE)
        if component == FLEX:  # pinned to the queued pool by name: never the on-demand pool of the same GPU
            assert flavor["nodeLabels"][rules.NODEPOOL_LABEL] == pool_name(body, accelerator)
        else:
            assert flavor["nodeLabels"][rules.SPOT_LABEL[0]] == rules.SPOT_LABEL[1]
        for pod in pod_specs:
            for t in flavor["nodeTaints"]:  # admission (FLAVOR_RULE)
                assert tolerates(pod.get("tolerations", []), t) or tolerates(flavor["tolerations"], t), (engine, t)
            # The pod's own selector agrees with the flavor's labels (else Kueue skips the flavor).
            for key, value in pod.get("nodeSelector", {}).items():
                assert flavor["nodeLabels"].get(key, value) == value, (engine, key)
            admitted = [*pod.get("tolerations", []), *flavor["tolerations"]]
            selector = {**pod.get("nodeSelector", {}), **flavor["nodeLabels"]}
            for key, value, effect in taints:  # scheduling on the pool's nodes
                assert tolerates(admitted, {"key": key, "value": value, "effect": effect}), (engine, key)
            assert selector.items() <= labels.items(), engine
            # ... and not on the on-demand pool, whose nodes lack the flavor's labels.
            assert not selector.items() <= node_labels(pools()["gpu"], accelerator).items()


def test_the_tolerance_check_catches_a_missing_toleration(rendered) -> None:
    _, components, objs = rendered
    for component in components:
        flavor = find(objs, "ResourceFlavor", QUEUES[component][0])["spec"]
        worker_tolerations = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        extra = rules.QUEUED_TAINT if component == FLEX else rules.SPOT_TAINT
        taint = {"key": extra[0], "value": extra[1], "effect": extra[2]}
        assert not tolerates(worker_tolerations, taint)  # the workers alone would stay Pending
        assert tolerates(flavor["tolerations"], taint)
        without = [t for t in flavor["tolerations"] if t["key"] != extra[0]]
        assert not tolerates(without, taint)


def test_the_queues_fit_their_pools_the_job_and_together_the_namespace_quota(rendered) -> None:
    _, components, objs = rendered
    hard = find(objs, "ResourceQuota", NAMESPACE)["spec"]["hard"]
    total: dict[str, Any] = {}
    for cq in (o for o in objs if o["kind"] == "ClusterQueue"):
        for group in cq["spec"]["resourceGroups"]:
            for flavor in group["flavors"]:
                for r in flavor["resources"]:
                    total[r["name"]] = total.get(r["name"], 0) + quantity(r["nominalQuota"])
    for name, value in total.items():  # Kueue never admits what the ResourceQuota would refuse
        assert value <= quantity(hard[f"requests.{name}"]), (components, name)
    machine = MACHINES[prod_default("gpu_machine_type")]
    gpus_per_node = int(prod_default("gpu_accelerator_count"))
    for component in components:
        name, _, max_var = QUEUES[component]
        nodes = int(prod_default(max_var))
        (group,) = find(objs, "ClusterQueue", name)["spec"]["resourceGroups"]
        quota = {r["name"]: quantity(r["nominalQuota"]) for r in group["flavors"][0]["resources"]}
        assert quota["nvidia.com/gpu"] == nodes * gpus_per_node, component  # what the pool holds at most
        assert quota["cpu"] <= nodes * machine[0] and quota["memory"] <= nodes * quantity(machine[1])
        job = released_job(objs, queue_name=name)
        if job["kind"] == "JobSet":
            pods = [(rj["template"]["spec"]["template"]["spec"], rj["replicas"] * rj["template"]["spec"]["parallelism"])
                    for rj in job["spec"]["replicatedJobs"]]
        else:
            pods = [(rs["template"]["spec"], rs["replicas"]) for rs in job["spec"]["tfReplicaSpecs"].values()]
        for res, value in quota.items():  # the default job is admissible (Kueue admits it whole)
            assert sum(requests_of(pod).get(res, 0) * n for pod, n in pods) <= value, (component, res)


def test_both_components_set_the_same_namespace_ceiling() -> None:
    """Listing one, the other or both gives the same ResourceQuota: the patches are identical."""
    patches = []
    for component in (FLEX, SPOT):
        doc = yaml.safe_load((K8S / "components" / component / "kustomization.yaml").read_text())
        (quota,) = [p for p in doc["patches"] if p["target"]["kind"] == "ResourceQuota"]
        patches.append(quota)
    assert patches[0] == patches[1]


def test_the_engines_kueue_queues_by_default() -> None:
    """Only a queued job gets a Workload, and so a ProvisioningRequest or a Spot flavor: JobSets with Kueue's shipped
    configuration, TFJobs only with k8s/kueue-config (gke_capacity.ENGINE_RULE)."""
    shipped = yaml.safe_load(KUEUE_DEFAULT.read_text())["integrations"]["frameworks"]
    ours = yaml.safe_load((K8S / "kueue-config" / "controller_manager_config.yaml").read_text())
    assert rules.ENGINE_FRAMEWORK["jobset"] in shipped and rules.ENGINE_FRAMEWORK["tfjob"] not in shipped
    assert {rules.ENGINE_FRAMEWORK["jobset"], rules.ENGINE_FRAMEWORK["tfjob"]} <= set(
        ours["integrations"]["frameworks"])


def test_the_deployer_may_reapply_exactly_the_new_objects(rendered, tmp_path: Path) -> None:
    engine, _, objs = rendered
    plain = render_dir(with_components(tmp_path, engine, ()))  # components/kueue alone
    for kind in ("ClusterRole", "Role"):
        before = find(plain, kind, "landfall-deployer")["rules"]
        after = find(objs, kind, "landfall-deployer")["rules"]
        assert after[: len(before)] == before
        for rule in after[len(before):]:
            assert rule["apiGroups"] == [GROUP] and set(rule["verbs"]) <= {"get", "patch", "create"}, rule
            if kind == "ClusterRole":
                assert "create" not in rule["verbs"] and rule["resourceNames"], rule
    cluster_rules = find(objs, "ClusterRole", "landfall-deployer")["rules"]
    for obj in kueue_objects(objs):
        plural = obj["kind"].lower() + "s"
        rules_ = cluster_rules if "namespace" not in obj["metadata"] else find(objs, "Role", "landfall-deployer")[
            "rules"]
        for verb in ("get", "patch"):
            assert any(plural in r["resources"] and verb in r["verbs"]
                       and obj["metadata"]["name"] in r.get("resourceNames", []) for r in rules_), (obj["kind"], verb)
    for releaser in (SUBMITTER_SA, RECONCILER_SA):
        assert find(objs, "Role", releaser) == find(plain, "Role", releaser)


def test_everything_else_still_validates_strictly(tmp_path: Path) -> None:
    objs = render_dir(with_components(tmp_path, "jobset", (FLEX, SPOT)))
    path = tmp_path / "prod-capacity.yaml"
    path.write_text(yaml.safe_dump_all([o for o in objs if not o["apiVersion"].startswith(f"{GROUP}/")]))
    proc = run([tool("kubernetes-validate"), "--strict", "--quiet", "-k", "1.32.0", str(path)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
