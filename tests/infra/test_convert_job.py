"""The Cloud Run job that converts large arrivals (issue #15), over the parsed Terraform and the deploy build:
its own account, which holds the converter function's object rights and publish on the request topic and
nothing else; the converter may run that one job with overrides (a grant on the job, nothing project-wide);
the deployer's rights name that job only; the deploy build builds the job's image; the job's environment is
what the tasks' configuration reads; the function's figures agree with the routing's."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import yaml

from .test_function_env import function_environments
from .test_policy import iam_grants
from .test_terraform import load_module
from .tools import INFRA, REPO, blocks, expr_text, first, labelled, load_hcl, run, tool, unquote

FUNCTIONS = INFRA / "modules" / "functions"
IAM = INFRA / "modules" / "iam"


def _resource(path, kind: str, name: str) -> dict[str, Any]:
    for block in blocks(load_hcl(path), "resource"):
        for k, named in block.items():
            if k.strip('"') == kind:
                for n, body in named.items():
                    if n.strip('"') == name:
                        return body
    raise AssertionError(f"{path}: no {kind}.{name}")


def _grants_of(account: str) -> list[tuple[str, str, str, str]]:
    """(kind, role, resource, condition) of every grant whose member is ``sa["account"]``."""
    out = []
    for _, kind, _name, body in iam_grants():
        if f'sa["{account}"]' not in expr_text(body.get("member", "")):
            continue
        # python-hcl2 gives toset(["a", "b"]) as '${toset(["a", "b"])}': the names are the words inside the brackets
        each = re.findall(r'[\w-]+', expr_text(body["for_each"]).split("[", 1)[1]) if "for_each" in body else [None]
        for prefix in each:
            cond = first(body.get("condition", {})) or {}
            expression = expr_text(cond.get("expression", "")) if cond else ""
            if prefix is not None:
                expression = expression.replace("each.key", prefix)
            target = expr_text(body.get("bucket") or body.get("topic") or body.get("project") or "")
            out.append((kind, expr_text(body["role"]), target, expression))
    return out


# Compaction (landfall.arrival.compaction) runs on the job only: compacted/ read and written, snapshots/ read and
# created (objectCreator: never replaced or deleted). tests/infra/test_authorization.py checks the operations.
COMPACTION = [("google_storage_bucket_iam_member", "roles/storage.objectCreator", "${var.bucket_name}",
               '${local.prefix_condition["snapshots"]}'),
              ("google_storage_bucket_iam_member", "roles/storage.objectUser", "${var.bucket_name}",
               '${local.prefix_condition["compacted"]}'),
              ("google_storage_bucket_iam_member", "roles/storage.objectViewer", "${var.bucket_name}",
               '${local.prefix_condition["snapshots"]}')]


# shape.window.length auto (landfall.arrival.autowindow) runs in the function only: it writes the estimate into the
# dataset's spec before it converts or dispatches, so the job reads a number and may not write specs.
WINDOW_ESTIMATE = [("google_storage_bucket_iam_member", "roles/storage.objectUser", "${var.bucket_name}",
                    '${local.prefix_condition["config/datasets"]}')]


def test_the_job_account_mirrors_the_converter_objects_and_publishes_requests() -> None:
    job, fn = sorted(_grants_of("convert-job")), sorted(_grants_of("converter"))
    assert set(WINDOW_ESTIMATE) <= set(fn) and not set(WINDOW_ESTIMATE) & set(job), (fn, job)
    fn = sorted(set(fn) - set(WINDOW_ESTIMATE))
    assert sorted(set(job) - set(COMPACTION)) == fn, f"convert-job {job} != converter {fn} + compaction"
    assert set(COMPACTION) <= set(job), job
    job = [g for g in job if g not in COMPACTION]  # the mirrored part, checked below
    kinds = {(k, r) for k, r, _, _ in job}
    assert kinds == {("google_storage_bucket_iam_member", "roles/storage.objectViewer"),
                     ("google_storage_bucket_iam_member", "roles/storage.objectUser"),
                     ("google_pubsub_topic_iam_member", "roles/pubsub.publisher")}
    writes = sorted(c for k, r, _, c in job if r == "roles/storage.objectUser")
    assert writes == ["${local.prefix_condition[rejected]}", "${local.prefix_condition[tfrecords]}",
                      "${local.prefix_condition[tmp]}"]
    reads = [c for k, r, _, c in job if r == "roles/storage.objectViewer"]
    assert reads == ['${local.prefix_condition["incoming"]} || ${local.list_condition}']


def test_the_job_runs_as_its_own_account_from_the_converter_image() -> None:
    job = _resource(FUNCTIONS / "main.tf", "google_cloud_run_v2_job", "convert")
    outer = first(job["template"])
    inner = first(outer["template"])
    assert expr_text(inner["service_account"]) == "${var.service_accounts.convert-job}"
    assert expr_text(inner["max_retries"]) == "${var.convert_job.max_retries}"
    assert expr_text(outer["parallelism"]) == "${var.convert_job.parallelism}"
    container = first(inner["containers"])
    assert expr_text(container["image"]) == "${var.converter_image}"
    limits = first(first(container["resources"])["limits"])
    assert set(limits) == {"cpu", "memory"}
    for env in ("dev", "prod"):
        root = labelled(load_hcl(INFRA / "envs" / env / "functions" / "main.tf"), "module")["functions"]
        assert expr_text(root["converter_image"]) == "${local.platform.converter_image_base}:${var.converter_image_tag}"
        assert 'service_accounts["convert-job"]' in expr_text(root["service_accounts"]["convert-job"])


def test_the_converter_may_run_only_that_job_with_overrides() -> None:
    on_jobs = {name: body for _, kind, name, body in iam_grants() if kind == "google_cloud_run_v2_job_iam_member"
               and expr_text(body["name"]) == "${google_cloud_run_v2_job.convert.name}"}
    assert set(on_jobs) == {"converter_runs_convert_job", "build_deploys_convert_job"}
    body = on_jobs["converter_runs_convert_job"]
    assert expr_text(body["role"]) == "roles/run.jobsExecutorWithOverrides"
    assert expr_text(body["member"]) == "serviceAccount:${var.service_accounts.converter}"
    assert expr_text(body["name"]) == "${google_cloud_run_v2_job.convert.name}"
    # No Cloud Run role anywhere else for the converter or the job's account, and no project-level run grant at
    # all: the invoker's is on the two functions' services, the deployer's on the job.
    for account in ("converter", "convert-job"):
        assert not [g for g in _grants_of(account) if g[1].startswith("roles/run.")], account
    project_run = {n for _, kind, n, b in iam_grants()
                   if kind == "google_project_iam_member" and ("roles/run." in expr_text(b["role"])
                                                              or "job_deployer" in expr_text(b["role"]))}
    assert project_run == set()


def test_the_deployer_holds_job_rights_on_that_job_only() -> None:
    role = _resource(IAM / "main.tf", "google_project_iam_custom_role", "job_deployer")
    perms = {str(p) for p in first(role["permissions"])} if isinstance(first(role["permissions"]), list) else {
        str(p) for p in role["permissions"]}
    # Update and its IAM only: created and replaced by the administrator's apply, never run by the deployer.
    assert perms == {"run.jobs.get", "run.jobs.getIamPolicy", "run.jobs.setIamPolicy", "run.jobs.update"}
    grant = _resource(FUNCTIONS / "main.tf", "google_cloud_run_v2_job_iam_member", "build_deploys_convert_job")
    assert expr_text(grant["name"]) == "${google_cloud_run_v2_job.convert.name}"  # bound on the job itself
    assert expr_text(grant["role"]) == "${var.deployer_roles.job}"
    assert expr_text(grant["member"]) == "serviceAccount:${var.service_accounts.build}"
    assert "condition" not in grant


def test_the_deploy_build_builds_and_passes_the_converter_image() -> None:
    steps = {s["id"]: s for s in yaml.safe_load((REPO / "cloudbuild-deploy.yaml").read_text())["steps"]}
    build = " ".join(steps["build-push-converter"]["args"])
    assert "docker build -f converter/Dockerfile" in build and "/converter:${SHORT_SHA}" in build
    deploy = steps["deploy-functions"]
    assert "build-push-converter" in deploy["waitFor"]
    assert 'converter_image_tag=${SHORT_SHA}' in " ".join(deploy["args"])
    dockerfile = (REPO / "converter" / "Dockerfile").read_text()
    proc = run([tool("hadolint"), "--no-color", str(REPO / "converter" / "Dockerfile")])
    assert proc.returncode == 0, f"hadolint:\n{proc.stdout}{proc.stderr}"
    assert 'ENTRYPOINT ["python", "-m", "landfall.arrival.task"]' in dockerfile
    assert re.search(r"^USER 10001(:10001)?$", dockerfile, re.M)


def test_job_and_function_environments_are_config_fields_and_agree() -> None:
    from landfall.arrival import route
    from landfall.arrival.config import ConverterConfig
    from landfall.core.contracts.layout import Layout

    fields = {"LANDFALL_" + f.name.upper() for cls in (ConverterConfig, Layout) for f in dataclasses.fields(cls)}
    env_locals = {k: v for b in blocks(load_hcl(FUNCTIONS / "main.tf"), "locals") for k, v in b.items()}
    job_env = {k: str(unquote(v)) for k, v in first(env_locals["convert_job_env"]).items()}
    assert {k for k in job_env if k.startswith("LANDFALL_")} <= fields
    assert job_env["LANDFALL_REQUEST_TOPIC"] == "${var.request_topic_id}"  # the committing task publishes
    fn_env = function_environments()["on_data_arrival"]
    assert fn_env["LANDFALL_CONVERT_JOB"] == "${google_cloud_run_v2_job.convert.id}"
    assert fn_env["LANDFALL_MAX_TASKS"] == "${tostring(var.convert_job.parallelism)}"
    # The routing's ceiling is computed from the function's deployed timeout and CPUs.
    converter = first(load_module(FUNCTIONS).variables["converter"]["default"])
    assert int(converter["timeout_seconds"]) == route.FUNCTION_TIMEOUT_S
    assert float(unquote(converter["cpu"])) == route.FUNCTION_VCPUS
    for src in (route.ENV_BUCKET, route.ENV_NAME, route.ENV_GENERATION):
        assert src not in job_env  # per execution, as overrides
