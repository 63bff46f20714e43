"""``on_training_request`` as deployed: served by functions-framework, fed golden Pub/Sub deliveries of
``landfall.request/v1`` messages for manifests the real converter wrote to the storage emulator.

Two delivery forms reach it: the body the push subscription ``landfall-training-requests-submit``
(``infra/modules/functions``) POSTs, which functions-framework turns into a ``messagePublished``
CloudEvent, and that CloudEvent in binary content mode as an Eventarc trigger sends it. The answer is
the acknowledgement: 2xx acks (done, or rejected for good), 5xx makes Pub/Sub redeliver.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import random
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from functions_framework import create_app

from landfall.core.contracts.messages import TrainingRequest
from landfall.submit import handler as submit
from landfall.submit import jobmeta, tfjob
from landfall.submit.backends.local import LocalBackend
from tests.fakes.kube_api import JOBSETS, FakeKubeAPI
from tests.functions.test_main import MAIN, golden, post
from tests.support import convert_arrival, copy_arrival, inputs_of, pending_of, set_state

CLOUD_EVENT = "pubsub_training_request.json"  # Eventarc: a messagePublished CloudEvent, binary content mode
PUSH = "pubsub_push_training_request.json"  # the push subscription's raw body
DELIVERIES = pytest.mark.parametrize("fixture", [CLOUD_EVENT, PUSH], ids=["cloudevent", "push"])
ARRIVED_AT = "2026-11-29T10:00:01.000Z"  # as the fixtures' message attributes say
PUSH_HEADERS = {"User-Agent": "APIs-Google; (+https://developers.google.com/webmasters/APIs-Google.html)"}


@dataclasses.dataclass
class Deployment:
    state: str  # LANDFALL_LOCAL_STATE: where the local backend keeps the TFJobs

    def jobs(self, dataset: str | None = None) -> list[dict]:
        return LocalBackend(self.state).list(dataset)


@pytest.fixture
def deploy(emulator_stack, bucket, tmp_path, monkeypatch):
    """Builds the function with the submitter's environment (local backend), ``env`` overriding it."""
    deployment = Deployment(state=str(tmp_path / "state"))

    def make(**env: str):
        base = {"LANDFALL_BUCKET": bucket, "LANDFALL_BACKEND": "local", "LANDFALL_LOCAL_STATE": deployment.state,
                "LANDFALL_GPUS_PER_WORKER": "0", "GOOGLE_CLOUD_PROJECT": emulator_stack.project}
        for key, value in {**base, **env}.items():
            monkeypatch.setenv(key, value)
        app = create_app("on_training_request", MAIN, "cloudevent")
        submit.runtime.cache_clear()  # built once per instance from the environment: rebuild it for this test
        return app.test_client()

    yield deployment, make
    submit.runtime.cache_clear()


def request_event(fixture: str, project: str, request: TrainingRequest, payload: bytes | None = None) -> dict:
    """The golden delivery of ``request``: its JSON as the message data unless ``payload`` replaces it."""
    body = payload if payload is not None else dataclasses.replace(request, arrived_at=ARRIVED_AT).to_json()
    return golden(fixture, PROJECT=project, DATASET=request.dataset, MANIFEST=request.manifest,
                  REQUEST_ID=request.request_id, PAYLOAD_BASE64=base64.b64encode(body).decode())


def deliver(client, event: dict):
    if "subscription" in event:  # a push body, POSTed as Pub/Sub does
        return client.post("/", json=event, headers=PUSH_HEADERS)
    return post(client, event)


def outcomes(capsys) -> list[str]:
    """The submit stage's outcome per handled request, from its JSON log lines (stderr, as Cloud Logging reads)."""
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    return [line["outcome"] for line in lines if line.get("logger") == "landfall.submitter"]


def rejections(storage, bucket: str) -> dict[str, dict]:
    return {uri: json.loads(storage.read_bytes(uri)) for uri in storage.list(f"gs://{bucket}/rejected/")}


# -- tests ----------------------------------------------------------------------------------------------
@DELIVERIES
def test_a_request_makes_one_tfjob(emulator_stack, bucket, deploy, tmp_path, fixture):
    deployment, make = deploy
    request = convert_arrival(emulator_stack.storage, bucket, "sensors", tmp_path)
    event = request_event(fixture, emulator_stack.project, request)
    assert deliver(make(), event).status_code == 200
    (job,) = deployment.jobs()
    assert deployment.jobs("sensors") == [job]
    assert job["metadata"]["labels"][jobmeta.DATASET_LABEL] == "sensors"
    assert job["metadata"]["labels"][jobmeta.REQUEST_LABEL] == request.request_id
    inputs = inputs_of(emulator_stack.storage, job)
    assert [(r["request_id"], r["manifest"], r["reason"]) for r in inputs.requests] == [
        (request.request_id, request.manifest, "arrival")]
    assert inputs.manifest_uris == [request.manifest]
    assert tfjob.is_suspended(job) is False
    assert rejections(emulator_stack.storage, bucket) == {}


