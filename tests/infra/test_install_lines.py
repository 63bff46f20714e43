"""Every install line the docs give an operator names a release that exists upstream (issue #49).

The upstream release lists are recorded data (``upstream_releases.json``: each repository's tags as its stored snapshot
has them, the snapshot's head and date, and when they were read), not what the docs believe. A line naming a tag
that was never released (a version announced but not tagged, a ``-devel`` marker) fails here, before an operator's
``kubectl apply`` does. The CRDs the tests check against come from the same tag as the Kueue install line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RELEASES = json.loads((Path(__file__).parent / "upstream_releases.json").read_text())
RENAMED = {"kubeflow/training-operator": "kubeflow/trainer"}  # GitHub redirects the old name
DOWNLOAD = re.compile(r"github\.com/([\w.-]+/[\w.-]+?)(?:\.git)?/releases/download/([^/\s)\"'`]+)/")
KUSTOMIZE_REF = re.compile(r"github\.com/([\w.-]+/[\w.-]+?)\.git/[^\s)\"'`?]*\?ref=([^\s)\"'`&]+)")


def install_lines(text: str) -> list[tuple[str, str]]:
    found = [(m.group(1), m.group(2)) for rx in (DOWNLOAD, KUSTOMIZE_REF) for m in rx.finditer(text)]
    return [(RENAMED.get(repo, repo), tag) for repo, tag in found]


def newest(released: dict[str, str]) -> str:
    return max(released, key=lambda t: tuple(int(x) for x in re.findall(r"\d+", t)))


def pages() -> list[Path]:
    return [REPO / "README.md", REPO / "k8s" / "README.md", REPO / "infra" / "README.md",
            *sorted((REPO / "docs").glob("*.md"))]


def test_every_install_line_names_a_released_tag():
    seen = []
    for page in pages():
        for repo, tag in install_lines(page.read_text()):
            assert repo in RELEASES["repositories"], f"{page.name}: {repo} has no recorded release list"
            released = RELEASES["repositories"][repo]["released"]
            assert tag in released, f"{page.name}: {repo} {tag} is not a released tag (newest: {newest(released)})"
            seen.append((repo, tag))
    assert {r for r, _ in seen} == {"kubernetes-sigs/kueue", "kubernetes-sigs/jobset", "kubeflow/trainer"}, seen


def test_the_kueue_line_is_the_newest_release_and_the_crds_are_its():
    (tag,) = {t for p in pages() for r, t in install_lines(p.read_text()) if r == "kubernetes-sigs/kueue"}
    assert tag == newest(RELEASES["repositories"]["kubernetes-sigs/kueue"]["released"]), tag
    assert f"tag `{tag}`" in (REPO / "tests" / "infra" / "crds" / "README.md").read_text()


def test_the_check_catches_an_unreleased_tag():
    text = ("kubectl apply -f https://github.com/kubernetes-sigs/kueue/releases/download/v0.20.0/manifests.yaml\n"
            'kubectl apply -k "github.com/kubeflow/training-operator.git/manifests/overlays/standalone?ref=v1.9.4"\n')
    lines = install_lines(text)
    assert lines == [("kubernetes-sigs/kueue", "v0.20.0"), ("kubeflow/trainer", "v1.9.4")]
    assert "v0.20.0" not in RELEASES["repositories"]["kubernetes-sigs/kueue"]["released"]
    assert "v1.9.4" in RELEASES["repositories"]["kubeflow/trainer"]["released"]
    for repo in RELEASES["repositories"].values():
        assert repo["snapshot_head"] and repo["snapshot_date"] and repo["source"].startswith("https://github.com/")
    assert RELEASES["read"] and RELEASES["how"]
