"""The ``kubernetes`` backend: TFJobs on a real API server, through ``landfall.core.kube``.

Connection (``JobConfig``): ``LANDFALL_GKE_ENDPOINT`` (+ ``LANDFALL_GKE_CA_CERT``) from a Cloud Function,
else in-cluster, else ``LANDFALL_KUBECONFIG``. The service account needs RBAC on ``tfjobs`` in the
namespace (``k8s/base/rbac.yaml``). Errors keep the retry class ``landfall.core.kube`` gives them.

No kube-apiserver runs on a workstation or in CI, so the tests run this module against
``tests/fakes/kube_api.py``, a small HTTP server that answers like the real TFJob collection.
"""

from __future__ import annotations

from typing import Any

from landfall.core import kube
from landfall.submit import tfjob
from landfall.submit.config import JobConfig
from landfall.submit.tfjob import GROUP, PLURAL, VERSION


class KubeBackend:
    """The TFJob collection of one namespace."""

    def __init__(self, objects: kube.CustomObjects):
        self.objects = objects
        self.namespace = objects.namespace

    @classmethod
    def for_host(cls, host: str, namespace: str = "landfall-training", token: str | None = None) -> KubeBackend:
        """Plain host (the tests' fake API server, ``kubectl proxy``)."""
        return cls(kube.CustomObjects(kube.host_client(host, token), GROUP, VERSION, PLURAL, namespace))

    @classmethod
    def from_config(cls, cfg: JobConfig) -> KubeBackend:
        client = kube.api_client(cfg.gke_endpoint, cfg.gke_ca_cert, cfg.kubeconfig)
        return cls(kube.CustomObjects(client, GROUP, VERSION, PLURAL, cfg.namespace))

    def create(self, job: dict[str, Any]) -> dict[str, Any]:
        return self.objects.create(job)

    def get(self, name: str) -> dict[str, Any]:
        return self.objects.get(name)

    def list(self, dataset: str | None = None) -> list[dict[str, Any]]:
        selector = "app.kubernetes.io/managed-by=landfall"
        if dataset:
            selector += f",{tfjob.DATASET_LABEL}={tfjob.label_value(dataset)}"
        return self.objects.list(selector)

    def patch(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch (RFC 7386); a ``metadata.resourceVersion`` in it makes it conditional."""
        return self.objects.patch(name, patch)

    def delete(self, name: str) -> None:
        self.objects.delete(name)