@DELIVERIES
def test_the_same_push_three_times_makes_one_tfjob(emulator_stack, bucket, deploy, tmp_path, capsys, fixture):
    deployment, make = deploy
    request = convert_arrival(emulator_stack.storage, bucket, "sensors", tmp_path)
    event = request_event(fixture, emulator_stack.project, request)
    client = make()
    assert [deliver(client, event).status_code for _ in range(3)] == [200, 200, 200]
    assert outcomes(capsys) == ["submitted", "duplicate", "duplicate"]
    (job,) = deployment.jobs()
    assert deployment.jobs("sensors") == [job]
    assert job["metadata"]["resourceVersion"] == "1"  # the duplicates did not even touch it
    inputs = inputs_of(emulator_stack.storage, job)
    assert inputs.manifest_uris == [request.manifest]
    assert [(r["request_id"], r["manifest"]) for r in inputs.requests] == [(request.request_id, request.manifest)]
    assert rejections(emulator_stack.storage, bucket) == {}


@pytest.mark.parametrize("seed", [1, 2])
def test_a_burst_delivered_twice_shuffled_and_concurrently_makes_one_follow_up(emulator_stack, bucket, deploy,
                                                                                tmp_path, seed):
    """Production delivery: no ordering, every message at least once, several instances at a time."""
    deployment, make = deploy
    client, storage = make(), emulator_stack.storage
    first = convert_arrival(storage, bucket, "burst", tmp_path)
    assert deliver(client, request_event(PUSH, emulator_stack.project, first)).status_code == 200
    (active,) = deployment.jobs("burst")
    set_state(LocalBackend(deployment.state), jobmeta.name_of(active), "Running")

    burst = [copy_arrival(storage, first, k) for k in range(20)]
    deliveries = [request_event(fixture, emulator_stack.project, r) for r in burst for fixture in (CLOUD_EVENT, PUSH)]
    random.Random(seed).shuffle(deliveries)
    with ThreadPoolExecutor(8) as pool:  # each delivery on its own client, as separate instances would serve them
        codes = list(pool.map(lambda event: deliver(client.application.test_client(), event).status_code,
                              deliveries))
    assert codes == [200] * len(deliveries)
    assert deployment.jobs("burst") == [deployment.jobs("burst")[0]]  # the follow-up waits as pending requests
    assert pending_of(storage, bucket, "burst") == sorted(r.request_id for r in burst)
    # The running job ends: one delivery more (a redelivery) releases one follow-up covering the whole burst.
    set_state(LocalBackend(deployment.state), jobmeta.name_of(active), "Succeeded")
    assert deliver(client, deliveries[0]).status_code == 200
    (follow,) = [j for j in deployment.jobs("burst") if jobmeta.name_of(j) != jobmeta.name_of(active)]
    assert jobmeta.annotations(follow)[jobmeta.AFTER_ANNOTATION] == jobmeta.name_of(active)
    assert {r["request_id"] for r in inputs_of(storage, follow).requests} == {r.request_id for r in burst}
    assert rejections(storage, bucket) == {}


OLD_SCHEMA = {"schema": "landfall.request/v0", "dataset": "sensors", "request_id": "r-old-schema",
              "manifest": "gs://b/tfrecords/sensors/a/manifest.json"}


@pytest.mark.parametrize("payload, where, dataset, detail, recorded", [
    (b"{not json", r"rejected/_invalid/request-sha-[0-9a-f]{20}\.json", None, r"training request is not JSON: .+",
     "{not json"),
    (json.dumps(OLD_SCHEMA).encode(), r"rejected/sensors/request-r-old-schema\.json", "sensors",
     re.escape("training request schema is 'landfall.request/v0', expected 'landfall.request/v1'"), OLD_SCHEMA),
], ids=["not-json", "wrong-schema"])
@DELIVERIES
def test_a_malformed_request_is_acknowledged_and_recorded(emulator_stack, bucket, deploy, fixture, payload, where,
                                                          dataset, detail, recorded):
    deployment, make = deploy
    attributes_of = TrainingRequest(dataset="sensors", request_id="r-old-schema",
                                    manifest=f"gs://{bucket}/tfrecords/sensors/a/manifest.json")
    event = request_event(fixture, emulator_stack.project, attributes_of, payload=payload)
    assert deliver(make(), event).status_code == 200
    ((uri, record),) = rejections(emulator_stack.storage, bucket).items()
    assert re.fullmatch(f"gs://{re.escape(bucket)}/{where}", uri), uri
    assert (record["schema"], record["stage"], record["reason"]) == ("landfall.rejection/v1", "submit", "Invalid")
    assert record["dataset"] == dataset
    assert re.fullmatch(detail, record["detail"]), record["detail"]
    assert record["request"] == recorded
    assert deployment.jobs() == []


