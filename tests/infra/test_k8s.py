"""k8s/: every overlay renders with `kubectl kustomize`, validates strictly against Kubernetes 1.32, and
holds the conventions the rest of Landfall relies on."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from .tools import (
    APP_LABELS,
    K8S,
    NAMESPACE,
    OVERLAYS,
    RECONCILER_SA,
    SUBMITTER_SA,
    TRAINER_SA,
    find,
    render_dir,
    render_overlay,
    run,
    tool,
)

KUBERNETES_VERSION = "1.32.0"
CUSTOM_GROUPS = ("kubeflow.org/",)  # custom resources have no schema in kubernetes-validate
RECONCILER = RECONCILER_SA  # the Deployment, its ServiceAccount and its Google account share the name


def test_overlays_exist() -> None:
    assert set(OVERLAYS) >= {"dev", "prod"}
    assert (K8S / "README.md").is_file()


@pytest.mark.parametrize("env", OVERLAYS)
def test_overlay_validates_strictly(env: str, tmp_path: Path) -> None:
    objs = [o for o in render_overlay(env) if not o["apiVersion"].startswith(CUSTOM_GROUPS)]
    assert objs
    rendered = tmp_path / f"{env}.yaml"
    rendered.write_text(yaml.safe_dump_all(objs))
    proc = run([tool("kubernetes-validate"), "--strict", "--quiet", "-k", KUBERNETES_VERSION, str(rendered)])
    assert proc.returncode == 0, f"kubernetes-validate failed for {env}:\n{proc.stdout}{proc.stderr}"


@pytest.mark.parametrize("env", OVERLAYS)
def test_every_object_carries_the_common_labels(env: str) -> None:
    for obj in render_overlay(env):
        labels = obj["metadata"].get("labels", {})
        assert APP_LABELS.items() <= labels.items(), f"{obj['kind']}/{obj['metadata']['name']}"
        template = obj.get("spec", {}).get("template")
        if template:
            assert APP_LABELS.items() <= template["metadata"]["labels"].items()


@pytest.mark.parametrize("env", OVERLAYS)
def test_namespace_and_namespaced_objects(env: str) -> None:
    objs = render_overlay(env)
    find(objs, "Namespace", NAMESPACE)
    cluster_scoped = {"Namespace", "StorageClass", "ClusterRole", "ClusterRoleBinding"}
    for obj in objs:
        if obj["kind"] not in cluster_scoped:
            assert obj["metadata"].get("namespace") == NAMESPACE, f"{obj['kind']}/{obj['metadata']['name']}"


@pytest.mark.parametrize("env", OVERLAYS)
def test_default_storage_class_provisions_dynamically(env: str) -> None:
    classes = [o for o in render_overlay(env) if o["kind"] == "StorageClass"]
    defaults = [
        c for c in classes
        if c["metadata"].get("annotations", {}).get("storageclass.kubernetes.io/is-default-class") == "true"
    ]
    assert len(defaults) == 1
    assert defaults[0]["provisioner"] == "pd.csi.storage.gke.io"
    assert defaults[0]["volumeBindingMode"] == "WaitForFirstConsumer"


@pytest.mark.parametrize("env", OVERLAYS)
def test_service_accounts_use_workload_identity(env: str) -> None:
    objs = render_overlay(env)
    for name in (TRAINER_SA, RECONCILER_SA):
        sa = find(objs, "ServiceAccount", name)
        gsa = sa["metadata"]["annotations"]["iam.gke.io/gcp-service-account"]
        assert gsa == f"{name}@PROJECT_ID.iam.gserviceaccount.com", gsa  # project.env's placeholder domain
        assert sa.get("automountServiceAccountToken") is False
    # The submit function runs outside the cluster: no pod, so no ServiceAccount, acts as it.
    assert not [o for o in objs if o["kind"] == "ServiceAccount" and o["metadata"]["name"] == SUBMITTER_SA]
    annotated = {o["metadata"]["name"]: o["metadata"]["annotations"]["iam.gke.io/gcp-service-account"]
                 for o in objs if o["kind"] == "ServiceAccount"
                 and "iam.gke.io/gcp-service-account" in o["metadata"].get("annotations", {})}
    assert set(annotated) == {TRAINER_SA, RECONCILER_SA}, annotated


# What a releaser may do: create/get/list the jobs of both kinds (the base's tfjobs, and the jobsets of
# components/jobset, the engine the overlays run: docs/submit.md, "Which engine a deploy gets"), in the namespace.
RELEASER_RULES = [
    {"apiGroups": ["kubeflow.org"], "resources": ["tfjobs"], "verbs": ["create", "get", "list"]},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["create", "get", "list"]},
]


@pytest.mark.parametrize("env", OVERLAYS)
def test_submitter_may_only_manage_jobs_in_the_namespace(env: str) -> None:
    objs = render_overlay(env)
    role = find(objs, "Role", SUBMITTER_SA)
    assert role["metadata"]["namespace"] == NAMESPACE
    assert role["rules"] == RELEASER_RULES
    # A job is created once, when released, and only read after that: no patch, update, delete or subresource.
    verbs = {v for rule in role["rules"] for v in rule["verbs"]}
    assert not {"patch", "update", "delete", "deletecollection", "watch"} & verbs
    assert all("/" not in r for rule in role["rules"] for r in rule["resources"])
    binding = find(objs, "RoleBinding", SUBMITTER_SA)
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": SUBMITTER_SA}
    # The function's Google identity only: no pod runs as a landfall-submitter ServiceAccount any more.
    subjects = [(s["kind"], s["name"]) for s in binding["subjects"]]
    assert subjects == [("User", f"{SUBMITTER_SA}@PROJECT_ID.iam.gserviceaccount.com")], subjects
    # Nothing cluster-wide names the submitter, and nothing grants tfjobs cluster-wide.
    for obj in objs:
        if obj["kind"] == "ClusterRoleBinding":
            assert all(SUBMITTER_SA not in s["name"] for s in obj["subjects"])
        if obj["kind"] == "ClusterRole":
            assert all(not {"tfjobs", "jobsets"} & set(r.get("resources", [])) for r in obj["rules"])


@pytest.mark.parametrize("env", OVERLAYS)
def test_reconciler_has_its_own_job_role(env: str) -> None:
    """The reconciler's own Role and RoleBinding: create/get/list tfjobs and jobsets, bound to its ServiceAccount
    only (tests/infra/test_policy.py checks that no other binding gives it more)."""
    objs = render_overlay(env)
    role = find(objs, "Role", RECONCILER_SA)
    assert role["metadata"]["namespace"] == NAMESPACE
    assert role["rules"] == RELEASER_RULES
    binding = find(objs, "RoleBinding", RECONCILER_SA)
    assert binding["metadata"]["namespace"] == NAMESPACE
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": RECONCILER_SA}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": RECONCILER_SA, "namespace": NAMESPACE}]


@pytest.mark.parametrize("env", OVERLAYS)
def test_no_role_can_escalate(env: str) -> None:
    for obj in render_overlay(env):
        if obj["kind"] in ("Role", "ClusterRole"):
            for rule in obj["rules"]:
                assert not {"bind", "escalate", "impersonate", "*"} & set(rule.get("verbs", [])), obj["metadata"]
                assert "*" not in rule.get("resources", [])


@pytest.mark.parametrize("env", OVERLAYS)
def test_quota_caps_gpus_and_limit_range_exists(env: str) -> None:
    objs = render_overlay(env)
    quota = find(objs, "ResourceQuota", NAMESPACE)
    assert int(quota["spec"]["hard"]["requests.nvidia.com/gpu"]) >= 1
    limits = find(objs, "LimitRange", NAMESPACE)
    assert any(lim["type"] == "Container" for lim in limits["spec"]["limits"])


@pytest.mark.parametrize("env", OVERLAYS)
def test_reconciler_deployment(env: str) -> None:
    """`landfall operator` against the cluster: one replica, the trainer image, its own identity, no GPU,
    hardened (restricted Pod Security), in-cluster API access (no GKE endpoint), small resources."""
    objs = render_overlay(env)
    dep = find(objs, "Deployment", RECONCILER)
    assert dep["metadata"]["namespace"] == NAMESPACE
    assert dep["spec"]["replicas"] == 1
    pod = dep["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == RECONCILER_SA
    sa = find(objs, "ServiceAccount", RECONCILER_SA)
    assert sa["metadata"]["annotations"]["iam.gke.io/gcp-service-account"].split("@")[0] == RECONCILER_SA
    # landfall.submit.backends.kube loads the in-cluster config from the mounted token; the ServiceAccount does not
    # automount it.
    assert pod["automountServiceAccountToken"] is True
    (c,) = pod["containers"]
    prepull = find(objs, "DaemonSet", "landfall-trainer-prepull")["spec"]["template"]["spec"]["containers"][0]
    assert c["image"] == prepull["image"] == f"landfall-trainer:{env}"  # the overlay's (and Cloud Build's) image
    assert c["command"] == ["python", "-m", "landfall.cli", "reconcile"]
    env_vars = {e["name"]: e["value"] for e in c["env"]}
    assert env_vars["LANDFALL_BACKEND"] == "kubernetes"
    assert env_vars["LANDFALL_NAMESPACE"] == NAMESPACE
    assert env_vars["LANDFALL_TRAINER_SERVICE_ACCOUNT"] == TRAINER_SA
    assert env_vars["LANDFALL_BUCKET"] and env_vars["GOOGLE_CLOUD_PROJECT"]
    assert "LANDFALL_GKE_ENDPOINT" not in env_vars  # it would win over the in-cluster configuration
    # Hardened: non-root UID of trainer/Dockerfile, read-only root with /tmp on an emptyDir, no capabilities.
    psc, sc = pod["securityContext"], c["securityContext"]
    assert psc["runAsNonRoot"] is True and psc["runAsUser"] == 10001 and psc["runAsGroup"] == 10001
    assert psc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    (mount,) = c["volumeMounts"]
    assert mount["mountPath"] == "/tmp"
    assert next(v for v in pod["volumes"] if v["name"] == mount["name"])["emptyDir"]
    # Small, no GPU, never on the tainted GPU nodes.
    res = c["resources"]
    assert set(res) == {"requests", "limits"} and not any("nvidia.com/gpu" in r for r in res.values())
    assert "tolerations" not in pod and "nodeSelector" not in pod
    assert res["limits"]["memory"].endswith("Mi") and int(res["limits"]["memory"][:-2]) <= 512


@pytest.mark.parametrize("env", OVERLAYS)
def test_reconciler_liveness_checks_the_loops_heartbeat(env: str, tmp_path: Path) -> None:
    """The probes run `landfall reconcile --check-heartbeat` on the file the loop touches (on the /tmp emptyDir),
    stale only after many polls; run here, the probe's command passes on a fresh file and fails on a missing one."""
    import sys

    from landfall.reconcile import loop

    (c,) = find(render_overlay(env), "Deployment", RECONCILER)["spec"]["template"]["spec"]["containers"]
    heartbeat = c["args"][c["args"].index("--heartbeat") + 1]
    assert heartbeat.startswith("/tmp/")
    live, startup = c["livenessProbe"], c["startupProbe"]
    for probe in (live, startup):
        cmd = probe["exec"]["command"]
        assert cmd[:5] == ["python", "-m", "landfall.cli", "reconcile", "--check-heartbeat"]
        assert cmd[cmd.index("--heartbeat") + 1] == heartbeat
        max_age = float(cmd[cmd.index("--max-age-s") + 1])
        assert max_age >= 10 * loop.MIN_POLL_S and probe["timeoutSeconds"] >= 5
    assert live["periodSeconds"] * live["failureThreshold"] <= 5 * 60  # a hung loop is restarted within minutes
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 60
    local = [sys.executable, *live["exec"]["command"][1:]]
    local[local.index(heartbeat)] = str(tmp_path / "alive")
    assert run(local).returncode == 1
    loop.beat(tmp_path / "alive")
    assert run(local).returncode == 0


