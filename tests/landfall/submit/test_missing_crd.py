"""A cluster without the engine's CRD (issue #54): the submit stage refuses the request for good, in one line that names
the CRD and both ways out, instead of a temporary error retried into the dead letter.

Against the real Pub/Sub and Cloud Storage emulators and ``tests/fakes/kube_api.py`` answering as the real API server
does when a CRD is not installed: every path under the resource, and API discovery of a group/version that serves
nothing, 404 with the ``notfoundhandler`` Status (no ``details``). A 404 on a named object stays ``NotFound``; only a
404 on the collection, confirmed by discovery, is ``MissingCRD``.
"""

from __future__ import annotations

import argparse
import json
import logging
import threading
import time
from pathlib import Path

import pytest

from landfall.cli import status
from landfall.core.contracts import layout
from landfall.core.errors import MissingCRD, NotFound, TemporaryError
from landfall.reconcile import loop
from landfall.submit import coalesce, engine, jobset, tfjob
from landfall.submit.backends.kubernetes import KubeBackend
from landfall.submit.handler import handle_message
from landfall.submit.ledger import Ledger
from tests.fakes.kube_api import JOBSETS, TFJOBS, FakeKubeAPI, Resource, not_found_body
from tests.infra.test_install_lines import install_lines
from tests.support import convert_arrival, inputs_of, pending_of, publish, runtime

REPO = Path(__file__).resolve().parents[3]

# engine -> (the resource its jobs are, the other engine's, what the refusal must name)
ENGINES = {
    "tfjob": (TFJOBS, JOBSETS, ("tfjobs.kubeflow.org", "install training-operator v1.9.4", "LANDFALL_ENGINE=jobset")),
    "jobset": (JOBSETS, TFJOBS, ("jobsets.jobset.x-k8s.io", "install JobSet v0.12.0", "LANDFALL_ENGINE=tfjob")),
}
NOTEBOOKS = Resource("kubeflow.org", "v1", "notebooks", "Notebook")  # kubeflow.org/v1 served without tfjobs


def _rejections(storage, bucket: str) -> list[dict]:
    return [json.loads(storage.read_bytes(uri)) for uri in storage.list(layout.gs(bucket, "rejected/"))]


@pytest.mark.parametrize("engine_name", sorted(ENGINES))
def test_a_submit_without_the_crd_is_one_permanent_rejection_never_retried_or_dead_lettered(
        emulator_stack, bucket, topic, tmp_path, engine_name, capsys, monkeypatch):
    mine, other, named = ENGINES[engine_name]
    storage, ps = emulator_stack.storage, emulator_stack.pubsub
    dead_letter, sub = topic + "-dl", topic + "-fn"
    ps.ensure_topic(dead_letter)
    ps.ensure_subscription(dead_letter, dead_letter)
    ps.ensure_subscription(sub, topic, dead_letter_topic=dead_letter, max_delivery_attempts=5)
    dataset = f"nocrd-{engine_name}"
    request = convert_arrival(storage, bucket, dataset, tmp_path)
    with FakeKubeAPI(served=(other,)) as api:  # the other engine's CRD only
        rt = runtime(emulator_stack, bucket, KubeBackend.for_host(api.host, engine_name=engine_name),
                     engine=engine_name)
        publish(emulator_stack, topic, request)
        attempts, outcomes = [], []
        deadline = time.monotonic() + 30
        while not outcomes and time.monotonic() < deadline:
            for m in ps.pull(sub, timeout_s=2.0):  # as the function does: ack on return, nack on raise
                attempts.append(m.delivery_attempt)
                try:
                    outcomes.append(handle_message(m.data, m.attributes, rt))
                except TemporaryError:
                    ps.nack(sub, [m.ack_id])
                    continue
                ps.ack(sub, [m.ack_id])
        assert outcomes == ["rejected"] and attempts == [1]
        assert ps.pull(sub, timeout_s=2.0) == [] and ps.pull(dead_letter, timeout_s=2.0) == []  # no redelivery
        # One create, one discovery that confirms the CRD is missing; nothing retried.
        collection = f"/apis/{mine.group}/{mine.version}/namespaces/landfall-training/{mine.plural}"
        assert [r for r in api.requests if r[0] == "POST"] == [("POST", collection)]
        assert ("GET", f"/apis/{mine.group}/{mine.version}") in api.requests
        assert api.names(res=mine) == [] and api.names(res=other) == []

        (record,) = _rejections(storage, bucket)
        assert record["reason"] == "MissingCRD" and record["stage"] == "submit"
        assert record["request"]["request_id"] == request.request_id
        detail = record["detail"]
        assert "\n" not in detail and all(part in detail for part in named), detail
        # The release it had started stays: its pending record and inputs, for when the cluster can run it.
        assert pending_of(storage, bucket, dataset) == [request.request_id]

        # `landfall status` shows the reason where it shows every refused request: among the dataset's rejections.
        report = status.collect(rt.config, storage, rt.backend, dataset)
        (shown,) = report["datasets"][dataset]["latest_rejections"]
        assert (shown["request_id"], shown["reason"], shown["detail"]) == (request.request_id, "MissingCRD", detail)
        assert report["jobs"] == [] and report["jobs_error"] == f"MissingCRD: {detail}"
        capsys.readouterr()
        status.status(_status_args(rt, dataset, api.host, engine_name, tmp_path, monkeypatch))
        printed = capsys.readouterr().out
        assert f"  rejected  request {request.request_id}: MissingCRD: {detail}\n" in printed, printed

        # Once a cluster admin installs the CRD, the reconciler creates the job that release started: nothing lost.
        api.install(mine)
        coalesce.reconcile(rt.backend, storage, rt.config)
        (job,) = rt.backend.list(dataset)
        assert job["kind"] == mine.kind
        assert [r["request_id"] for r in inputs_of(storage, job).requests] == [request.request_id]


