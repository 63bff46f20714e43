"""checkov over infra/ and k8s/ (offline: --skip-download): no failed check, and every skip explains why."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from .tools import INFRA, K8S, REPO, run, tool

SKIP_TF = re.compile(r"checkov:skip=([A-Z0-9_]+)(?::(.*))?")
SKIP_K8S = re.compile(r"checkov\.io/skip\d+:\s*([A-Z0-9_]+)(?:=(.*))?")


@pytest.fixture(scope="session")
def checkov_reports() -> list[dict[str, Any]]:
    proc = run(
        [tool("checkov"), "-d", "infra", "-d", "k8s", "--skip-download", "--quiet", "--compact", "-o", "json"],
        cwd=REPO,
        timeout=600,
    )
    reports: list[dict[str, Any]] = []
    decoder, text, pos = json.JSONDecoder(), proc.stdout, 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        doc, pos = decoder.raw_decode(text, pos)
        reports += doc if isinstance(doc, list) else [doc]
    assert reports, f"checkov produced no report (rc {proc.returncode}):\n{proc.stderr[-3000:]}"
    return reports


def test_checkov_has_no_failed_checks(checkov_reports: list[dict[str, Any]]) -> None:
    failed = [
        f"{r['check_type']}: {c['check_id']} {c['resource']} ({c['file_path']})"
        for r in checkov_reports
        for c in r.get("results", {}).get("failed_checks", [])
    ]
    assert not failed, "checkov failures:\n" + "\n".join(failed)
    for report in checkov_reports:
        assert report["summary"]["parsing_errors"] == 0, report["summary"]


def test_checkov_scanned_every_framework(checkov_reports: list[dict[str, Any]]) -> None:
    passed = {r["check_type"]: r["summary"]["passed"] for r in checkov_reports}
    for framework in ("terraform", "kubernetes", "kustomize"):
        assert passed.get(framework, 0) > 0, f"checkov ran no {framework} checks: {passed}"


def test_every_skip_carries_a_reason() -> None:
    skips = 0
    for path in sorted(INFRA.rglob("*.tf")):
        for line in path.read_text().splitlines():
            if m := SKIP_TF.search(line):
                skips += 1
                assert m.group(2) and len(m.group(2).strip()) > 15, f"{path}: {line.strip()}"
    for path in sorted(K8S.rglob("*.yaml")):
        for line in path.read_text().splitlines():
            if m := SKIP_K8S.search(line):
                skips += 1
                assert m.group(2) and len(m.group(2).strip()) > 15, f"{path}: {line.strip()}"
    assert skips > 0
