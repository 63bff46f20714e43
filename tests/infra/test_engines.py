"""Both engines through kustomize, as an operator chooses them (k8s/README.md, "Engines"): every overlay, as it is
(``jobset``: the overlays list ``components/jobset``, the engine of a new deploy) and without that component
(``tfjob``), renders, passes ``kubernetes-validate --strict``, and the
job the reconciler would release with the rendered settings validates against its CRD (tests/infra/crds); the
releasers' RBAC covers exactly that kind; with Kueue, the JobSet fits the queue and Kueue's shipped default
configuration queues it, while a TFJob needs the integration added back (k8s/kueue-config)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from .test_kueue import enable_in_prod, quantity, requests_of
from .test_terraform import load_module
from .tools import (
    INFRA,
    K8S,
    NAMESPACE,
    OVERLAYS,
    RECONCILER_SA,
    SUBMITTER_SA,
    find,
    render_dir,
    run,
    strict,
    tool,
    unquote,
)

CRDS = Path(__file__).parent / "crds"
CRD_FILES = {"TFJob": CRDS / "kubeflow" / "kubeflow.org_tfjobs.yaml",
             "JobSet": CRDS / "jobset" / "jobset.x-k8s.io_jobsets.yaml"}
KUEUE_DEFAULT = CRDS / "kueue" / "controller_manager_config.yaml"
ENGINES = {"tfjob": ("kubeflow.org", "v1", "tfjobs", "TFJob"),
           "jobset": ("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")}
# Kueue's integration name of each kind (Configuration.integrations.frameworks; the names are those of Kueue's
# shipped controller_manager_config.yaml, tests/infra/crds/kueue).
KUEUE_FRAMEWORK = {"TFJob": "kubeflow.org/tfjob", "JobSet": "jobset.x-k8s.io/jobset"}
KUBERNETES_VERSION = "1.32.0"


JOBSET_COMPONENT = "../../components/jobset"


def with_engine(tmp: Path, engine: str, kueue: bool = False) -> Path:
    """A copy of k8s/ with the engine chosen as k8s/README.md says: the overlays list components/jobset (as they
    come), or, for TFJobs, not."""
    k8s = tmp / "k8s"
    shutil.copytree(K8S, k8s)
    if kueue:
        enable_in_prod(k8s)
    for env in OVERLAYS:
        path = k8s / "overlays" / env / "kustomization.yaml"
        doc = yaml.safe_load(path.read_text())
        assert JOBSET_COMPONENT in doc.get("components", []), f"overlays/{env} no longer lists the JobSet engine"
        if engine == "tfjob":
            doc["components"].remove(JOBSET_COMPONENT)
            path.write_text(yaml.safe_dump(doc))
    return k8s


@pytest.fixture(scope="module", params=sorted(ENGINES))
def rendered(request, tmp_path_factory) -> tuple[str, dict[str, list[dict[str, Any]]]]:
    k8s = with_engine(tmp_path_factory.mktemp(request.param), request.param)
    return request.param, {env: render_dir(k8s / "overlays" / env) for env in OVERLAYS}


def crd_validator(kind: str) -> jsonschema.protocols.Validator:
    crd = yaml.load(CRD_FILES[kind].read_text(), Loader=yaml.CSafeLoader)
    assert crd["spec"]["names"]["kind"] == kind
    (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
    schema = strict(version["schema"]["openAPIV3Schema"])
    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)(schema)


def released_job(objs: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """The job the reconciler (run with the rendered Deployment's settings) would release."""
    from landfall.submit import engine
    from landfall.submit.config import JobConfig

    (c,) = find(objs, "Deployment", RECONCILER_SA)["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in c["env"] if e["name"].startswith("LANDFALL_") and "value" in e}
    cfg = JobConfig.load(env, **extra)
    return engine.render(cfg, name="ds-0123456789", dataset="ds", request_id="req-1",
                         inputs_uri=f"gs://{cfg.bucket}/runs/ds-0123456789/inputs.json")


def test_each_engine_renders_validates_and_its_job_fits_its_crd(rendered, tmp_path: Path) -> None:
    engine_name, by_env = rendered
    group, version, _, kind = ENGINES[engine_name]
    validator = crd_validator(kind)
    for env, objs in by_env.items():
        builtin = [o for o in objs if not o["apiVersion"].startswith(("kubeflow.org/", "jobset.x-k8s.io/"))]
        assert len(builtin) == len(objs), "k8s/ renders no job objects: jobs are rendered at run time"
        path = tmp_path / f"{env}-{engine_name}.yaml"
        path.write_text(yaml.safe_dump_all(builtin))
        proc = run([tool("kubernetes-validate"), "--strict", "--quiet", "-k", KUBERNETES_VERSION, str(path)])
        assert proc.returncode == 0, f"{env}/{engine_name}:\n{proc.stdout}{proc.stderr}"
        job = released_job(objs)
        assert job["apiVersion"] == f"{group}/{version}" and job["kind"] == kind, (env, engine_name)
        errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(job)]
        assert errors == [], f"{env}/{engine_name}:\n" + "\n".join(errors[:20])
        assert job["metadata"]["namespace"] == NAMESPACE


def test_the_releasers_may_create_get_list_the_engines_kind_and_nothing_more(rendered) -> None:
    engine_name, by_env = rendered
    for objs in by_env.values():
        for releaser in (SUBMITTER_SA, RECONCILER_SA):
            rules = find(objs, "Role", releaser)["rules"]
            granted = {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]
                       for v in rule["verbs"]}
            kinds = [ENGINES["tfjob"]] + ([ENGINES["jobset"]] if engine_name == "jobset" else [])
            assert granted == {(g, p, v) for g, _, p, _ in kinds for v in ("create", "get", "list")}, releaser
        for obj in objs:  # nothing cluster-wide names jobs of either kind
            if obj["kind"] == "ClusterRole":
                assert not {"tfjobs", "jobsets"} & {r for rule in obj["rules"] for r in rule.get("resources", [])}