def _status_args(rt, dataset: str, host: str, engine_name: str, tmp_path, monkeypatch) -> argparse.Namespace:
    """``landfall status --dataset D --no-dead-letter`` against the fake API server (a kubeconfig naming it)."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({  # JSON is YAML
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": host}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}],
    }))
    monkeypatch.setenv("LANDFALL_KUBECONFIG", str(kubeconfig))
    monkeypatch.setenv("LANDFALL_ENGINE", engine_name)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)  # else the in-cluster configuration wins
    parser = argparse.ArgumentParser()
    status.add_arguments("status", parser)
    return parser.parse_args(["--dataset", dataset, "--no-dead-letter", "--bucket", rt.config.bucket,
                              "--backend", "kubernetes", "--project", rt.config.project])


def test_a_404_on_a_named_object_stays_not_found_and_asks_no_discovery():
    """Reads meet missing objects all the time (a finished job deleted by its TTL): only the collection's 404 is
    checked, and a group/version served without the resource (Kubeflow's notebooks) is still a missing CRD."""
    cfg_job = tfjob.render(runtime_config(), name="ds-abc", dataset="ds", request_id="r1",
                           inputs_uri="gs://bkt/runs/ds-abc/inputs.json")
    with FakeKubeAPI() as api:
        kb = KubeBackend.for_host(api.host)
        with pytest.raises(NotFound) as found:
            kb.get("ds-abc")
        assert not isinstance(found.value, MissingCRD)
        assert kb.list("ds") == []
        assert not [r for r in api.requests if r[1].count("/") == 3]  # no discovery asked
    with FakeKubeAPI(served=(NOTEBOOKS, JOBSETS)) as api:
        kb = KubeBackend.for_host(api.host)
        with pytest.raises(NotFound) as found:
            kb.get("ds-abc")  # the generic 404 of a missing CRD, on a named object: NotFound, as every read expects
        assert not isinstance(found.value, MissingCRD)
        with pytest.raises(MissingCRD, match=r"the cluster has no CRD tfjobs\.kubeflow\.org"):
            kb.create(cfg_job)
        with pytest.raises(MissingCRD):
            kb.list()
        assert api.names() == []


def test_a_discovery_that_fails_keeps_its_retry_class(monkeypatch):
    """Discovery unavailable (503) after the collection's 404: temporary, retried like any unreachable API server."""
    with FakeKubeAPI(served=()) as api:
        kb = KubeBackend.for_host(api.host)
        handle = api.handle

        def discovery_down(method, path, query, body, content_type, body_size=None):
            if path == "/apis/kubeflow.org/v1":
                return 503, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "ServiceUnavailable",
                             "message": "injected", "code": 503}
            return handle(method, path, query, body, content_type, body_size)

        monkeypatch.setattr(api, "handle", discovery_down)
        with pytest.raises(TemporaryError):
            kb.list()


