"""The submit stage's tests: the job store every engine's jobs are created in (a module may define its own)."""

from __future__ import annotations

import pytest

from landfall.submit.backends.kubernetes import KubeBackend
from landfall.submit.backends.local import LocalBackend
from tests.fakes.kube_api import FakeKubeAPI


@pytest.fixture(params=["local/tfjob", "local/jobset", "kubernetes/tfjob", "kubernetes/jobset"])
def backend(request, tmp_path):
    """Each backend with each cluster engine: the local store, and the fake API server as the cluster answers."""
    kind, engine_name = request.param.split("/")
    if kind == "local":
        yield LocalBackend(tmp_path / "state", engine_name=engine_name)
    else:
        with FakeKubeAPI() as api:
            yield KubeBackend.for_host(api.host, engine_name=engine_name)

