"""The ``kubernetes`` backend: TFJobs (or JobSets, ``LANDFALL_ENGINE=jobset``) on a real API server, through
``landfall.submit.backends.kube``.

Connection (``JobConfig``): ``LANDFALL_GKE_ENDPOINT`` (+ ``LANDFALL_GKE_CA_CERT``) from a Cloud Function,
else in-cluster, else ``LANDFALL_KUBECONFIG``. The service account needs RBAC on ``tfjobs`` (or ``jobsets``) in the
namespace (``k8s/base/rbac.yaml``). Errors keep the retry class ``landfall.submit.backends.kube`` gives them; a
cluster without the engine's CRD is ``MissingCRD``, whose line names the CRD and both ways out
(``engine.missing_hint``: install what serves it, or deploy with the other engine).

No kube-apiserver runs on a workstation or in CI, so the tests run this module against
``tests/fakes/kube_api.py``, a small HTTP server that answers like the real TFJob collection.
"""

from __future__ import annotations

from typing import Any

from landfall.submit import engine, jobmeta
from landfall.submit.backends import kube
from landfall.submit.config import JobConfig


class KubeBackend:
    """The TFJob (or JobSet) collection of one namespace."""

    def __init__(self, objects: kube.CustomObjects):
        self.objects = objects
        self.namespace = objects.namespace

    @staticmethod
    def _objects(client: Any, namespace: str, engine_name: str) -> kube.CustomObjects:
        api = engine.api(engine_name)
        return kube.CustomObjects(client, api.group, api.version, api.plural, namespace,
                                  missing_hint=engine.missing_hint(engine_name))

    @classmethod
    def for_host(cls, host: str, namespace: str = "landfall-training", token: str | None = None,
                 engine_name: str = "tfjob") -> KubeBackend:
        """Plain host (the tests' fake API server, ``kubectl proxy``)."""
        return cls(cls._objects(kube.host_client(host, token), namespace, engine_name))

    @classmethod
    def from_config(cls, cfg: JobConfig) -> KubeBackend:
        client = kube.api_client(cfg.gke_endpoint, cfg.gke_ca_cert, cfg.kubeconfig)
        return cls(cls._objects(client, cfg.namespace, cfg.engine))

    def create(self, job: dict[str, Any]) -> dict[str, Any]:
        return self.objects.create(job)

    def get(self, name: str) -> dict[str, Any]:
        return self.objects.get(name)

    def list(self, dataset: str | None = None) -> list[dict[str, Any]]:
        selector = "app.kubernetes.io/managed-by=landfall"
        if dataset:
            selector += f",{jobmeta.DATASET_LABEL}={jobmeta.label_value(dataset)}"
        return self.objects.list(selector)

    def patch(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch (RFC 7386); a ``metadata.resourceVersion`` in it makes it conditional."""
        return self.objects.patch(name, patch)

    def delete(self, name: str) -> None:
        self.objects.delete(name)


def connect(cfg: JobConfig) -> KubeBackend:
    """The engine's objects on the configured cluster (``open_backend``)."""
    return KubeBackend.from_config(cfg)