def functions_engine(env: str) -> str:
    """The engine ``infra/envs/<env>/functions`` gives the submit function: its module block's ``engine``, else the
    module's default; ``local.platform.engine`` is the platform root's (its ``engine`` variable, as applied by
    default), which also decides whether that root makes a cluster."""
    root = load_module(INFRA / "envs" / env / "functions")
    block = root.modules["functions"]
    if "engine" in block:
        value = str(unquote(block["engine"]))
        if value == "${local.platform.engine}":
            platform = load_module(INFRA / "envs" / env / "platform")
            assert unquote(platform.modules["platform"]["engine"]) == "${var.engine}"
            return str(unquote(platform.variables["engine"]["default"]))
        return value
    return str(unquote(load_module(INFRA / "modules" / "functions").variables["engine"]["default"]))


def reconciler_engine(objs: list[dict[str, Any]]) -> str:
    (c,) = find(objs, "Deployment", RECONCILER_SA)["spec"]["template"]["spec"]["containers"]
    return str({e["name"]: e.get("value") for e in c["env"]}["LANDFALL_ENGINE"])


@pytest.mark.parametrize("env", OVERLAYS)
def test_each_environments_function_and_reconciler_release_the_same_kind(env: str) -> None:
    """Whichever engine an environment chooses (k8s/README.md, "Engines"), its submit function and its overlay's
    reconciler release the same kind: the releasers look up a dataset's head job in their engine's collection."""
    assert functions_engine(env) == reconciler_engine(render_dir(K8S / "overlays" / env))


