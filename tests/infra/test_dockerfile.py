"""trainer/Dockerfile: hadolint clean, and the image conventions the TFJob relies on."""

from __future__ import annotations

import re

from .tools import REPO, run, tool

DOCKERFILE = REPO / "trainer" / "Dockerfile"


def test_hadolint() -> None:
    proc = run([tool("hadolint"), "--no-color", str(DOCKERFILE)])
    assert proc.returncode == 0, f"hadolint:\n{proc.stdout}{proc.stderr}"


def test_image_conventions() -> None:
    text = DOCKERFILE.read_text()
    # The base image's TensorFlow is the minor pyproject.toml's trainer extra pins (they move together): pip then
    # finds tensorflow satisfied and adds only tf-keras of the same minor.
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (pin,) = [d for d in extras["trainer"] if d.startswith("tensorflow")]
    low = re.fullmatch(r"tensorflow>=(\d+)\.(\d+),<\d+\.\d+", pin)
    assert low, pin
    (tag,) = re.findall(r"^FROM tensorflow/tensorflow:(\d+)\.(\d+)\.\d+-gpu$", text, re.M)
    assert tag == low.groups(), (tag, pin)
    assert [d for d in extras["cpu"] if d.startswith("tensorflow-cpu")] == [pin.replace("tensorflow", "tensorflow-cpu")]
    assert "TF_USE_LEGACY_KERAS=1" in text
    assert 'pip install --no-cache-dir ".[trainer]"' in text
    assert re.search(r"^USER 10001(:10001)?$", text, re.M)  # non-root, matches the pods' runAsUser
    assert 'ENTRYPOINT ["python", "-m", "trainer.task"]' in text
    for line in text.splitlines():
        assert not line.startswith("# hadolint ignore") or "DL3013" in line  # the one documented exception


def test_dockerignore_keeps_the_context_small() -> None:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    assert next(ln for ln in lines if ln and not ln.startswith("#")) == "*"
    assert {"!pyproject.toml", "!functions/landfall/", "!trainer/"} <= set(lines)
