"""cloudbuild.yaml (tests, as landfall-test) and cloudbuild-deploy.yaml (deploy, as landfall-build): valid for
Cloud Build, every substitution declared with a default, builders pinned; the test build deploys nothing, the
deploy build runs only for a tested commit, and the triggers in infra/modules/triggers run each as its account."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from .tools import INFRA, REPO, expr_text, load_hcl, run, tool, unquote

RELEASES = json.loads((Path(__file__).parent / "upstream_releases.json").read_text())["repositories"]

CLOUDBUILD = REPO / "cloudbuild.yaml"
DEPLOY = REPO / "cloudbuild-deploy.yaml"
CONFIGS = [CLOUDBUILD, DEPLOY]
BUILTINS = {"PROJECT_ID", "PROJECT_NUMBER", "BUILD_ID", "LOCATION", "TRIGGER_NAME", "COMMIT_SHA", "SHORT_SHA",
            "REVISION_ID", "BRANCH_NAME", "TAG_NAME", "REPO_NAME", "REPO_FULL_NAME", "SERVICE_ACCOUNT_EMAIL",
            "SERVICE_ACCOUNT", "TRIGGER_BUILD_CONFIG_PATH", "REF_NAME"}
# $X or ${X}, not $$X (an escaped dollar that reaches the shell).
SUBST_RE = re.compile(r"(?<!\$)(?:\$\$)*\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def _config(path: Path = CLOUDBUILD) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def _used(text: str) -> set[str]:
    return {a or b for a, b in SUBST_RE.findall(text)}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_schema(path: Path) -> None:
    proc = run([tool("check-jsonschema"), "--builtin-schema", "vendor.cloudbuild", str(path)])
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_user_substitution_is_declared_with_a_default(path: Path) -> None:
    cfg = _config(path)
    declared = cfg.get("substitutions", {})
    used = _used(path.read_text())
    user = {u for u in used if u.startswith("_")}
    assert user, "expected user substitutions"
    assert user <= set(declared), f"undeclared: {sorted(user - set(declared))}"
    assert all(str(v) != "" for v in declared.values())
    assert set(declared) <= user, f"declared but unused (MUST_MATCH fails): {sorted(set(declared) - user)}"
    assert used - user <= BUILTINS, f"unknown substitutions: {sorted(used - user - BUILTINS)}"


def test_substitution_regex() -> None:
    assert _used("a $$HOME ${_X} $_Y $PROJECT_ID $${SHELL}") == {"_X", "_Y", "PROJECT_ID"}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_builder_images_are_pinned(path: Path) -> None:
    cfg = _config(path)
    subs = cfg["substitutions"]
    for step in cfg["steps"]:
        name = step["name"]
        for key, value in subs.items():
            name = name.replace("${" + key + "}", str(value))
        assert "$" not in name, name
        assert "@sha256:" in name or re.search(r":[\w.-]*\d[\w.-]*$", name), f"unpinned builder: {name}"
        assert not name.endswith(":latest")


def _version(tag: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", tag))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_terraform_is_the_newest_release(path: Path) -> None:
    """Both builds run the same Terraform CLI: the newest release tag of hashicorp/terraform as recorded."""
    image = str(_config(path)["substitutions"]["_TERRAFORM_IMAGE"])
    match = re.fullmatch(r"hashicorp/terraform:(\d+\.\d+\.\d+)", image)
    assert match, image
    released = RELEASES["hashicorp/terraform"]["released"]
    assert f"v{match.group(1)}" in released, f"{image}: not a released tag"
    assert f"v{match.group(1)}" == max(released, key=_version), (image, max(released, key=_version))
    assert f"tag v{match.group(1)} of {released['v' + match.group(1)]}" in path.read_text()


DEPLOY_COMMANDS = ("docker push", "docker build", "terraform apply", "kubectl apply", "get-credentials",
                   "gcloud functions", "gcloud run", "gcloud pubsub")


def test_test_build_only_tests() -> None:
    """Runs as landfall-test: copies the pinned tools, runs `make test`, and deploys nothing."""
    steps = {s["id"]: s for s in _config()["steps"]}
    assert list(steps)[-1] == "test"
    assert "make test" in steps["test"]["args"][-1]
    for step_id in steps:
        assert step_id == "test" or step_id.startswith("tools-"), step_id
    text = CLOUDBUILD.read_text()
    assert not [c for c in DEPLOY_COMMANDS if c in text]


def test_deploy_build_runs_only_for_the_tested_commit() -> None:
    steps = {s["id"]: s for s in _config(DEPLOY)["steps"]}
    order = list(steps)
    assert order[0] == "tested"
    guard = steps["tested"]["args"][-1]
    assert '"${COMMIT_SHA}" = "${_TESTED_SHA}"' in guard and '"${_BUILD_STATUS}" = SUCCESS' in guard

    def waits_for_guard(step_id: str) -> bool:
        deps = steps[step_id].get("waitFor", [])
        return "tested" in deps or any(waits_for_guard(d) for d in deps if d in steps)

    for step_id in order[1:]:
        assert waits_for_guard(step_id), f"{step_id} does not wait for the tested-commit check"
    # No repository tests or PyPI installs under the deploy account.
    text = DEPLOY.read_text()
    assert "make test" not in text and "pip install" not in text


def test_pipeline_does_what_the_readme_says() -> None:
    steps = {s["id"]: " ".join(map(str, s.get("args", []))) for s in _config(DEPLOY)["steps"]}
    assert "docker build -f trainer/Dockerfile" in steps["build-push"]
    assert "${SHORT_SHA}" in steps["build-push"]
    assert "terraform apply" in steps["deploy-functions"]
    assert "trainer_image_tag=${SHORT_SHA}" in steps["deploy-functions"]
    assert "infra/envs/${_ENV}/functions" in steps["deploy-functions"]
    assert "../k8s/overlays/${_ENV}" in steps["deploy-manifests"]
    assert "kubectl apply" in steps["deploy-manifests"]
    assert "sed " not in DEPLOY.read_text()
    # k8s/base/project.env: every key the base's replacements read (the reconciler's project and bucket).
    for key in ("GSA_DOMAIN=", "PROJECT_ID=", "BUCKET=", "TRAINER_IMAGE="):
        assert key in steps["deploy-manifests"], key
    assert "terraform output -raw bucket_name > /workspace/bucket_name" in steps["deploy-functions"]
    # The scorer service's image: built, pushed to the same repository, tagged alike, and passed to the apply.
    assert "docker build -f scorer/Dockerfile" in steps["build-push-scorer"]
    assert "/scorer:${SHORT_SHA}" in steps["build-push-scorer"] and "docker push" in steps["build-push-scorer"]
    assert "scorer_image_tag=${SHORT_SHA}" in steps["deploy-functions"]
    waits = {s["id"]: s.get("waitFor", []) for s in _config(DEPLOY)["steps"]}
    assert waits["build-push-scorer"] == ["tested"] and "build-push-scorer" in waits["deploy-functions"]
    assert "/workspace/bucket_name" in steps["deploy-manifests"]


def _triggers() -> dict[str, dict[str, Any]]:
    doc = load_hcl(INFRA / "modules" / "triggers" / "main.tf")
    out: dict[str, dict[str, Any]] = {}
    for block in doc["resource"]:
        for kind, named in block.items():
            if kind.strip('"') == "google_cloudbuild_trigger":
                for name, body in named.items():
                    out[name.strip('"')] = body
    return out


def test_triggers_run_each_config_as_its_own_account() -> None:
    triggers = _triggers()
    assert set(triggers) == {"test", "deploy"}
    test, deploy = triggers["test"], triggers["deploy"]
    assert unquote(test["filename"]) == CLOUDBUILD.name
    assert "var.test_service_account" in expr_text(test["service_account"])
    git_file = deploy["git_file_source"]
    git_file = git_file[0] if isinstance(git_file, list) else git_file
    assert unquote(git_file["path"]) == DEPLOY.name
    assert "var.deploy_service_account" in expr_text(deploy["service_account"])
    # The deploy trigger fires on the test trigger's successful builds only.
    flt = expr_text(deploy["filter"])
    assert "SUCCESS" in flt and "google_cloudbuild_trigger.test[0].trigger_id" in flt
    subs = deploy["substitutions"]
    subs = subs[0] if isinstance(subs, list) else subs
    declared = set(_config(DEPLOY)["substitutions"])
    assert set(subs) <= declared, set(subs) - declared
    platform = load_hcl(INFRA / "modules" / "platform" / "main.tf")
    calls = {k.strip('"'): v for block in platform["module"] for k, v in block.items()}
    assert 'module.iam.emails["test"]' in expr_text(calls["triggers"]["test_service_account"])
    assert 'module.iam.emails["build"]' in expr_text(calls["triggers"]["deploy_service_account"])


def test_project_env_keys_match_the_kustomization() -> None:
    base = REPO / "k8s" / "base"
    keys = {line.split("=", 1)[0] for line in (base / "project.env").read_text().splitlines() if line.strip()}
    kustomization = yaml.safe_load((base / "kustomization.yaml").read_text())
    used = {r["source"]["fieldPath"].removeprefix("data.") for r in kustomization["replacements"]
            if r["source"]["name"] == "landfall-project"}
    assert used == keys
    written = re.search(r"printf '([^']*)'", DEPLOY.read_text()).group(1)
    assert {k.split("=", 1)[0] for k in written.split("\\n") if k} == keys


@pytest.mark.parametrize("engine", ["jobset", "tfjob", "vertex"])
def test_the_manifests_step_reaches_a_cluster_only_when_there_is_one(engine: str, tmp_path: Path) -> None:
    """The deploy-manifests step's own script, run with the engine the functions root reported
    (`terraform output -raw engine`) and stand-ins for gcloud and kubectl that log their calls: with the vertex
    engine (no cluster) it calls neither and succeeds; with a cluster engine it gets the cluster's credentials and
    applies the rendered overlay."""
    import os
    import subprocess

    steps = {s["id"]: s for s in _config(DEPLOY)["steps"]}
    assert "terraform output -raw engine > /workspace/engine" in steps["deploy-functions"]["args"][-1]
    workspace, bin_dir, calls = tmp_path / "workspace", tmp_path / "bin", tmp_path / "calls"
    workspace.mkdir()
    bin_dir.mkdir()
    (workspace / "engine").write_text(engine)
    (workspace / "bucket_name").write_text("landfall-dev-data")
    (tmp_path / "k8s" / "base").mkdir(parents=True)
    for tool_name, out in (("gcloud", "sha256:" + "0" * 64), ("kubectl", "")):
        path = bin_dir / tool_name
        path.write_text(f'#!/bin/sh\necho "{tool_name} $*" >> {calls}\necho "{out}"\n')
        path.chmod(0o755)
    script = steps["deploy-manifests"]["args"][-1].replace("$$", "$").replace("/workspace", str(workspace))
    for name, value in {"_REGION": "europe-west1", "PROJECT_ID": "landfall-dev", "_AR_REPO": "landfall",
                        "SHORT_SHA": "abc1234", "_ENV": "dev"}.items():
        script = script.replace("${" + name + "}", value)
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr
    made = calls.read_text().splitlines() if calls.exists() else []
    if engine == "vertex":
        assert made == [] and "no cluster" in done.stdout
    else:
        assert any(c.startswith("gcloud container clusters get-credentials landfall-dev") for c in made), made
        assert any(c.startswith("kubectl apply -f") for c in made), made