@DELIVERIES
def test_a_request_for_a_missing_manifest_is_acknowledged_and_recorded(emulator_stack, bucket, deploy, fixture):
    deployment, make = deploy
    request = TrainingRequest(dataset="sensors", request_id="0123456789abcdef0123",
                              manifest=f"gs://{bucket}/tfrecords/sensors/gone-g1-00000000/manifest.json")
    event = request_event(fixture, emulator_stack.project, request)
    assert deliver(make(), event).status_code == 200
    uri = f"gs://{bucket}/rejected/sensors/request-{request.request_id}.json"
    record = rejections(emulator_stack.storage, bucket)[uri]
    assert list(rejections(emulator_stack.storage, bucket)) == [uri]
    assert (record["schema"], record["stage"], record["reason"]) == ("landfall.rejection/v1", "submit", "NotFound")
    assert record["dataset"] == "sensors"
    assert record["detail"] == f"manifest {request.manifest} does not exist"
    assert record["request"]["request_id"] == request.request_id
    assert deployment.jobs() == []


@DELIVERIES
def test_an_unreachable_cluster_is_retried(emulator_stack, bucket, deploy, tmp_path, monkeypatch, fixture):
    """A temporary error surfaces as a failed invocation (HTTP 500), so Pub/Sub redelivers the request."""
    deployment, make = deploy
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)  # else the in-cluster configuration wins
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({  # JSON is YAML: an API server where nothing listens
        "apiVersion": "v1", "kind": "Config", "current-context": "down",
        "clusters": [{"name": "down", "cluster": {"server": "https://127.0.0.1:9", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "nobody", "user": {"token": "not-a-token"}}],
        "contexts": [{"name": "down", "context": {"cluster": "down", "user": "nobody"}}],
    }))
    request = convert_arrival(emulator_stack.storage, bucket, "sensors", tmp_path)
    client = make(LANDFALL_BACKEND="kubernetes", LANDFALL_KUBECONFIG=str(kubeconfig))
    event = request_event(fixture, emulator_stack.project, request)
    assert deliver(client, event).status_code == 500
    assert deliver(client, event).status_code == 500  # the redelivery too, while the cluster is down
    assert rejections(emulator_stack.storage, bucket) == {}
    assert deployment.jobs() == []


@DELIVERIES
def test_a_cluster_without_the_engines_crd_is_acknowledged_and_recorded_once(emulator_stack, bucket, deploy, tmp_path,
                                                                            monkeypatch, fixture):
    """No TFJob CRD on the cluster (issue #54): acknowledged (2xx, so Pub/Sub never redelivers it to the dead letter)
    and recorded as one rejection whose line names the CRD and both ways out."""
    _, make = deploy
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)  # else the in-cluster configuration wins
    request = convert_arrival(emulator_stack.storage, bucket, "sensors", tmp_path)
    with FakeKubeAPI(served=(JOBSETS,)) as api:  # JobSet installed, the training operator not
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(json.dumps({  # JSON is YAML: the fake API server, plain HTTP
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": api.host}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}],
        }))
        client = make(LANDFALL_BACKEND="kubernetes", LANDFALL_KUBECONFIG=str(kubeconfig), LANDFALL_ENGINE="tfjob")
        assert deliver(client, request_event(fixture, emulator_stack.project, request)).status_code == 200
        assert api.names() == [] and [m for m, _ in api.requests].count("POST") == 1
    ((uri, record),) = rejections(emulator_stack.storage, bucket).items()
    assert uri == f"gs://{bucket}/rejected/sensors/request-{request.request_id}.json"
    assert (record["stage"], record["reason"]) == ("submit", "MissingCRD")
    assert record["detail"] == ("the cluster has no CRD tfjobs.kubeflow.org (the API server serves no tfjobs in "
                                "kubeflow.org/v1): install training-operator v1.9.4 (k8s/README.md), or deploy with "
                                "LANDFALL_ENGINE=jobset")


@pytest.mark.parametrize("kind", ["storage-event", "pubsub-event-without-message"])
def test_an_event_that_is_no_pubsub_message_is_acknowledged(emulator_stack, bucket, deploy, kind):
    deployment, make = deploy
    if kind == "storage-event":  # a trigger pointed at the wrong function
        event = golden("storage_finalized.json", BUCKET=bucket, GENERATION="1", SIZE="10")
    else:
        event = golden(CLOUD_EVENT, PROJECT=emulator_stack.project)
        del event["data"]["message"]
    assert post(make(), event).status_code == 200
    assert emulator_stack.storage.list(f"gs://{bucket}/") == []
    assert deployment.jobs() == []