def test_a_new_deploy_runs_jobsets() -> None:
    """The decision of docs/submit.md ("Which engine a deploy gets"): the functions module's default and the overlays
    as they come are JobSets; the library's own default stays the TFJob (what ``landfall render-job``, the local
    stack and the tests get without a setting)."""
    from landfall.submit.config import JobConfig

    assert unquote(load_module(INFRA / "modules" / "functions").variables["engine"]["default"]) == "jobset"
    assert {env: functions_engine(env) for env in OVERLAYS} == dict.fromkeys(OVERLAYS, "jobset")
    assert JobConfig().engine == "tfjob"


def test_an_environment_switched_to_tfjob_agrees_too(tmp_path: Path) -> None:
    """What k8s/README.md says to do for TFJobs (the component removed, ``engine = "tfjob"`` on the functions) gives
    a reconciler that releases TFJobs; the check above would catch one half done."""
    k8s = with_engine(tmp_path, "tfjob")
    for env in OVERLAYS:
        assert reconciler_engine(render_dir(k8s / "overlays" / env)) == "tfjob" != functions_engine(env)


@pytest.mark.parametrize("engine_name", sorted(ENGINES))
def test_with_kueue_the_job_fits_the_queue_and_the_default_config_says_whether_it_is_queued(
        engine_name: str, tmp_path: Path) -> None:
    """Kueue admits a job whole (all its pods); with Kueue's shipped Configuration the JobSet is queued as it is,
    a TFJob only once ``kubeflow.org/tfjob`` is added back (k8s/kueue-config)."""
    objs = render_dir(with_engine(tmp_path, engine_name, kueue=True) / "overlays" / "prod")
    lq = find(objs, "LocalQueue", "landfall-gpu")
    job = released_job(objs, queue_name=lq["metadata"]["name"])
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == lq["metadata"]["name"]
    assert job["metadata"]["namespace"] == lq["metadata"]["namespace"]
    if job["kind"] == "JobSet":
        pods = [(rj["template"]["spec"]["template"]["spec"], rj["replicas"] * rj["template"]["spec"]["parallelism"])
                for rj in job["spec"]["replicatedJobs"]]
    else:
        pods = [(rs["template"]["spec"], rs["replicas"]) for rs in job["spec"]["tfReplicaSpecs"].values()]
    (group,) = find(objs, "ClusterQueue", lq["spec"]["clusterQueue"])["spec"]["resourceGroups"]
    quota = {r["name"]: quantity(r["nominalQuota"]) for r in group["flavors"][0]["resources"]}
    for name in quota:
        assert sum(requests_of(pod).get(name, 0) * n for pod, n in pods) <= quota[name], name
    frameworks = yaml.safe_load(KUEUE_DEFAULT.read_text())["integrations"]["frameworks"]
    assert (KUEUE_FRAMEWORK[job["kind"]] in frameworks) == (job["kind"] == "JobSet")


# Kubernetes RBAC, privilege escalation prevention: "You can only create/update a role if at least one of the
# following things is true: you already have all the permissions contained in the role, at the same scope as
# the object being modified ...; you are granted explicit permission to perform the escalate verb".
# https://kubernetes.io/docs/reference/access-authn-authz/rbac/#privilege-escalation-prevention-and-bootstrapping
# (read 2026-12-01).
def _granted(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in rules for g in rule.get("apiGroups", []) for r in rule.get("resources", [])
            for v in rule.get("verbs", [])}


def test_the_deployer_may_reapply_the_releasers_roles(rendered) -> None:
    """Cloud Build's landfall-build holds no escalate verb, so it must hold what each Role it applies grants."""
    engine_name, by_env = rendered
    for env, objs in by_env.items():
        deployer = _granted(find(objs, "Role", "landfall-deployer")["rules"])
        assert not {v for _, _, v in deployer} & {"escalate", "bind", "*"}
        for releaser in (SUBMITTER_SA, RECONCILER_SA):
            missing = _granted(find(objs, "Role", releaser)["rules"]) - deployer
            assert not missing, f"{env}/{engine_name}: landfall-build could not re-apply Role {releaser}: {missing}"