def test_reconciler_image_is_the_trainer_image_in_the_dockerfile() -> None:
    """`python -m landfall.cli` must exist in the trainer image, and run as the pod's UID."""
    dockerfile = (K8S.parent / "trainer" / "Dockerfile").read_text()
    assert "COPY functions/landfall ./functions/landfall" in dockerfile
    assert "USER 10001:10001" in dockerfile
    assert (K8S.parent / "functions" / "landfall" / "cli" / "reconcile.py").is_file()


def test_prod_differs_from_dev_only_in_the_image() -> None:
    def strip(objs: list[dict]) -> list[dict]:
        for obj in objs:
            for spec in (obj.get("spec", {}).get("template", {}).get("spec", {}),):
                for c in spec.get("containers", []) + spec.get("initContainers", []):
                    c["image"] = "IMAGE"
        return objs

    assert strip(render_overlay("dev")) == strip(render_overlay("prod"))


def test_cloud_build_image_override_and_project_domain(tmp_path: Path) -> None:
    """What cloudbuild.yaml does before `kubectl apply`: write project.env, override the image by digest."""
    k8s = tmp_path / "k8s"
    shutil.copytree(K8S, k8s)
    (k8s / "base" / "project.env").write_text(
        "GSA_DOMAIN=acme-ml.iam.gserviceaccount.com\nPROJECT_ID=acme-ml\nBUCKET=acme-ml-landfall\n"
        f"TRAINER_IMAGE=europe-west4-docker.pkg.dev/acme-ml/landfall/trainer@sha256:{'a' * 64}\n"
    )
    deploy = tmp_path / "deploy"
    deploy.mkdir()
    digest = "sha256:" + "a" * 64
    (deploy / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources:\n  - ../k8s/overlays/prod\n"
        "images:\n  - name: landfall-trainer\n"
        "    newName: europe-west4-docker.pkg.dev/acme-ml/landfall/trainer\n"
        f"    digest: {digest}\n"
    )
    objs = render_dir(deploy)
    ds = find(objs, "DaemonSet", "landfall-trainer-prepull")
    spec = ds["spec"]["template"]["spec"]
    for c in spec["containers"] + spec["initContainers"]:
        assert c["image"] == f"europe-west4-docker.pkg.dev/acme-ml/landfall/trainer@{digest}"
    reconciler = find(objs, "Deployment", RECONCILER)["spec"]["template"]["spec"]
    (container,) = reconciler["containers"]
    assert container["image"] == f"europe-west4-docker.pkg.dev/acme-ml/landfall/trainer@{digest}"
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["GOOGLE_CLOUD_PROJECT"] == "acme-ml" and env["LANDFALL_BUCKET"] == "acme-ml-landfall"
    # The jobs it releases run the image it runs: the one Cloud Build pushed.
    assert env["LANDFALL_TRAINER_IMAGE"] == container["image"]
    # The replacements fill the domain into every Workload Identity annotation.
    for name in (TRAINER_SA, RECONCILER_SA):
        sa = find(objs, "ServiceAccount", name)
        assert sa["metadata"]["annotations"]["iam.gke.io/gcp-service-account"] == (
            f"{name}@acme-ml.iam.gserviceaccount.com"
        )
    users = [s["name"] for o in objs if o["kind"].endswith("RoleBinding") for s in o["subjects"] if s["kind"] == "User"]
    assert users and all(u.endswith("@acme-ml.iam.gserviceaccount.com") for u in users)


def test_placeholders_are_only_in_known_places() -> None:
    text = "".join(yaml.safe_dump(o) for o in render_overlay("dev"))
    assert "PROJECT_ID" in text  # replaced by Cloud Build, see the test above
    assert ":latest" not in text