def test_the_fake_answers_a_missing_crd_as_the_api_server_does():
    """k8s.io/apiserver/pkg/util/notfoundhandler: 404, reason NotFound, the generic message, no details; discovery
    of a group/version that serves nothing is the same 404, and one that serves something lists it."""
    import urllib.request
    from urllib.error import HTTPError

    with FakeKubeAPI(served=(JOBSETS,)) as api:
        collection = "/apis/kubeflow.org/v1/namespaces/ns/tfjobs"
        for path in ("/apis/kubeflow.org/v1", collection, collection + "/x", collection + "/x/status"):
            with pytest.raises(HTTPError) as err:
                urllib.request.urlopen(api.host + path)
            assert err.value.code == 404 and json.loads(err.value.read()) == not_found_body(), path
        assert "details" not in not_found_body()
        assert not_found_body()["message"] == "the server could not find the requested resource"
        with urllib.request.urlopen(api.host + "/apis/jobset.x-k8s.io/v1alpha2") as answer:
            listed = json.loads(answer.read())
        assert listed["kind"] == "APIResourceList" and listed["groupVersion"] == "jobset.x-k8s.io/v1alpha2"
        assert [r["name"] for r in listed["resources"]] == ["jobsets", "jobsets/status"]


def test_the_refusal_names_the_releases_the_docs_pin():
    """The versions in the line are the install lines of k8s/README.md (which test_install_lines holds to released
    upstream tags)."""
    pinned = dict(install_lines((REPO / "k8s" / "README.md").read_text()))
    wanted = (f"training-operator {pinned['kubeflow/trainer']}", f"JobSet {pinned['kubernetes-sigs/jobset']}")
    assert wanted == (tfjob.INSTALL, jobset.INSTALL)
    assert engine.missing_hint("tfjob") == ("install training-operator v1.9.4 (k8s/README.md), or deploy with "
                                            "LANDFALL_ENGINE=jobset")
    assert engine.missing_hint("jobset").endswith("or deploy with LANDFALL_ENGINE=tfjob")


def test_the_reconciler_logs_a_missing_crd_in_one_line(emulator_stack, bucket, tmp_path, monkeypatch, caplog):
    """Each pass meets the refused release again until the CRD is installed: one ERROR line, no traceback."""
    storage = emulator_stack.storage
    request = convert_arrival(storage, bucket, "nocrd-loop", tmp_path)
    with FakeKubeAPI(served=()) as api:
        rt = runtime(emulator_stack, bucket, KubeBackend.for_host(api.host))
        assert handle_message(request.to_json(), {}, rt) == "rejected"
        assert Ledger(storage, bucket, rt.layout).datasets_with_pending() == ["nocrd-loop"]
        monkeypatch.setattr(loop, "MIN_POLL_S", 0.05)
        stop = threading.Event()
        caplog.set_level(logging.ERROR, logger="landfall.reconcile")
        thread = threading.Thread(target=loop.run, args=(rt.config, storage, rt.backend, stop, 0.05))
        thread.start()
        deadline = time.monotonic() + 20
        while len([r for r in caplog.records if r.name == "landfall.reconcile"]) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        thread.join(timeout=10)
    errors = [r for r in caplog.records if r.name == "landfall.reconcile" and r.levelno == logging.ERROR]
    assert len(errors) >= 2
    for r in errors:
        assert r.exc_info is None and "\n" not in r.getMessage()
        assert r.getMessage().startswith("reconcile pass failed (will retry): MissingCRD: the cluster has no CRD "
                                          "tfjobs.kubeflow.org")


def runtime_config():
    from landfall.submit.config import JobConfig

    return JobConfig.load({}, bucket="bkt", project="p")
