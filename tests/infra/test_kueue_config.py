"""k8s/kueue-config: the Kueue configuration a cluster needs to queue Landfall's TFJobs. Kueue v0.19 and v0.20 no longer
enables ``kubeflow.org/tfjob`` by default (its shipped ``controller_manager_config.yaml``, copied into
tests/infra/crds/kueue, comments it out) and deprecates it; ``jobset.x-k8s.io/jobset`` stays enabled. The
patch renders to Kueue's ConfigMap and is exactly Kueue's default with that one framework added back, in the
shape of Kueue's reference config (no key Kueue's file does not have, same types)."""

from __future__ import annotations

import copy
import re
from typing import Any

import yaml

from .tools import K8S, find, render_dir

REFERENCE = K8S.parent / "tests" / "infra" / "crds" / "kueue" / "controller_manager_config.yaml"
PATCH = K8S / "kueue-config"
# Kueue's docs, read 2026-12-01: https://kueue.sigs.k8s.io/docs/reference/kueue-config.v1beta2/ (Configuration,
# integrations.frameworks) and the v0.19 release notes (kueue PR #12606: "kubeflow.org/tfjob" off by default,
# deprecated, removal planned for about v0.20). v0.20 still ships it, deprecated and off: its
# site/content/en/docs/tasks/run/kubeflow/tfjobs.md keeps the deprecation notice, its controller_manager_config.yaml
# (tests/infra/crds/kueue, the v0.20 line: tests/infra/crds/README.md) lists it commented out.
# The ConfigMap and its key are those of Kueue's release manifests
# (config/components/manager/kustomization.yaml: configMapGenerator kueue-manager-config, namespace kueue-system).
KUEUE = {
    "api_version": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "configmap": ("kueue-system", "kueue-manager-config"),
    "key": "controller_manager_config.yaml",
    "tfjob": "kubeflow.org/tfjob",
    "jobset": "jobset.x-k8s.io/jobset",
}


def reference() -> dict[str, Any]:
    return yaml.safe_load(REFERENCE.read_text())


def known_frameworks() -> set[str]:
    """Every integration Kueue's shipped file names, enabled or commented out."""
    return set(re.findall(r'^\s*#?\s*-\s*"([^"]+)"\s*$', REFERENCE.read_text(), re.M))


def shape_errors(ours: Any, theirs: Any, where: str = "") -> list[str]:
    """Keys of ``ours`` that Kueue's reference config lacks, or whose type differs from the reference's."""
    if isinstance(theirs, dict):
        if not isinstance(ours, dict):
            return [f"{where or '<root>'}: not an object"]
        out = []
        for k, v in ours.items():
            if k not in theirs:
                out.append(f"{where}.{k}: not in Kueue's config")
            else:
                out += shape_errors(v, theirs[k], f"{where}.{k}")
        return out
    return [] if type(ours) is type(theirs) else [f"{where}: {type(ours).__name__}, not {type(theirs).__name__}"]


def rendered_config() -> dict[str, Any]:
    ns, name = KUEUE["configmap"]
    cm = find(render_dir(PATCH), "ConfigMap", name)
    assert cm["metadata"]["namespace"] == ns and list(cm["data"]) == [KUEUE["key"]]
    return yaml.safe_load(cm["data"][KUEUE["key"]])


def test_kueues_default_queues_jobsets_but_not_tfjobs() -> None:
    ref = reference()
    assert (ref["apiVersion"], ref["kind"]) == (KUEUE["api_version"], KUEUE["kind"])
    assert KUEUE["jobset"] in ref["integrations"]["frameworks"]
    assert KUEUE["tfjob"] not in ref["integrations"]["frameworks"]
    assert KUEUE["tfjob"] in known_frameworks()


def test_the_patch_is_kueues_default_plus_the_tfjob_integration() -> None:
    ours, ref = rendered_config(), reference()
    assert shape_errors(ours, ref) == []
    assert set(ours["integrations"]["frameworks"]) <= known_frameworks()
    want = copy.deepcopy(ref)
    want["integrations"]["frameworks"].append(KUEUE["tfjob"])
    assert sorted(ours["integrations"].pop("frameworks")) == sorted(want["integrations"].pop("frameworks"))
    assert ours == want  # nothing else differs from Kueue's shipped default


def test_the_shape_check_catches_mistakes() -> None:
    ref = reference()
    typo = copy.deepcopy(ref)
    typo["integration"] = {"frameworks": [KUEUE["tfjob"]]}
    assert shape_errors(typo, ref)
    wrong = copy.deepcopy(ref)
    wrong["integrations"]["frameworks"] = KUEUE["tfjob"]  # a string, not a list
    assert shape_errors(wrong, ref)
    assert "kubeflow.org/tfjobs" not in known_frameworks()


def test_the_readme_says_so() -> None:
    text = (K8S / "README.md").read_text()
    assert "v0.20" in text and KUEUE["tfjob"] in text and "deprecated" in text
    assert "k8s/kueue-config" in text and "managerConfig.controllerManagerConfigYaml" in text
    assert "v0.15" not in text
