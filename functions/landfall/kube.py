"""The ``kubernetes`` backend: TFJobs on a real API server (the only module importing the ``kubernetes`` client).

Configuration, first that applies:

1. ``LANDFALL_GKE_ENDPOINT`` (+ ``LANDFALL_GKE_CA_CERT``): a GKE control plane reached from outside the
   cluster (a Cloud Function), authenticated with a Google OAuth token from Application Default
   Credentials (``google-auth``), refreshed before it expires. The service account needs
   ``roles/container.developer`` (or RBAC on ``tfjobs`` in the namespace).
2. In-cluster service-account configuration (``KUBERNETES_SERVICE_HOST`` is set).
3. A kubeconfig (``LANDFALL_KUBECONFIG``, else ``KUBECONFIG``, else ``~/.kube/config``).

Errors keep their retry class: 404 -> ``NotFound``; 409 on create -> ``AlreadyExists`` (callers treat it
as success); 409 on update -> ``backend.Conflict``; 400/422 -> ``Invalid``; 401/403, 429, 5xx, timeouts and
connection errors -> ``TemporaryError`` (a credential or RBAC problem is fixed by an operator, and
the request waits in Pub/Sub, then in the dead-letter topic, instead of being lost).

No kube-apiserver runs on a workstation or in CI, so the tests run this module against
``tests/landfall/fake_kube_api.py``, a small HTTP server that answers like the real TFJob collection.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from landfall import tfjob
from landfall.backend import Conflict
from landfall.errors import AlreadyExists, Invalid, NotFound, PermanentError, TemporaryError
from landfall.tfjob import GROUP, PLURAL, VERSION, JobConfig

REQUEST_TIMEOUT = (5.0, 30.0)  # connect, read (seconds)


def _message(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body).get("message") or exc.reason)
    except (TypeError, ValueError, AttributeError):
        return str(exc.reason)


@contextlib.contextmanager
def mapped_errors(what: str, creating: bool = False) -> Iterator[None]:
    try:
        yield
    except ApiException as exc:
        status, msg = exc.status or 0, _message(exc)
        if status == 404:
            raise NotFound(f"{what}: not found: {msg}") from exc
        if status == 409:
            raise (AlreadyExists if creating else Conflict)(f"{what}: {msg}") from exc
        if status in (400, 422):
            raise Invalid(f"{what}: rejected by the API server: {msg}") from exc
        if status in (401, 403, 408, 429) or status >= 500 or status == 0:
            raise TemporaryError(f"{what}: Kubernetes API unavailable ({status}): {msg}") from exc
        raise PermanentError(f"{what}: Kubernetes API answered {status}: {msg}") from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise TemporaryError(f"{what}: Kubernetes API unreachable: {exc}") from exc


def _ca_file(value: str) -> str:
    """A file path for ``ssl_ca_cert`` from PEM text, base64 of PEM, or a path."""
    if os.path.isfile(value):
        return value
    pem = value if "-----BEGIN" in value else base64.b64decode(value).decode()
    fd, path = tempfile.mkstemp(prefix="landfall-gke-ca-", suffix=".pem")
    with os.fdopen(fd, "w") as fh:
        fh.write(pem)
    return path


def gke_configuration(endpoint: str, ca_cert: str = "") -> k8s.Configuration:
    """A client configuration for a GKE control plane with a refreshed Google OAuth bearer token."""
    import google.auth
    import google.auth.transport.requests

    credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    lock = threading.Lock()

    def refresh(conf: k8s.Configuration) -> None:
        with lock:
            if not credentials.valid:
                credentials.refresh(google.auth.transport.requests.Request())
            conf.api_key["authorization"] = credentials.token

    conf = k8s.Configuration()
    conf.host = endpoint if endpoint.startswith("http") else f"https://{endpoint}"
    conf.api_key_prefix["authorization"] = "Bearer"
    conf.refresh_api_key_hook = refresh
    if ca_cert:
        conf.ssl_ca_cert = _ca_file(ca_cert)
    else:
        conf.verify_ssl = False  # only without a CA: prefer LANDFALL_GKE_CA_CERT
    refresh(conf)
    return conf


class KubeBackend:
    """The TFJob collection of one namespace, through ``CustomObjectsApi``."""

    def __init__(self, api_client: k8s.ApiClient, namespace: str = "landfall-training"):
        self.api = k8s.CustomObjectsApi(api_client)
        self.namespace = namespace

    @classmethod
    def for_host(cls, host: str, namespace: str = "landfall-training", token: str | None = None) -> KubeBackend:
        """Plain host (the tests' fake API server, ``kubectl proxy``)."""
        conf = k8s.Configuration()
        conf.host = host
        conf.retries = False
        if token:
            conf.api_key = {"authorization": f"Bearer {token}"}
        return cls(k8s.ApiClient(conf), namespace)

    @classmethod
    def from_config(cls, cfg: JobConfig) -> KubeBackend:
        try:
            if cfg.gke_endpoint:
                return cls(k8s.ApiClient(gke_configuration(cfg.gke_endpoint, cfg.gke_ca_cert)), cfg.namespace)
            if os.environ.get("KUBERNETES_SERVICE_HOST"):
                k8s_config.load_incluster_config()
                return cls(k8s.ApiClient(), cfg.namespace)
            api_client = k8s_config.new_client_from_config(config_file=cfg.kubeconfig or None)
            return cls(api_client, cfg.namespace)
        except (k8s_config.ConfigException, OSError, ValueError) as exc:
            raise TemporaryError(f"no Kubernetes configuration: {exc}") from exc

    def _what(self, name: str = "") -> str:
        return f"tfjobs/{self.namespace}/{name}" if name else f"tfjobs/{self.namespace}"

    def create(self, job: dict[str, Any]) -> dict[str, Any]:
        with mapped_errors(self._what(tfjob.name_of(job)), creating=True):
            return self.api.create_namespaced_custom_object(  # type: ignore[no-any-return]
                GROUP, VERSION, self.namespace, PLURAL, job, _request_timeout=REQUEST_TIMEOUT)

    def get(self, name: str) -> dict[str, Any]:
        with mapped_errors(self._what(name)):
            return self.api.get_namespaced_custom_object(  # type: ignore[no-any-return]
                GROUP, VERSION, self.namespace, PLURAL, name, _request_timeout=REQUEST_TIMEOUT)

    def list(self, dataset: str | None = None) -> list[dict[str, Any]]:
        selector = "app.kubernetes.io/managed-by=landfall"
        if dataset:
            selector += f",{tfjob.DATASET_LABEL}={tfjob.label_value(dataset)}"
        with mapped_errors(self._what()):
            out = self.api.list_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, label_selector=selector, _request_timeout=REQUEST_TIMEOUT)
        return list(out.get("items") or [])

    def patch(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch (RFC 7386); a ``metadata.resourceVersion`` in it makes it conditional."""
        with mapped_errors(self._what(name)):
            return self.api.patch_namespaced_custom_object(  # type: ignore[no-any-return]
                GROUP, VERSION, self.namespace, PLURAL, name, patch, _request_timeout=REQUEST_TIMEOUT)

    def delete(self, name: str) -> None:
        with contextlib.suppress(NotFound), mapped_errors(self._what(name)):
            self.api.delete_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, name, _request_timeout=REQUEST_TIMEOUT)
