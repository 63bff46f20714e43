"""trainer/Dockerfile and scorer/Dockerfile: hadolint clean, and the image conventions the TFJob and the scorer
service rely on (converter/Dockerfile: tests/infra/test_convert_job.py)."""

from __future__ import annotations

import json
import re

import pytest

from .tools import REPO, run, tool

DOCKERFILE = REPO / "trainer" / "Dockerfile"
SCORER = REPO / "scorer" / "Dockerfile"


@pytest.mark.parametrize("path", [DOCKERFILE, SCORER], ids=lambda p: p.parent.name)
def test_hadolint(path) -> None:
    proc = run([tool("hadolint"), "--no-color", str(path)])
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


def test_scorer_image_conventions() -> None:
    """The Cloud Run service landfall-scorer: python slim as the converter's; the generated requirements (the base
    set and the ``scorer`` extra: TensorFlow for CPU) installed, then the landfall package alone on PYTHONPATH, never
    the trainer or bench/ (issue #66); scorer/main.py at a fixed path, non-root, and functions-framework serving
    on_score_request as a CloudEvent function on $PORT."""
    text = SCORER.read_text()
    (base,) = re.findall(r"^FROM (\S+)$", text, re.M)
    assert base == re.findall(r"^FROM (\S+)$", (REPO / "converter" / "Dockerfile").read_text(), re.M)[0]
    assert re.fullmatch(r"python:3\.11\.\d+-slim-\w+", base), base
    assert "COPY scorer/requirements.txt ./" in text and "pip install --no-cache-dir -r requirements.txt" in text
    assert "COPY functions/landfall /opt/landfall/lib/landfall" in text and "PYTHONPATH=/opt/landfall/lib" in text
    copied = re.findall(r"^COPY (\S+)", text, re.M)
    assert not [c for c in copied if c.startswith(("trainer", "bench", "."))], copied
    assert "COPY scorer/main.py /opt/landfall/scorer/main.py" in text
    assert re.search(r"^USER 10001(:10001)?$", text, re.M)
    (entry,) = re.findall(r"^ENTRYPOINT (.+)$", text, re.M)
    argv = json.loads(entry)
    assert argv[:2] == ["/bin/sh", "-c"] and argv[2].startswith("exec functions-framework ")
    assert argv[2].split()[2:] == ["--source", "/opt/landfall/scorer/main.py", "--target", "on_score_request",
                                   "--signature-type", "cloudevent", "--port", '"${PORT:-8080}"']
    for line in text.splitlines():
        assert not line.startswith("# hadolint ignore") or "DL3013" in line


def test_dockerignore_keeps_the_context_small() -> None:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    assert next(ln for ln in lines if ln and not ln.startswith("#")) == "*"
    wanted = {"!pyproject.toml", "!functions/landfall/", "!trainer/", "!scorer/main.py", "!scorer/requirements.txt"}
    assert wanted <= set(lines)
