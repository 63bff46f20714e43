"""k8s/components/kueue: the optional Kueue queueing for TFJobs. Rendered the way an operator enables it (the
commented `components/kueue` line of overlays/prod uncommented), every Kueue object validates against the
openAPIV3Schema of its version in Kueue's published CRDs (tests/infra/crds/kueue, unknown fields rejected as
`kubectl apply`'s strict field validation does), and the queue fits the TFJobs Landfall renders, the GPU pool
Terraform creates and the namespace's ResourceQuota."""

from __future__ import annotations

import copy
import dataclasses
import re
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from .test_terraform import load_module
from .tools import (
    APP_LABELS,
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
    strict,
    tool,
    unquote,
)

CRDS = Path(__file__).parent / "crds" / "kueue"
COMPONENT = K8S / "components" / "kueue"
GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"  # the storage version; v1beta1 is deprecated at v0.19.2, and no longer served from Kueue v0.20
KINDS = {"ResourceFlavor", "ClusterQueue", "LocalQueue"}  # what components/kueue adds
# ... and what the capacity components add (tests/infra/test_kueue_capacity.py): every kind Landfall ships.
CRD_KINDS = KINDS | {"AdmissionCheck", "ProvisioningRequestConfig"}
QUEUE = "landfall-gpu"  # the LocalQueue LANDFALL_QUEUE_NAME must name
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
COMMENTED = ("#   - ../../components/kueue\n",)  # under overlays/prod's components: (which lists the engine)
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# Node shapes of the GPU pools infra/ may create: (vCPU, memory) per node.
MACHINES = {"g2-standard-4": (4, "16Gi"), "g2-standard-8": (8, "32Gi"), "g2-standard-12": (12, "48Gi")}


# --- rendering ----------------------------------------------------------------------------------------
def enable_in_prod(k8s: Path) -> None:
    """What k8s/README.md tells the operator to do: uncomment the Kueue line in overlays/prod."""
    path = k8s / "overlays" / "prod" / "kustomization.yaml"
    text = path.read_text()
    for line in COMMENTED:
        assert line in text, f"overlays/prod lost its commented line {line.strip()!r}"
        text = text.replace(line, line[2:], 1)
    path.write_text(text)


