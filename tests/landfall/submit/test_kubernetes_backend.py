"""The ``kubernetes`` backend (the official client) against the fake TFJob API server."""

from __future__ import annotations

import pytest

from landfall.core.errors import AlreadyExists, Invalid, NotFound, TemporaryError
from landfall.submit import jobmeta, tfjob
from landfall.submit.backends import Conflict
from landfall.submit.backends.kubernetes import KubeBackend
from landfall.submit.config import JobConfig
from tests.fakes.kube_api import FakeKubeAPI


@pytest.fixture
def api():
    with FakeKubeAPI() as server:
        yield server


def job(name: str = "sensors-abc", dataset: str = "sensors", **kw):
    cfg = JobConfig.load({}, bucket="bkt", project="p")
    return tfjob.render(cfg, name=name, dataset=dataset, request_id="r1", inputs_uri="gs://bkt/runs/j/i.json", **kw)


def test_create_get_list_patch_delete(api):
    kb = KubeBackend.for_host(api.host)
    created = kb.create(job())
    assert created["metadata"]["resourceVersion"] and created["metadata"]["creationTimestamp"]
    with pytest.raises(AlreadyExists):
        kb.create(job())
    assert kb.get("sensors-abc")["metadata"]["uid"] == created["metadata"]["uid"]
    kb.create(job("other-abc", "other"))
    assert [jobmeta.name_of(j) for j in kb.list("sensors")] == ["sensors-abc"]
    assert len(kb.list()) == 2
    patched = kb.patch("sensors-abc", {"metadata": {"annotations": {"x": "1"}}})
    assert patched["metadata"]["annotations"]["x"] == "1"
    assert patched["metadata"]["annotations"][jobmeta.INPUTS_ANNOTATION]  # merged, not replaced
    with pytest.raises(Conflict):
        kb.patch("sensors-abc", {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]}})
    kb.delete("sensors-abc")
    kb.delete("sensors-abc")  # idempotent
    with pytest.raises(NotFound):
        kb.get("sensors-abc")


def test_schema_violations_are_invalid(api):
    kb = KubeBackend.for_host(api.host)
    bad = job()
    del bad["spec"]["tfReplicaSpecs"]
    with pytest.raises(Invalid):
        kb.create(bad)
    kb.create(job())
    with pytest.raises(Invalid):
        kb.patch("sensors-abc", {"spec": {"runPolicy": {"cleanPodPolicy": "Sometimes"}}})


def test_throttling_server_errors_and_unreachable_are_temporary(api):
    kb = KubeBackend.for_host(api.host)
    api.fail_next(1, 429)
    with pytest.raises(TemporaryError):
        kb.create(job())
    api.fail_next(1, 503)
    with pytest.raises(TemporaryError):
        kb.list()
    kb.create(job())
    dead = KubeBackend.for_host("http://127.0.0.1:9")
    with pytest.raises(TemporaryError):
        dead.list()


def test_rendered_job_passes_the_fake_servers_schema():
    from tests.fakes.kube_api import validate

    assert validate(job()) == []
    assert validate(job(after="ds-0000000000", released_at="2026-11-30T00:00:00Z")) == []
