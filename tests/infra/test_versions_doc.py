"""docs/versions.md says which release of the provider and of the CLI is the newest, which one is used, and why.

The pins follow the newest release whose tag is in the stored snapshot (``released`` in ``upstream_releases.json``;
test_provider_schema.py and test_cloudbuild.py hold them there). Releases reported after the snapshot are recorded
apart (``after_snapshot``): they cannot be read here, so no pin names them, and the page must say so.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RELEASES = json.loads((Path(__file__).parent / "upstream_releases.json").read_text())["repositories"]
PAGE = (REPO / "docs" / "versions.md").read_text()
REPOS = ("hashicorp/terraform-provider-google", "hashicorp/terraform")


def _version(tag: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", tag))


def _newest(tags) -> str:
    return max(tags, key=_version)


def _pins() -> dict[str, str]:
    image = re.search(r"_TERRAFORM_IMAGE: hashicorp/terraform:(\S+)", (REPO / "cloudbuild.yaml").read_text()).group(1)
    tf = (REPO / "infra" / "envs" / "dev" / "platform" / "versions.tf").read_text()
    provider = re.search(r'version\s*=\s*"~>\s*(\d+\.\d+\.\d+)"', tf).group(1)
    return {"hashicorp/terraform": image, "hashicorp/terraform-provider-google": provider}


def test_releases_after_the_snapshot_are_recorded_apart_and_newer() -> None:
    for repo in REPOS:
        entry = RELEASES[repo]
        after = entry["after_snapshot"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", after["read"]) and after["how"], repo
        assert after["reported"] and all(after["reported"].values()), repo
        # Once a snapshot holds one of them, it is a readable release: move it to `released` and move the pin.
        both = set(after["reported"]) & set(entry["released"])
        assert not both, (repo, both)
        newest_readable = _newest(entry["released"])
        assert all(_version(t) > _version(newest_readable) for t in after["reported"]), (repo, newest_readable)
        assert after["refs_in_snapshot"], repo


def test_the_page_names_the_newest_release_the_one_used_and_why() -> None:
    pins = _pins()
    head = PAGE.split("## Where each version was read")[0]
    for repo, pin in pins.items():
        assert f"v{pin}" == _newest(RELEASES[repo]["released"]), (repo, pin)
        newest_reported = _newest(RELEASES[repo]["after_snapshot"]["reported"]).lstrip("v")
        short = re.sub(r"\.0$", "", newest_reported)
        assert newest_reported in head or short in head, f"docs/versions.md does not name {repo} {newest_reported}"
        assert f"**{pin}**" in head, f"docs/versions.md does not say {pin} is used"
    assert "## Why not the newest release" in PAGE
    why = PAGE.split("## Why not the newest release")[1].split("\n## ")[0]
    for repo in pins:
        for ref, what in RELEASES[repo]["after_snapshot"]["refs_in_snapshot"].items():
            assert f"`{ref}`" in why and what[:12] in why, f"docs/versions.md: {repo} ref {ref} ({what[:12]}) not named"
