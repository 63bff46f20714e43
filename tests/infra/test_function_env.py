"""The environment infra/ gives each function is what the function's configuration reads: every ``LANDFALL_*``
variable is a field of the function's config class (``Settings.load`` reads ``LANDFALL_<FIELD>``), and the
submitter gets everything ``landfall.submit.config.JobConfig`` needs to reach the cluster and render TFJobs."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

from .test_terraform import load_module
from .tools import (
    INFRA,
    K8S,
    NAMESPACE,
    OVERLAYS,
    RECONCILER_SA,
    TRAINER_SA,
    blocks,
    find,
    first,
    labelled,
    load_hcl,
    render_overlay,
    unquote,
)

FUNCTIONS = INFRA / "modules" / "functions"
RECONCILER = RECONCILER_SA


def _config_classes() -> dict[str, tuple[type, ...]]:
    """Function resource -> the Settings classes its runtime loads from the environment."""
    from landfall.arrival import handler as arrival
    from landfall.arrival.config import ConverterConfig
    from landfall.core.contracts.layout import Layout
    from landfall.submit import handler as submitter
    from landfall.submit.config import JobConfig

    # The runtimes load exactly these (checked here, so a new config class cannot slip past this test).
    arrival_src = inspect.getsource(arrival.runtime_from_env)
    assert "ConverterConfig.load()" in arrival_src and "Layout.load()" in arrival_src
    submitter_src = inspect.getsource(submitter.runtime_from_env)
    assert "JobConfig.load()" in submitter_src and "Layout.load()" in submitter_src
    return {"on_data_arrival": (ConverterConfig, Layout), "on_training_request": (JobConfig, Layout)}


def _env_var(field: str) -> str:
    from landfall.core.config import ENV_PREFIX

    return ENV_PREFIX + field.upper()


def _fields(classes: tuple[type, ...]) -> set[str]:
    return {_env_var(f.name) for cls in classes for f in dataclasses.fields(cls)}


def _locals() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for block in blocks(load_hcl(FUNCTIONS / "main.tf"), "locals"):
        out |= block
    return out


def _resources(path: Path, rtype: str) -> dict[str, dict[str, Any]]:
    """``resource "<rtype>" "<name>"`` bodies of the Terraform file ``path``, by name."""
    out: dict[str, dict[str, Any]] = {}
    for block in blocks(load_hcl(path), "resource"):
        for kind, named in block.items():
            if kind.strip('"') == rtype:
                out |= {name.strip('"'): body for name, body in named.items()}
    return out


def _functions() -> dict[str, dict[str, Any]]:
    """``resource "google_cloudfunctions2_function" "<name>"`` bodies of infra/modules/functions/main.tf."""
    return _resources(FUNCTIONS / "main.tf", "google_cloudfunctions2_function")


def function_environments() -> dict[str, dict[str, str]]:
    """``{"on_data_arrival": {"LANDFALL_X": "<expr>", ...}, ...}`` from infra/modules/functions/main.tf."""
    env_locals = _locals()
    out: dict[str, dict[str, str]] = {}
    for name, body in _functions().items():
        service = first(body.get("service_config"))
        ref = isinstance(service, dict) and re.fullmatch(
            r"\$\{local\.(\w+)\}", str(unquote(service.get("environment_variables"))))
        assert ref, f"{name}: service_config.environment_variables must be a local map"
        env = first(env_locals[ref.group(1)])
        out[name] = {k: str(unquote(v)) for k, v in env.items()}
    return out


def test_every_function_is_covered() -> None:
    assert set(function_environments()) == set(_config_classes())


@pytest.mark.parametrize("function", ["on_data_arrival", "on_training_request"])
def test_landfall_env_vars_are_config_fields(function: str) -> None:
    env = function_environments()[function]
    fields = _fields(_config_classes()[function])
    unread = sorted(k for k in env if k.startswith("LANDFALL_") and k not in fields)
    assert not unread, f"{function} sets {unread}, which its config classes do not read"
    # Everything else is the project (JobConfig.project / ConverterConfig.project default to it).
    assert {k for k in env if not k.startswith("LANDFALL_")} == {"GOOGLE_CLOUD_PROJECT"}


def test_submitter_environment_is_complete() -> None:
    env = function_environments()["on_training_request"]
    for key in ("LANDFALL_BUCKET", "LANDFALL_BACKEND", "LANDFALL_GKE_ENDPOINT", "LANDFALL_GKE_CA_CERT",
                "LANDFALL_NAMESPACE", "LANDFALL_TRAINER_IMAGE", "LANDFALL_TRAINER_SERVICE_ACCOUNT",
                "LANDFALL_DEAD_LETTER_SUBSCRIPTION", "GOOGLE_CLOUD_PROJECT"):
        assert key in env, key
    # The backend follows the engine (landfall.core.config.ENGINE_BACKENDS): the cluster's API, or Vertex AI's
    # custom jobs in the function's region with no cluster settings at all.
    from landfall.core.config import ENGINE_BACKENDS

    assert env["LANDFALL_BACKEND"] == '${local.vertex ? "customjobs" : "kubernetes"}'
    assert "customjobs" in ENGINE_BACKENDS["vertex"] and "kubernetes" in ENGINE_BACKENDS["jobset"]
    assert "kubernetes" in ENGINE_BACKENDS["tfjob"]
    assert env["LANDFALL_GKE_ENDPOINT"] == '${local.vertex ? "" : var.gke_endpoint}'
    # Terraform's cluster_ca_certificate is base64 PEM; landfall.submit.backends.kube decodes base64, PEM or a path.
    assert env["LANDFALL_GKE_CA_CERT"] == '${local.vertex ? "" : var.gke_ca_certificate}'
    assert env["LANDFALL_REGION"] == "${var.region}"
    assert unquote(_locals()["vertex"]) == '${var.engine == "vertex"}'
    gke = labelled(load_hcl(INFRA / "modules" / "gke" / "outputs.tf"), "output")
    assert unquote(gke["ca_certificate"]["value"]) == (
        "${google_container_cluster.this.master_auth[0].cluster_ca_certificate}")


def test_converter_gets_no_cluster_access() -> None:
    env = function_environments()["on_data_arrival"]
    assert not {k for k in env if k.startswith(("LANDFALL_GKE_", "LANDFALL_BACKEND"))}


def test_defaults_agree_with_the_config() -> None:
    from landfall.submit.config import JobConfig

    cfg = JobConfig(backend="kubernetes")
    variables = load_module(FUNCTIONS).variables

    def default(name: str) -> Any:
        return unquote(variables[name]["default"])

    assert default("namespace") == cfg.namespace == NAMESPACE
    assert default("trainer_service_account") == cfg.trainer_service_account == TRAINER_SA
    assert default("dead_letter_subscription") == cfg.dead_letter_subscription
    pubsub = load_module(INFRA / "modules" / "pubsub").variables
    assert unquote(pubsub["dead_letter_topic_name"]["default"]) == cfg.dead_letter_subscription


@pytest.mark.parametrize("env", OVERLAYS)
def test_reconciler_env_vars_are_config_fields(env: str) -> None:
    from landfall.submit.config import JobConfig

    dep = find(render_overlay(env), "Deployment", RECONCILER)
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    values = {e["name"]: e["value"] for e in c["env"]}
    landfall = {k: v for k, v in values.items() if k.startswith("LANDFALL_")}
    assert set(landfall) <= _fields((JobConfig,))
    cfg = JobConfig.load(landfall)
    assert cfg.backend == "kubernetes" and not cfg.gke_endpoint  # in-cluster configuration
    assert cfg.bucket and "GOOGLE_CLOUD_PROJECT" in values


# What only the function needs: it reaches the API from outside the cluster, and republishes.
# LANDFALL_REGION is the vertex engine's (the reconcile job there gets the function's whole environment).
FUNCTION_ONLY = {"LANDFALL_GKE_ENDPOINT", "LANDFALL_GKE_CA_CERT", "LANDFALL_REQUEST_TOPIC",
                 "LANDFALL_DEAD_LETTER_SUBSCRIPTION", "LANDFALL_REGION"}


@pytest.mark.parametrize("env", OVERLAYS)
def test_the_reconciler_renders_jobs_with_the_functions_settings(env: str) -> None:
    """Whichever releases a job, the function or the reconciler, renders its TFJob: every setting the
    function is given (the trainer image above all) the reconciler is given too."""
    function = {k for k in function_environments()["on_training_request"] if k.startswith("LANDFALL_")}
    dep = find(render_overlay(env), "Deployment", RECONCILER)
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    reconciler = {e["name"] for e in c["env"]}
    missing = sorted(function - FUNCTION_ONLY - reconciler)
    assert not missing, f"the reconciler would release jobs without {missing}"
    assert "LANDFALL_TRAINER_IMAGE" in reconciler and "LANDFALL_TRAINER_IMAGE" in function


def _iam_resources(rtype: str) -> dict[str, dict[str, Any]]:
    return _resources(INFRA / "modules" / "iam" / "main.tf", rtype)


def test_reconciler_identity_has_workload_identity_in_infra() -> None:
    """Its own Google account, reachable from its own KSA only; the submitter account from no KSA at all."""
    bindings = _iam_resources("google_service_account_iam_member")
    binding = bindings["reconciler_workload_identity"]
    assert unquote(binding["service_account_id"]) == '${google_service_account.sa["reconciler"].name}'
    assert unquote(binding["role"]) == "roles/iam.workloadIdentityUser"
    variables = load_module(INFRA / "modules" / "iam").variables
    assert "submitter_ksa" not in variables
    assert unquote(variables["reconciler_ksa"]["default"]) == RECONCILER_SA
    assert unquote(variables["training_namespace"]["default"]) == NAMESPACE
    member = str(unquote(binding["member"]))
    for var in ("workload_pool", "training_namespace", "reconciler_ksa"):
        default = variables[var].get("default")
        member = member.replace(f"${{var.{var}}}", str(unquote(default)) if default is not None else "POOL")
    assert member == f"serviceAccount:POOL[{NAMESPACE}/{RECONCILER_SA}]", member
    # Workload Identity is granted on the trainer and reconciler accounts only, each to its own KSA.
    wi = {name: unquote(b["service_account_id"]) for name, b in bindings.items()
          if unquote(b["role"]) == "roles/iam.workloadIdentityUser"}
    assert wi == {"trainer_workload_identity": '${google_service_account.sa["trainer"].name}',
                  "reconciler_workload_identity": '${google_service_account.sa["reconciler"].name}'}, wi
    # The reconciler lists manifests under tfrecords/ (as the submitter does).
    read = _iam_resources("google_storage_bucket_iam_member")["reconciler_read_manifests"]
    assert unquote(read["member"]) == '${google_service_account.sa["reconciler"].member}'
    assert unquote(read["role"]) == "roles/storage.objectViewer"
    condition = str(unquote(first(read["condition"])["expression"]))
    assert re.match(r'\$\{local\.prefix_condition\["tfrecords"\]\}', condition), condition
    assert (K8S / "base" / "reconciler.yaml").is_file()


@pytest.mark.parametrize("env", OVERLAYS)
def test_reconciler_pods_run_as_the_ksa_infra_binds(env: str) -> None:
    """The Deployment's ServiceAccount is the KSA the Workload Identity binding names, annotated for the
    Google account that binding is on (landfall-<key of the accounts map>)."""
    variables = load_module(INFRA / "modules" / "iam").variables
    objs = render_overlay(env)
    pod = find(objs, "Deployment", RECONCILER)["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == unquote(variables["reconciler_ksa"]["default"])
    sa = find(objs, "ServiceAccount", pod["serviceAccountName"])
    accounts = next(first(b["accounts"]) for b in blocks(load_hcl(INFRA / "modules" / "iam" / "main.tf"), "locals")
                    if "accounts" in b)
    assert "reconciler" in accounts
    gsa = sa["metadata"]["annotations"]["iam.gke.io/gcp-service-account"]
    assert gsa.split("@")[0] == "landfall-reconciler" == RECONCILER_SA


def test_each_converter_is_told_its_own_memory() -> None:
    """The function and the Cloud Run job's tasks reject Parquet too wide for their own memory
    (parquet_too_wide), so each gets the figure Terraform sizes it with, in MiB."""
    from landfall.arrival.config import ConverterConfig

    env_locals = _locals()
    job_env = {k: str(unquote(v)) for k, v in first(env_locals["convert_job_env"]).items()}
    assert function_environments()["on_data_arrival"]["LANDFALL_MEMORY_LIMIT_MIB"] == (
        "${tostring(local.memory_mib.converter)}")
    assert job_env["LANDFALL_MEMORY_LIMIT_MIB"] == "${tostring(local.memory_mib.convert_job)}"
    sizes = str(unquote(first(env_locals["memory_mib"])))
    assert "var.converter.memory" in sizes and "var.convert_job.memory" in sizes
    variables = load_module(FUNCTIONS).variables
    for name in ("converter", "convert_job"):  # the defaults agree with the class's, for `landfall convert`
        assert first(variables[name]["default"])["memory"] == "2Gi"
    assert ConverterConfig().memory_limit_mib == 2048


def test_the_reconcile_job_gets_the_functions_settings_and_runs_bounded() -> None:
    """The vertex engine's reconciler (no cluster): the Cloud Run job releases jobs as the function renders them, so
    it gets the function's whole environment; it runs `landfall reconcile` for less than the schedule's minute, under
    a timeout, as the reconciler account, from the image without TensorFlow."""
    body = _resources(FUNCTIONS / "main.tf", "google_cloud_run_v2_job")["reconcile"]
    assert unquote(body["count"]) == "${local.vertex ? 1 : 0}"
    task = first(first(body["template"])["template"])
    container = first(task["containers"])
    assert unquote(task["service_account"]) == "${var.service_accounts.reconciler}"
    assert unquote(container["image"]) == "${var.converter_image}"
    assert [unquote(c) for c in first(container["command"])] == ["python", "-m", "landfall.cli", "reconcile"]
    args = [unquote(a) for a in first(container["args"])]
    from landfall.reconcile import loop

    assert args[0] == "--for-seconds" and 0 < float(args[1]) < loop.SCHEDULE_S
    assert int(unquote(task["timeout"]).rstrip("s")) < 3 * loop.SCHEDULE_S
    assert unquote(first(first(container["dynamic"])["env"]["for_each"])) == "${local.submitter_env}"

