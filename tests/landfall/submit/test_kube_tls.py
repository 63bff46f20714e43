"""``landfall.submit.backends.kube`` never talks to a control plane without verifying its certificate."""

from __future__ import annotations

import ast
import base64
import inspect
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from landfall.core.errors import TemporaryError
from landfall.submit.backends import kube

PEM = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"


class _Credentials:
    valid = False
    token = "tok"

    def refresh(self, request: Any) -> None:
        self.valid = True


@pytest.fixture
def adc(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Application Default Credentials replaced; counts the look-ups."""
    import google.auth

    calls: list[int] = []

    def default(scopes: Any = None) -> tuple[_Credentials, str]:
        calls.append(1)
        return _Credentials(), "project"

    monkeypatch.setattr(google.auth, "default", default)
    return calls


@pytest.mark.parametrize("ca", ["", "   "])
def test_endpoint_without_ca_is_a_clear_error(adc: list[int], ca: str) -> None:
    with pytest.raises(ValueError, match="LANDFALL_GKE_CA_CERT"):
        kube.gke_configuration("1.2.3.4", ca)
    assert adc == []  # refused before any credential is fetched or token sent


def test_api_client_without_ca_is_a_temporary_error(adc: list[int]) -> None:
    with pytest.raises(TemporaryError, match="CA certificate"):
        kube.api_client("1.2.3.4", "")
    assert adc == []


@pytest.mark.parametrize("encoding", ["pem", "base64", "path"])
def test_endpoint_with_ca_verifies(adc: list[int], tmp_path: Path, encoding: str) -> None:
    path = tmp_path / "ca.pem"
    path.write_text(PEM)
    ca = {"pem": PEM, "base64": base64.b64encode(PEM.encode()).decode(), "path": str(path)}[encoding]
    conf = kube.gke_configuration("1.2.3.4", ca)
    assert conf.verify_ssl is True
    assert Path(conf.ssl_ca_cert).read_text() == PEM
    assert conf.host == "https://1.2.3.4"
    assert conf.api_key["authorization"] == "tok"


def test_in_cluster_configuration_still_used(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded: list[int] = []
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setattr(kube.k8s_config, "load_incluster_config", lambda: loaded.append(1))
    assert isinstance(kube.api_client(), k8s.ApiClient)
    assert loaded == [1]


def test_kubeconfig_still_used(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    cfg = tmp_path / "config"
    cfg.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://example.invalid:6443'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    client = kube.api_client(kubeconfig=str(cfg))
    assert client.configuration.host == "https://example.invalid:6443"
    assert client.configuration.verify_ssl is True


def test_source_never_turns_verification_off() -> None:
    tree = ast.parse(inspect.getsource(kube))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Attribute) and target.attr == "verify_ssl":
                    assert not (isinstance(node.value, ast.Constant) and node.value.value is False), ast.dump(node)
        if isinstance(node, ast.keyword) and node.arg == "verify_ssl":
            assert not (isinstance(node.value, ast.Constant) and node.value.value is False), ast.dump(node)
