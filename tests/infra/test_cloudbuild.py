"""cloudbuild.yaml: valid for Cloud Build, every substitution declared with a default, builders pinned,
tests before anything is built or deployed."""

from __future__ import annotations

import re
from typing import Any

import yaml

from .tools import REPO, run, tool

CLOUDBUILD = REPO / "cloudbuild.yaml"
BUILTINS = {"PROJECT_ID", "PROJECT_NUMBER", "BUILD_ID", "LOCATION", "TRIGGER_NAME", "COMMIT_SHA", "SHORT_SHA",
            "REVISION_ID", "BRANCH_NAME", "TAG_NAME", "REPO_NAME", "REPO_FULL_NAME", "SERVICE_ACCOUNT_EMAIL",
            "SERVICE_ACCOUNT", "TRIGGER_BUILD_CONFIG_PATH", "REF_NAME"}
# $X or ${X}, not $$X (an escaped dollar that reaches the shell).
SUBST_RE = re.compile(r"(?<!\$)(?:\$\$)*\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def _config() -> dict[str, Any]:
    return yaml.safe_load(CLOUDBUILD.read_text())


def _used(text: str) -> set[str]:
    return {a or b for a, b in SUBST_RE.findall(text)}


def test_schema() -> None:
    proc = run([tool("check-jsonschema"), "--builtin-schema", "vendor.cloudbuild", str(CLOUDBUILD)])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_user_substitution_is_declared_with_a_default() -> None:
    cfg = _config()
    declared = cfg.get("substitutions", {})
    used = _used(CLOUDBUILD.read_text())
    user = {u for u in used if u.startswith("_")}
    assert user, "expected user substitutions"
    assert user <= set(declared), f"undeclared: {sorted(user - set(declared))}"
    assert all(str(v) != "" for v in declared.values())
    assert set(declared) <= user, f"declared but unused (MUST_MATCH fails): {sorted(set(declared) - user)}"
    assert used - user <= BUILTINS, f"unknown substitutions: {sorted(used - user - BUILTINS)}"


def test_substitution_regex() -> None:
    assert _used("a $$HOME ${_X} $_Y $PROJECT_ID $${SHELL}") == {"_X", "_Y", "PROJECT_ID"}


def test_builder_images_are_pinned() -> None:
    cfg = _config()
    subs = cfg["substitutions"]
    for step in cfg["steps"]:
        name = step["name"]
        for key, value in subs.items():
            name = name.replace("${" + key + "}", str(value))
        assert "$" not in name, name
        assert "@sha256:" in name or re.search(r":[\w.-]*\d[\w.-]*$", name), f"unpinned builder: {name}"
        assert not name.endswith(":latest")


def test_tests_gate_build_and_deploy() -> None:
    steps = {s["id"]: s for s in _config()["steps"]}
    order = list(steps)
    test = order.index("test")
    assert "make test" in steps["test"]["args"][-1]
    for before in order[:test]:  # only copy pinned tool binaries into the workspace
        assert before.startswith("tools-"), before

    def waits_for_test(step_id: str) -> bool:
        deps = steps[step_id].get("waitFor", [])
        return "test" in deps or any(waits_for_test(d) for d in deps if d in steps)

    for step_id in order[test + 1:]:
        assert waits_for_test(step_id), f"{step_id} does not wait for the tests"


def test_pipeline_does_what_the_readme_says() -> None:
    steps = {s["id"]: " ".join(map(str, s.get("args", []))) for s in _config()["steps"]}
    assert "docker build -f trainer/Dockerfile" in steps["build-push"]
    assert "${SHORT_SHA}" in steps["build-push"]
    assert "terraform apply" in steps["deploy-functions"]
    assert "trainer_image_tag=${SHORT_SHA}" in steps["deploy-functions"]
    assert "infra/envs/${_ENV}/functions" in steps["deploy-functions"]
    assert "../k8s/overlays/${_ENV}" in steps["deploy-manifests"]
    assert "kubectl apply" in steps["deploy-manifests"]
    assert "sed " not in CLOUDBUILD.read_text()
    # k8s/base/project.env: every key the base's replacements read (the reconciler's project and bucket).
    for key in ("GSA_DOMAIN=", "PROJECT_ID=", "BUCKET="):
        assert key in steps["deploy-manifests"], key
    assert "terraform output -raw bucket_name > /workspace/bucket_name" in steps["deploy-functions"]
    assert "/workspace/bucket_name" in steps["deploy-manifests"]


def test_project_env_keys_match_the_kustomization() -> None:
    base = REPO / "k8s" / "base"
    keys = {line.split("=", 1)[0] for line in (base / "project.env").read_text().splitlines() if line.strip()}
    kustomization = yaml.safe_load((base / "kustomization.yaml").read_text())
    used = {r["source"]["fieldPath"].removeprefix("data.") for r in kustomization["replacements"]
            if r["source"]["name"] == "landfall-project"}
    assert used == keys
    written = re.search(r"printf '([^']*)'", CLOUDBUILD.read_text()).group(1)
    assert {k.split("=", 1)[0] for k in written.split("\\n") if k} == keys