@pytest.fixture(scope="module")
def objs(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    k8s = tmp_path_factory.mktemp("kueue") / "k8s"
    shutil.copytree(K8S, k8s)
    enable_in_prod(k8s)
    return render_dir(k8s / "overlays" / "prod")


def kueue_objects(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if o["apiVersion"].split("/")[0] == GROUP]


# --- the CRDs -----------------------------------------------------------------------------------------
def load_crds() -> dict[str, dict[str, Any]]:
    crds = {}
    for path in sorted(CRDS.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                assert doc["spec"]["group"] == GROUP
                crds[doc["spec"]["names"]["kind"]] = doc
    return crds


CRD = load_crds()


def served(kind: str, version: str) -> bool:
    """Whether Kueue's CRD serves ``version`` of ``kind`` and does not deprecate it: the API server refuses an unserved
    one, and a deprecated one is what the next release stops serving (v1beta1, from v0.20: kueue #14558)."""
    return any(v["name"] == version and v["served"] and not v.get("deprecated") for v in CRD[kind]["spec"]["versions"])


def validator(kind: str, version: str = VERSION) -> jsonschema.protocols.Validator:
    """The schema of ``version`` as the CRD publishes it, served or not."""
    crd = CRD[kind]
    (ver,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema = python_patterns(strict(copy.deepcopy(ver["schema"]["openAPIV3Schema"])))
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    cls.check_schema(schema)
    return cls(schema)


def python_patterns(schema: Any) -> Any:
    """The API server evaluates `pattern` with Go's RE2, which takes a flag group anywhere (the AdmissionCheck CRD's
    ``^(?i)[a-z]...``); Python's re wants global flags first: the same expression, written Python's way."""
    if isinstance(schema, list):
        return [python_patterns(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: python_patterns(v) for k, v in schema.items()}
    if isinstance(out.get("pattern"), str) and (m := re.match(r"\^(\(\?[a-z]+\))", out["pattern"])):
        out["pattern"] = m.group(1) + "^" + out["pattern"][m.end():]
    return out


def schema_errors(obj: dict[str, Any]) -> list[str]:
    group, version = obj["apiVersion"].split("/")
    assert group == GROUP, obj["apiVersion"]
    if not served(obj["kind"], version):
        return [f"<root>: {obj['apiVersion']} {obj['kind']} is not served by Kueue's CRD"]
    errors = [
        f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in validator(obj["kind"], version).iter_errors(obj)
    ]
    return errors + cel_errors(obj)


def cel_errors(obj: dict[str, Any]) -> list[str]:
    """The x-kubernetes-validations (CEL) rules of these CRDs that jsonschema cannot evaluate, and Kueue's
    webhook rule that a flavor lists the covered resources in their order."""
    spec, errors = obj.get("spec", {}), []
    if obj["kind"] == "ClusterQueue":
        for group in spec.get("resourceGroups", []):
            for flavor in group["flavors"]:
                if [r["name"] for r in flavor["resources"]] != group["coveredResources"]:
                    errors.append(f"flavor {flavor['name']}: resources must be the coveredResources, in order")
                if "cohortName" not in spec and any("borrowingLimit" in r for r in flavor["resources"]):
                    errors.append("borrowingLimit must be nil when cohort is empty")
    if obj["kind"] == "ResourceFlavor":
        effects = {"NoSchedule", "PreferNoSchedule", "NoExecute"}
        for taint in spec.get("nodeTaints", []):
            if taint["effect"] not in effects:
                errors.append(f"nodeTaints: unsupported effect {taint['effect']}")
        for tol in spec.get("tolerations", []):
            if "key" not in tol and tol.get("operator") != "Exists":
                errors.append("tolerations: operator must be Exists when 'key' is empty")
            if tol.get("operator", "Equal") not in ("Equal", "Exists"):
                errors.append(f"tolerations: unsupported operator {tol['operator']}")
            if tol.get("operator") == "Exists" and "value" in tol:
                errors.append("tolerations: a value must be empty when 'operator' is 'Exists'")
            if "effect" in tol and tol["effect"] not in effects:
                errors.append(f"tolerations: unsupported effect {tol['effect']}")
            if "tolerationSeconds" in tol and tol.get("effect") != "NoExecute":
                errors.append("tolerations: effect must be 'NoExecute' when 'tolerationSeconds' is set")
    return errors


# --- quantities ---------------------------------------------------------------------------------------
SUFFIX = {"": 1, "m": Decimal("0.001"), "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
          "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity(value: str | int) -> Decimal:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([a-zA-Z]*)", str(value))
    assert m and m.group(2) in SUFFIX, f"unparsed quantity {value!r}"
    return Decimal(m.group(1)) * SUFFIX[m.group(2)]


# --- the rendered TFJob -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def worker() -> dict[str, Any]:
    """The worker pod spec of the TFJob the submit stage renders with its defaults, and the worker count."""
    from landfall.submit.config import JobConfig
    from landfall.submit.tfjob import render

    cfg = JobConfig(bucket="landfall-data", backend="kubernetes", trainer_image="trainer:test")
    job = render(cfg, name="ds-0123456789", dataset="ds", request_id="req-1",
                 inputs_uri="gs://landfall-data/runs/ds-0123456789/inputs.json")
    spec = job["spec"]["tfReplicaSpecs"]["Worker"]
    return {"pod": spec["template"]["spec"], "replicas": spec["replicas"]}


def requests_of(pod: dict[str, Any]) -> dict[str, Decimal]:
    """What Kueue counts for one pod: requests, limits standing in for missing requests."""
    total: dict[str, Decimal] = {}
    for c in pod["containers"]:
        res = {**c["resources"].get("limits", {}), **c["resources"].get("requests", {})}
        for name, value in res.items():
            total[name] = total.get(name, Decimal(0)) + quantity(value)
    return total


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for tol in tolerations:
        if tol.get("effect") not in (None, "", taint["effect"]):
            continue
        if tol.get("operator") == "Exists" and tol.get("key") in (None, "", taint["key"]):
            return True
        if tol.get("key") == taint["key"] and tol.get("value", "") == taint.get("value", ""):
            return True
    return False


# --- tests --------------------------------------------------------------------------------------------
def test_the_crds_are_kueues_and_serve_the_version() -> None:
    assert set(CRD) == CRD_KINDS
    for kind, crd in CRD.items():
        versions = {v["name"]: v for v in crd["spec"]["versions"]}
        assert versions[VERSION]["served"] and versions[VERSION]["storage"], kind
        # Kueue v0.19.2's CRDs (tests/infra/crds/README.md): v1beta1 still served, deprecated, not stored.
        assert versions["v1beta1"]["deprecated"] and not versions["v1beta1"]["storage"], kind
        assert {name for name in versions if served(kind, name)} == {VERSION}, kind
    assert CRD["LocalQueue"]["spec"]["scope"] == "Namespaced"
    assert CRD["ClusterQueue"]["spec"]["scope"] == CRD["ResourceFlavor"]["spec"]["scope"] == "Cluster"
    assert CRD["AdmissionCheck"]["spec"]["scope"] == CRD["ProvisioningRequestConfig"]["spec"]["scope"] == "Cluster"


def unserved_uses(files: list[Path], root: Path) -> set[tuple[str, str]]:
    """(file, version) for every file that would apply or render a Kueue object of a version the CRDs do not
    serve: an ``apiVersion:`` line or a quoted ``kueue.x-k8s.io/<version>``. Prose naming the version is fine."""
    out = set()
    for f in files:
        text = f.read_text(errors="replace")
        for v in set(re.findall(rf"{re.escape(GROUP)}/(v1\w+)", text)):
            used = re.search(rf"""(apiVersion:\s*["']?|["']){re.escape(GROUP)}/{v}\b""", text)
            if used and not all(served(kind, v) for kind in CRD_KINDS):
                out.add((str(f.relative_to(root)), v))
    return out


def test_nothing_landfall_ships_names_a_deprecated_or_unserved_kueue_version(tmp_path: Path) -> None:
    """Kueue deprecates kueue.x-k8s.io/v1beta1 and v0.20 refuses it: no manifest, rendering code or documented example
    may use it (the queue label kueue.x-k8s.io/queue-name is a label, not an API version)."""
    root = K8S.parent
    files = [p for d in ("k8s", "functions", "infra", "docs", "trainer", "bench") for p in (root / d).rglob("*")
             if p.suffix in {".yaml", ".yml", ".py", ".tf", ".md", ".json"} and p.is_file()]
    files.append(root / "README.md")
    assert COMPONENT / "clusterqueue.yaml" in files
    assert unserved_uses(files, root) == set()
    # The check sees an old manifest or a rendered dict, and lets prose and the served version pass.
    old = tmp_path / "old.yaml"
    old.write_text(f"apiVersion: {GROUP}/v1beta1\nkind: LocalQueue\n")
    code = tmp_path / "render.py"
    code.write_text(f'obj = {{"apiVersion": "{GROUP}/v1beta1"}}\n')
    prose = tmp_path / "notes.md"
    prose.write_text(f"Kueue v0.20 no longer serves `{GROUP}/v1beta1`; use apiVersion: {GROUP}/{VERSION}.\n")
    assert unserved_uses([old, code, prose], tmp_path) == {("old.yaml", "v1beta1"), ("render.py", "v1beta1")}


def test_the_component_is_optional() -> None:
    """Opt-in: no overlay applies Kueue objects by default (Cloud Build re-applies the overlays, and a cluster
    without Kueue would reject them), prod carries the lines to uncomment."""
    component = yaml.safe_load((COMPONENT / "kustomization.yaml").read_text())
    assert component["kind"] == "Component" and component["apiVersion"] == "kustomize.config.k8s.io/v1alpha1"
    for env in OVERLAYS:
        assert not kueue_objects(render_overlay(env)), env
    text = (K8S / "overlays" / "prod" / "kustomization.yaml").read_text()
    assert all(line in text for line in COMMENTED)


def test_every_kueue_object_validates_against_its_crd(objs: list[dict[str, Any]]) -> None:
    kueue = kueue_objects(objs)
    assert sorted(o["kind"] for o in kueue) == sorted(KINDS)
    for obj in kueue:
        assert obj["apiVersion"] == f"{GROUP}/{VERSION}"
        errors = schema_errors(obj)
        assert not errors, f"{obj['kind']}/{obj['metadata']['name']}:\n" + "\n".join(errors)
        name = obj["metadata"]["name"]
        assert set(obj["metadata"]) <= {"name", "namespace", "labels", "annotations"}, obj["metadata"]
        assert len(name) <= 253 and DNS1123_SUBDOMAIN.match(name), name
        namespaced = CRD[obj["kind"]]["spec"]["scope"] == "Namespaced"
        assert ("namespace" in obj["metadata"]) == namespaced, f"{obj['kind']}/{name}"
        assert APP_LABELS.items() <= obj["metadata"]["labels"].items()


def test_the_schema_check_catches_mistakes(objs: list[dict[str, Any]]) -> None:
    cq = copy.deepcopy(find(objs, "ClusterQueue", QUEUE))
    assert not schema_errors(cq)
    typo = copy.deepcopy(cq)
    typo["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalquota"] = "1"
    assert schema_errors(typo)  # unknown field, and nominalQuota missing
    old = copy.deepcopy(cq)
    old["spec"]["cohort"] = "landfall"  # v1beta1's name; v1beta2 calls it cohortName
    assert schema_errors(old)
    as_v1beta1 = {**old, "apiVersion": f"{GROUP}/v1beta1"}
    # v1beta1's own schema has `cohort`, but Kueue v0.20 no longer serves v1beta1 (kueue #14558): refused whole.
    assert not [e for e in validator("ClusterQueue", "v1beta1").iter_errors(as_v1beta1) if "cohort" in e.message]
    assert schema_errors(as_v1beta1) == [f"<root>: {GROUP}/v1beta1 ClusterQueue is not served by Kueue's CRD"]
    bad_enum = copy.deepcopy(cq)
    bad_enum["spec"]["queueingStrategy"] = "FIFO"
    assert schema_errors(bad_enum)
    uneven = copy.deepcopy(cq)
    uneven["spec"]["resourceGroups"][0]["flavors"][0]["resources"].pop()
    assert schema_errors(uneven)
    borrow = copy.deepcopy(cq)
    borrow["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = "1"
    assert schema_errors(borrow)
    lq = copy.deepcopy(find(objs, "LocalQueue", QUEUE))
    lq["spec"]["clusterQueue"] = "Landfall_GPU"
    assert schema_errors(lq)
    rf = copy.deepcopy(find(objs, "ResourceFlavor", flavor_name(objs)))
    rf["spec"]["tolerations"][0]["value"] = "present"  # with operator Exists
    assert schema_errors(rf)


def flavor_name(objs: list[dict[str, Any]]) -> str:
    (rf,) = [o for o in objs if o["kind"] == "ResourceFlavor"]
    return rf["metadata"]["name"]


def test_local_queue_is_in_the_training_namespace_and_its_cluster_queue_exists(objs: list[dict[str, Any]]) -> None:
    (lq,) = [o for o in objs if o["kind"] == "LocalQueue"]
    assert lq["metadata"]["name"] == QUEUE
    assert lq["metadata"]["namespace"] == NAMESPACE
    find(objs, "Namespace", NAMESPACE)
    cq = find(objs, "ClusterQueue", lq["spec"]["clusterQueue"])
    # The namespace may use the ClusterQueue (the API server labels every namespace with its name), others not.
    ns = find(objs, "Namespace", NAMESPACE)
    selector = cq["spec"]["namespaceSelector"]
    assert set(selector) == {"matchLabels"}
    labels = {**ns["metadata"].get("labels", {}), "kubernetes.io/metadata.name": NAMESPACE}
    assert selector["matchLabels"].items() <= labels.items()
    assert selector["matchLabels"] == {"kubernetes.io/metadata.name": NAMESPACE}


def test_quota_covers_the_gpu_flavor(objs: list[dict[str, Any]]) -> None:
    cq = find(objs, "ClusterQueue", QUEUE)
    (group,) = cq["spec"]["resourceGroups"]
    assert set(group["coveredResources"]) == {"cpu", "memory", "nvidia.com/gpu"}
    (flavor,) = group["flavors"]
    find(objs, "ResourceFlavor", flavor["name"])
    quota = {r["name"]: quantity(r["nominalQuota"]) for r in flavor["resources"]}
    assert quota["nvidia.com/gpu"] >= 1 and quota["cpu"] > 0 and quota["memory"] > 0
    # Never more than the namespace's ResourceQuota lets pods request: Kueue would admit pods it rejects.
    hard = find(objs, "ResourceQuota", NAMESPACE)["spec"]["hard"]
    for name in quota:
        assert quota[name] <= quantity(hard[f"requests.{name}"]), name


def test_quota_fits_the_rendered_tfjob_and_the_gpu_pool(objs: list[dict[str, Any]], worker: dict[str, Any]) -> None:
    """A TFJob with the submit stage's defaults is admissible (Kueue admits a job whole: all its workers), and the
    quota is no more than prod's GPU pool holds at its maximum size (else admitted pods wait for nodes)."""
    cq = find(objs, "ClusterQueue", QUEUE)
    (group,) = cq["spec"]["resourceGroups"]
    quota = {r["name"]: quantity(r["nominalQuota"]) for r in group["flavors"][0]["resources"]}
    per_pod = requests_of(worker["pod"])
    assert set(per_pod) <= set(group["coveredResources"]), "a requested resource the queue does not cover"
    for name, value in per_pod.items():
        assert value * worker["replicas"] <= quota[name], name

    variables = load_module(INFRA / "envs" / "prod" / "platform").variables
    default = {name: unquote(v.get("default")) for name, v in variables.items()}
    nodes, gpus = int(default["gpu_max_nodes"]), int(default["gpu_accelerator_count"])
    assert quota["nvidia.com/gpu"] == nodes * gpus
    cpus, memory = MACHINES[default["gpu_machine_type"]]
    assert quota["cpu"] <= nodes * cpus and quota["memory"] <= nodes * quantity(memory)
    # Each worker must also fit on one node.
    assert per_pod["cpu"] <= cpus and per_pod["memory"] <= quantity(memory) and per_pod["nvidia.com/gpu"] <= gpus


def gpu_pool_gets_the_gke_gpu_taint() -> None:
    """GKE taints the nodes of a pool with GPUs (guest_accelerator) nvidia.com/gpu=present:NoSchedule itself; the
    pool in infra/modules/gke must have its accelerators and declare no other taint."""
    pools = {}
    for block in blocks(load_hcl(INFRA / "modules" / "gke" / "main.tf"), "resource"):
        for kind, named in block.items():
            if kind.strip('"') == "google_container_node_pool":
                pools |= {name.strip('"'): body for name, body in named.items()}
    node_config = first(pools["gpu"]["node_config"])
    accelerator = first(node_config["guest_accelerator"])
    assert unquote(accelerator["type"]) == "${var.gpu_accelerator_type}"
    assert unquote(accelerator["count"]) == "${var.gpu_accelerator_count}"
    for taint in node_config.get("taint", []):
        taint = {k: unquote(v) for k, v in first(taint).items()}
        assert taint == {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}, taint
    variables = load_module(INFRA / "modules" / "gke").variables
    assert int(unquote(variables["gpu_accelerator_count"]["default"])) >= 1


def test_flavor_selects_the_nodes_the_workers_select(objs: list[dict[str, Any]], worker: dict[str, Any]) -> None:
    rf = find(objs, "ResourceFlavor", flavor_name(objs))["spec"]
    pod = worker["pod"]
    # Kueue puts nodeLabels into the pods' nodeSelector; the workers' own selector must agree with them.
    assert rf["nodeLabels"] == pod["nodeSelector"]
    variables = load_module(INFRA / "envs" / "prod" / "platform").variables
    assert rf["nodeLabels"]["cloud.google.com/gke-accelerator"] == unquote(variables["gpu_accelerator_type"]["default"])
    # The pool's taint (infra/modules/gke: GKE taints GPU nodes nvidia.com/gpu=present:NoSchedule) is
    # declared on the flavor, and the workers tolerate it, so Kueue admits them to this flavor.
    gpu_pool_gets_the_gke_gpu_taint()
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in rf["nodeTaints"]
    for taint in rf["nodeTaints"]:
        assert tolerates(pod["tolerations"], taint), taint
        assert tolerates(rf["tolerations"], taint), taint


def test_queue_name_label_reaches_the_local_queue(objs: list[dict[str, Any]]) -> None:
    """The submit stage labels each TFJob with LANDFALL_QUEUE_NAME; with the documented value, Kueue finds the
    LocalQueue in the TFJob's namespace."""
    from landfall.submit.config import JobConfig
    from landfall.submit.tfjob import render

    assert "queue_name" in {f.name for f in dataclasses.fields(JobConfig)}  # LANDFALL_QUEUE_NAME
    cfg = JobConfig(bucket="landfall-data", backend="kubernetes", trainer_image="trainer:test", queue_name=QUEUE)
    job = render(cfg, name="ds-0123456789", dataset="ds", request_id="req-1",
                 inputs_uri="gs://landfall-data/runs/ds-0123456789/inputs.json")
    lq = find(objs, "LocalQueue", job["metadata"]["labels"][QUEUE_LABEL])
    assert lq["metadata"]["namespace"] == job["metadata"]["namespace"]


def test_component_adds_only_the_queues_and_the_deployers_rights_to_them(objs: list[dict[str, Any]]) -> None:
    """Everything else renders as without the component; Landfall's runtime identities gain nothing."""
    plain = render_overlay("prod")
    deployer = {("ClusterRole", "landfall-deployer"), ("Role", "landfall-deployer")}

    def key(o: dict[str, Any]) -> tuple[str, str]:
        return o["kind"], o["metadata"]["name"]

    rest = [o for o in objs if o["apiVersion"].split("/")[0] != GROUP and key(o) not in deployer]
    assert sorted(rest, key=key) == sorted([o for o in plain if key(o) not in deployer], key=key)

    names = {o["kind"]: o["metadata"]["name"] for o in kueue_objects(objs)}
    for kind, role_name in deployer:
        before = find(plain, kind, role_name)["rules"]
        after = find(objs, kind, role_name)["rules"]
        assert after[: len(before)] == before
        added = after[len(before):]
        assert added and all(r["apiGroups"] == [GROUP] for r in added)
        for rule in added:
            assert set(rule["verbs"]) <= {"get", "create", "patch"}, rule
            if set(rule["verbs"]) - {"create"}:
                assert "resourceNames" in rule, rule  # get/patch only on Landfall's own queue objects
        resources = {"ClusterRole": {"ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues"},
                     "Role": {"LocalQueue": "localqueues"}}[kind]
        # kubectl apply (get, then create or patch) of each object this component adds.
        for obj_kind, plural in resources.items():
            # Cluster-scoped objects are created by the admin's first apply: no create (a cluster-wide write).
            for verb in ("get", "patch") if kind == "ClusterRole" else ("get", "create", "patch"):
                assert any(plural in r["resources"] and verb in r["verbs"]
                           and names[obj_kind] in r.get("resourceNames", [names[obj_kind]]) for r in added), (
                    obj_kind, verb)
    for obj in objs:
        if obj["kind"] in ("Role", "ClusterRole") and key(obj) not in deployer:
            assert all(GROUP not in r.get("apiGroups", []) for r in obj["rules"]), key(obj)
    for releaser in (SUBMITTER_SA, RECONCILER_SA):  # the releasers need no Kueue rights
        assert find(objs, "Role", releaser) == find(plain, "Role", releaser)


def test_kubernetes_objects_still_validate_strictly(objs: list[dict[str, Any]], tmp_path: Path) -> None:
    rendered = tmp_path / "prod-kueue.yaml"
    rendered.write_text(yaml.safe_dump_all([o for o in objs if not o["apiVersion"].startswith(("kubeflow.org/",
                                                                                               f"{GROUP}/"))]))
    proc = run([tool("kubernetes-validate"), "--strict", "--quiet", "-k", "1.32.0", str(rendered)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
