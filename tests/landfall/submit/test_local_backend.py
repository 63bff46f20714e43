"""The ``local`` backend: TFJob objects in a state folder with the API server's semantics."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from landfall.core.errors import AlreadyExists, Invalid, NotFound
from landfall.submit import jobmeta, tfjob
from landfall.submit.backends import Conflict
from landfall.submit.backends.local import LocalBackend
from landfall.submit.config import JobConfig


def job(name: str = "sensors-abc", dataset: str = "sensors", **kw):
    cfg = JobConfig.load({}, bucket="bkt", project="p")
    return tfjob.render(cfg, name=name, dataset=dataset, request_id="r1", inputs_uri="gs://bkt/runs/j/i.json", **kw)


def test_create_is_atomic_create_if_absent(tmp_path):
    def attempt(_):
        try:
            LocalBackend(tmp_path).create(job())
            return True
        except AlreadyExists:
            return False

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(attempt, range(32)))
    assert results.count(True) == 1
    got = LocalBackend(tmp_path).get("sensors-abc")
    assert got["metadata"]["resourceVersion"] == "1" and got["metadata"]["creationTimestamp"]


def test_get_list_patch_conflict_delete(tmp_path):
    b = LocalBackend(tmp_path)
    with pytest.raises(NotFound):
        b.get("nope")
    first = b.create(job())
    b.create(job("other-abc", "other"))
    assert [jobmeta.name_of(j) for j in b.list("sensors")] == ["sensors-abc"]
    assert len(b.list()) == 2
    patched = b.patch("sensors-abc", {"metadata": {"annotations": {"x": "1"}}})
    assert patched["metadata"]["annotations"]["x"] == "1" and patched["metadata"]["resourceVersion"] == "2"
    with pytest.raises(Conflict):
        b.patch("sensors-abc", {"metadata": {"resourceVersion": first["metadata"]["resourceVersion"]},
                                "spec": {"runPolicy": {"suspend": True}}})
    b.patch_status("sensors-abc", {"conditions": [{"type": "Running", "status": "True"}]})
    assert tfjob.state(b.get("sensors-abc")) == "Running"
    b.delete("sensors-abc")
    with pytest.raises(NotFound):
        b.get("sensors-abc")


def test_schema_violations_are_invalid(tmp_path):
    b = LocalBackend(tmp_path)
    bad = job()
    del bad["spec"]["tfReplicaSpecs"]
    with pytest.raises(Invalid):
        b.create(bad)
    with pytest.raises(Invalid):
        b.create(job("Not_A_Name"))
