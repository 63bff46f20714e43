"""The one module that talks to the Kubernetes API (the official ``kubernetes`` client).

``CustomObjects`` is one namespaced custom-resource collection (``group/version/plural`` in a namespace);
callers pass and get plain dicts. Connection, first that applies:

1. a GKE control plane reached from outside the cluster (a Cloud Function): ``endpoint`` + ``ca_cert``,
   authenticated with a Google OAuth token from Application Default Credentials (``google-auth``),
   refreshed before it expires. The server certificate is always verified: an endpoint without a CA is
   a configuration error (``ValueError`` from ``gke_configuration``, ``TemporaryError`` from
   ``api_client``), never an unverified connection;
2. the in-cluster service-account configuration (``KUBERNETES_SERVICE_HOST`` is set);
3. a kubeconfig (``kubeconfig``, else ``KUBECONFIG``, else ``~/.kube/config``).

Errors keep their retry class: 404 -> ``NotFound``; 409 on create -> ``AlreadyExists`` (callers treat it
as success); 409 on update -> ``Conflict``; 400/422 -> ``Invalid``; 401/403, 408, 429, 5xx, timeouts and
connection errors -> ``TemporaryError`` (a credential or RBAC problem is fixed by an operator, and the
request waits in Pub/Sub, then in the dead-letter topic, instead of being lost).

A CRD that is not installed: the API server has no handler for the resource, so every path under it answers 404
with the generic Status ``the server could not find the requested resource`` (k8s.io/apiserver's
``notfoundhandler``), a named object's too. A 404 on a named object stays ``NotFound`` (a job that is gone is
normal in reads). A 404 on the collection itself (``create``, ``list``), where no object is named, is checked
against API discovery (``GET /apis/<group>/<version>``, ``CustomObjectsApi.get_api_resources``): when the
group/version is not served (404) or its resource list lacks the plural, it is ``MissingCRD`` (permanent: one line
naming the CRD, and the caller's ``missing_hint``, the ways out); when it is served, the 404 was something else (a
missing namespace) and stays ``NotFound``.
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

from landfall.core.errors import (
    AlreadyExists,
    Conflict,
    Invalid,
    MissingCRD,
    NotFound,
    PermanentError,
    TemporaryError,
)

REQUEST_TIMEOUT = (5.0, 30.0)  # connect, read (seconds)


def _message(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body).get("message") or exc.reason)
    except (TypeError, ValueError, AttributeError):
        return str(exc.reason)


@contextlib.contextmanager
def mapped_errors(what: str, creating: bool = False) -> Iterator[None]:
    """The Kubernetes client's errors as Landfall's, with their retry class."""
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
    """A client configuration for a GKE control plane with a refreshed Google OAuth bearer token.

    The control plane's certificate is verified against ``ca_cert``; without one this raises ``ValueError``
    (TLS verification is never turned off: the bearer token must not go to an unverified server).
    """
    if not ca_cert.strip():
        raise ValueError(
            f"GKE endpoint {endpoint!r} given without its CA certificate: set LANDFALL_GKE_CA_CERT "
            "(the cluster's masterAuth.clusterCaCertificate, base64 PEM); TLS verification is never disabled"
        )
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
    conf.verify_ssl = True
    conf.ssl_ca_cert = _ca_file(ca_cert)
    refresh(conf)
    return conf


def api_client(endpoint: str = "", ca_cert: str = "", kubeconfig: str = "") -> k8s.ApiClient:
    """The first connection that applies (see the module docstring); ``TemporaryError`` if none does."""
    try:
        if endpoint:
            return k8s.ApiClient(gke_configuration(endpoint, ca_cert))
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            k8s_config.load_incluster_config()
            return k8s.ApiClient()
        return k8s_config.new_client_from_config(config_file=kubeconfig or None)
    except (k8s_config.ConfigException, OSError, ValueError) as exc:
        raise TemporaryError(f"no Kubernetes configuration: {exc}") from exc


def host_client(host: str, token: str | None = None) -> k8s.ApiClient:
    """A plain host (the tests' fake API server, ``kubectl proxy``), without the client's own retries."""
    conf = k8s.Configuration()
    conf.host = host
    conf.retries = False
    if token:
        conf.api_key = {"authorization": f"Bearer {token}"}
    return k8s.ApiClient(conf)


class CustomObjects:
    """One namespaced custom-resource collection, through ``CustomObjectsApi``; plain dicts in and out.

    ``missing_hint``: what to do when the cluster lacks the resource's CRD, appended to ``MissingCRD``'s line."""

    def __init__(self, client: k8s.ApiClient, group: str, version: str, plural: str, namespace: str,
                 missing_hint: str = ""):
        self.api = k8s.CustomObjectsApi(client)
        self.group, self.version, self.plural, self.namespace = group, version, plural, namespace
        self.missing_hint = missing_hint

    @property
    def crd(self) -> str:
        """The CRD's name, ``<plural>.<group>`` (``tfjobs.kubeflow.org``)."""
        return f"{self.plural}.{self.group}"

    def served(self) -> bool:
        """Whether the API server serves this resource, by API discovery: ``GET /apis/<group>/<version>`` lists it
        (False on 404: nothing of that group/version is served). Other failures keep their retry class."""
        try:
            with mapped_errors(f"API discovery of {self.group}/{self.version}"):
                response = self.api.get_api_resources(self.group, self.version, _preload_content=False,
                                                      _request_timeout=REQUEST_TIMEOUT)
        except NotFound:
            return False
        try:
            found = json.loads(response.data)
        except ValueError as exc:  # not the APIResourceList an API server sends: a proxy in the way, say
            raise TemporaryError(f"API discovery of {self.group}/{self.version}: unreadable answer: {exc}") from exc
        resources = found.get("resources") if isinstance(found, dict) else None
        return any(isinstance(r, dict) and r.get("name") == self.plural for r in resources or [])

    def missing(self) -> MissingCRD:
        hint = f": {self.missing_hint}" if self.missing_hint else ""
        return MissingCRD(f"the cluster has no CRD {self.crd} (the API server serves no {self.plural} in "
                          f"{self.group}/{self.version}){hint}")

    @contextlib.contextmanager
    def _collection(self) -> Iterator[None]:
        """A 404 on the collection (no object named): ``MissingCRD`` when discovery confirms the resource is not
        served, else the ``NotFound`` it was."""
        try:
            yield
        except NotFound as exc:
            if self.served():
                raise
            raise self.missing() from exc

    def _what(self, name: str = "") -> str:
        return f"{self.plural}/{self.namespace}/{name}" if name else f"{self.plural}/{self.namespace}"

    def _args(self) -> tuple[str, str, str, str]:
        return self.group, self.version, self.namespace, self.plural

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._collection(), mapped_errors(self._what(str(body.get("metadata", {}).get("name", ""))),
                                               creating=True):
            return self.api.create_namespaced_custom_object(  # type: ignore[no-any-return]
                *self._args(), body, _request_timeout=REQUEST_TIMEOUT)

    def get(self, name: str) -> dict[str, Any]:
        with mapped_errors(self._what(name)):
            return self.api.get_namespaced_custom_object(  # type: ignore[no-any-return]
                *self._args(), name, _request_timeout=REQUEST_TIMEOUT)

    def list(self, label_selector: str = "") -> list[dict[str, Any]]:
        with self._collection(), mapped_errors(self._what()):
            out = self.api.list_namespaced_custom_object(
                *self._args(), label_selector=label_selector, _request_timeout=REQUEST_TIMEOUT)
        return list(out.get("items") or [])

    def patch(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch (RFC 7386); a ``metadata.resourceVersion`` in it makes it conditional."""
        with mapped_errors(self._what(name)):
            return self.api.patch_namespaced_custom_object(  # type: ignore[no-any-return]
                *self._args(), name, patch, _request_timeout=REQUEST_TIMEOUT)

    def delete(self, name: str) -> None:
        with contextlib.suppress(NotFound), mapped_errors(self._what(name)):
            self.api.delete_namespaced_custom_object(*self._args(), name, _request_timeout=REQUEST_TIMEOUT)
