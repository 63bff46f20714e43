"""The fake API server's limits, through the official client (and ``landfall.submit.backends.kube``'s error mapping).

Each limit: exactly at it is accepted, one byte/character over is refused with the real server's code,
reason and message, on create and on a merge patch (the merged result is what counts).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from landfall.core.errors import Invalid, PermanentError, TemporaryError
from landfall.submit import tfjob
from landfall.submit.backends import kube
from landfall.submit.backends.kubernetes import KubeBackend
from landfall.submit.config import JobConfig
from tests.fakes.kube_api import (
    MAX_ANNOTATIONS_BYTES,
    MAX_BODY_BYTES,
    MAX_ETCD_REQUEST_BYTES,
    FakeKubeAPI,
    encoded_size,
)

NS = "landfall-training"
NAME = "sensors-abc"
COLLECTION = (tfjob.GROUP, tfjob.VERSION, NS, tfjob.PLURAL)
TOO_LONG = "Too long: must have at most 262144 bytes"
LABEL_REGEX = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
    "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
NAME_REGEX = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
ETCD_500 = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "etcdserver: request is too large", "code": 500}
BODY_413 = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Request entity too large: limit is 3145728", "reason": "RequestEntityTooLarge", "code": 413}


@pytest.fixture
def api():
    with FakeKubeAPI() as server:
        yield server


@pytest.fixture
def raw(api) -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(kube.host_client(api.host))


@pytest.fixture
def kb(api) -> KubeBackend:
    return KubeBackend.for_host(api.host)


def job(name: str = NAME) -> dict[str, Any]:
    cfg = JobConfig.load({}, bucket="bkt", project="p")
    return tfjob.render(cfg, name=name, dataset="sensors", request_id="r1", inputs_uri="gs://bkt/runs/j/inputs.json")


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return obj["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]


def padded(n: int, name: str = NAME) -> dict[str, Any]:
    """A job whose first container carries one extra argument of ``n`` ASCII bytes."""
    body = job(name)
    containers(body)[0]["args"].append("x" * n)
    return body


def refused(call: Callable[[], Any]) -> tuple[int, dict[str, Any]]:
    with pytest.raises(ApiException) as info:
        call()
    return info.value.status, json.loads(info.value.body)


def create(raw: k8s.CustomObjectsApi, body: dict[str, Any]) -> dict[str, Any]:
    return raw.create_namespaced_custom_object(*COLLECTION, body)  # type: ignore[no-any-return]


def patch(raw: k8s.CustomObjectsApi, body: dict[str, Any], name: str = NAME) -> dict[str, Any]:
    return raw.patch_namespaced_custom_object(*COLLECTION, name, body)  # type: ignore[no-any-return]


def patch_status(raw: k8s.CustomObjectsApi, body: dict[str, Any], name: str = NAME) -> dict[str, Any]:
    return raw.patch_namespaced_custom_object_status(*COLLECTION, name, body)  # type: ignore[no-any-return]


def get(raw: k8s.CustomObjectsApi, name: str = NAME) -> dict[str, Any]:
    return raw.get_namespaced_custom_object(*COLLECTION, name)  # type: ignore[no-any-return]


def assert_invalid(status: int, body: dict[str, Any], field: str, message: str, name: str = NAME) -> None:
    """One apimachinery field error, as ``apierrors.NewInvalid`` shapes it."""
    assert status == 422
    assert body["reason"] == "Invalid" and body["code"] == 422 and body["status"] == "Failure"
    assert body["message"] == f'TFJob.kubeflow.org "{name}" is invalid: {field}: {message}'
    assert body["details"]["name"] == name
    assert (body["details"]["group"], body["details"]["kind"]) == ("kubeflow.org", "TFJob")
    reason = "FieldValueTooLong" if message.startswith("Too long") else "FieldValueInvalid"
    assert body["details"]["causes"] == [{"reason": reason, "message": message, "field": field}]


# -- metadata.annotations: 256 KiB of keys + values ---------------------------------------------------------
def annotations_total(annotations: dict[str, str]) -> int:
    return sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())


def pad_annotation(annotations: dict[str, str], total: int) -> dict[str, str]:
    """The ``landfall.dev/pad`` annotation that brings ``annotations`` to ``total`` bytes."""
    rest = {k: v for k, v in annotations.items() if k != "landfall.dev/pad"}
    return {"landfall.dev/pad": "x" * (total - annotations_total(rest) - len("landfall.dev/pad"))}


def test_annotations_at_the_limit_are_accepted_and_one_byte_over_is_too_long_on_create(raw, kb):
    body = job()
    body["metadata"]["annotations"].update(pad_annotation(body["metadata"]["annotations"], MAX_ANNOTATIONS_BYTES))
    assert annotations_total(body["metadata"]["annotations"]) == 262144
    assert annotations_total(create(raw, body)["metadata"]["annotations"]) == 262144

    over = job("sensors-def")
    over["metadata"]["annotations"].update(pad_annotation(over["metadata"]["annotations"], 262145))
    status, out = refused(lambda: create(raw, over))
    assert_invalid(status, out, "metadata.annotations", TOO_LONG, name="sensors-def")
    with pytest.raises(Invalid, match=r"metadata\.annotations: Too long"):
        kb.create(over)


def test_annotations_limit_holds_for_the_merged_result_of_a_patch(raw, kb):
    current = create(raw, job())["metadata"]["annotations"]
    at = pad_annotation(current, MAX_ANNOTATIONS_BYTES)
    patched = patch(raw, {"metadata": {"annotations": at}})
    assert annotations_total(patched["metadata"]["annotations"]) == 262144

    over = pad_annotation(patched["metadata"]["annotations"], 262145)
    assert len(over["landfall.dev/pad"]) == len(at["landfall.dev/pad"]) + 1  # the patch alone is small
    status, out = refused(lambda: patch(raw, {"metadata": {"annotations": over}}))
    assert_invalid(status, out, "metadata.annotations", TOO_LONG)
    with pytest.raises(Invalid):
        kb.patch(NAME, {"metadata": {"annotations": over}})
    assert get(raw) == patched  # nothing stored, resourceVersion unchanged


# -- metadata.labels: qualified-name keys, 63-character values --------------------------------------------
LABEL_CASES = [
    # (key, value, the refused string, apimachinery's detail); None: accepted
    ("landfall.dev/v", "a" * 63, None, None),
    ("landfall.dev/v", "", None, None),
    ("landfall.dev/v", "A-b_c.9", None, None),
    ("landfall.dev/v", "a" * 64, "a" * 64, "must be no more than 63 characters"),
    ("landfall.dev/v", "-a", "-a", LABEL_REGEX),
    ("landfall.dev/v", "a/b", "a/b", LABEL_REGEX),
    ("k" * 63, "v", None, None),
    ("k" * 64, "v", "k" * 64, "name part must be no more than 63 characters"),
    ("p" * 253 + "/k", "v", None, None),
    ("p" * 254 + "/k", "v", "p" * 254 + "/k", "prefix part must be no more than 253 characters"),
    ("Landfall.dev/k", "v", "Landfall.dev/k", "prefix part " + NAME_REGEX),
    ("landfall.dev/-k", "v", "landfall.dev/-k", "name part must consist of alphanumeric characters, '-', '_' or "
     "'.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', "
     "regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
]


@pytest.mark.parametrize("how", ["create", "patch"])
@pytest.mark.parametrize(("key", "value", "bad", "detail"), LABEL_CASES, ids=lambda v: str(v)[:16])
def test_label_keys_and_values(raw, how, key, value, bad, detail):
    if how == "create":
        body = job()
        body["metadata"]["labels"][key] = value
        call = lambda: create(raw, body)  # noqa: E731
    else:
        create(raw, job())
        call = lambda: patch(raw, {"metadata": {"labels": {key: value}}})  # noqa: E731
    if bad is None:
        assert call()["metadata"]["labels"][key] == value
    else:
        status, out = refused(call)
        assert_invalid(status, out, "metadata.labels", f'Invalid value: "{bad}": {detail}')


def test_several_errors_are_aggregated_like_the_real_server(raw):
    body = job()
    body["metadata"]["labels"].update({"a": "-x", "b": "y" * 64})
    status, out = refused(lambda: create(raw, body))
    assert status == 422
    one, two = f'metadata.labels: Invalid value: "-x": {LABEL_REGEX}', (
        f'metadata.labels: Invalid value: "{"y" * 64}": must be no more than 63 characters')
    assert out["message"] == f'TFJob.kubeflow.org "{NAME}" is invalid: [{one}, {two}]'
    assert [c["field"] for c in out["details"]["causes"]] == ["metadata.labels"] * 2


# -- metadata.name: a DNS-1123 subdomain of at most 253 characters ------------------------------------------
@pytest.mark.parametrize(("name", "detail"), [
    ("a" * 253, None),
    ("a" * 120 + "." + "b" * 132, None),
    ("a" * 254, "must be no more than 253 characters"),
    ("Sensors-abc", NAME_REGEX),
    ("sensors_abc", NAME_REGEX),
    ("sensors-abc-", NAME_REGEX),
])
def test_names(raw, kb, name, detail):
    body = job()
    body["metadata"]["name"] = name
    if detail is None:
        assert create(raw, body)["metadata"]["name"] == name
        assert get(raw, name)["metadata"]["name"] == name
        return
    status, out = refused(lambda: create(raw, body))
    assert_invalid(status, out, "metadata.name", f'Invalid value: "{name}": {detail}', name=name)
    with pytest.raises(Invalid):
        kb.create(body)


def test_a_missing_name_is_required(raw):
    body = job()
    del body["metadata"]["name"]
    status, out = refused(lambda: create(raw, body))
    assert status == 422
    assert out["message"] == 'TFJob.kubeflow.org "" is invalid: metadata.name: Required value: name or ' \
        "generateName is required"
    assert out["details"]["causes"] == [{"reason": "FieldValueRequired", "field": "metadata.name",
                                         "message": "Required value: name or generateName is required"}]


# -- the whole object: etcd's 1.5 MiB request limit ------------------------------------------------------------
def stored_overhead(raw) -> int:
    """Bytes the server adds on create (uid, resourceVersion, timestamps...): probed, then deleted."""
    body = padded(0)
    overhead = encoded_size(create(raw, body)) - encoded_size(body)
    raw.delete_namespaced_custom_object(*COLLECTION, NAME)
    return overhead


def test_an_object_at_etcds_limit_is_stored_and_one_byte_over_is_a_500_on_create(raw, kb):
    n = MAX_ETCD_REQUEST_BYTES - encoded_size(padded(0)) - stored_overhead(raw)
    created = create(raw, padded(n))
    assert encoded_size(created) == encoded_size(get(raw)) == 1572864
    raw.delete_namespaced_custom_object(*COLLECTION, NAME)

    status, out = refused(lambda: create(raw, padded(n + 1)))
    assert (status, out) == (500, ETCD_500)  # a reasonless 500, as kube-apiserver passes etcd's error on
    with pytest.raises(TemporaryError, match=r"\(500\): etcdserver: request is too large"):
        kb.create(padded(n + 1))
    assert raw.list_namespaced_custom_object(*COLLECTION)["items"] == []


def test_etcds_limit_holds_for_the_merged_result_of_a_patch(raw, kb):
    current = create(raw, job())
    base = containers(current)[0]

    def spec_patch(k: int) -> dict[str, Any]:
        c = copy.deepcopy(base)
        c["args"].append("x" * k)
        return {"spec": {"tfReplicaSpecs": {"Worker": {"template": {"spec": {"containers": [c]}}}}}}

    expected = copy.deepcopy(current)  # what would be stored: new args, generation and resourceVersion + 1
    expected["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"] = spec_patch(0)["spec"][
        "tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    expected["metadata"]["generation"] += 1
    expected["metadata"]["resourceVersion"] = str(int(expected["metadata"]["resourceVersion"]) + 1)
    n = MAX_ETCD_REQUEST_BYTES - encoded_size(expected)
    patched = patch(raw, spec_patch(n))
    assert encoded_size(patched) == 1572864

    status, out = refused(lambda: patch(raw, spec_patch(n + 1)))
    assert (status, out) == (500, ETCD_500)
    with pytest.raises(TemporaryError):
        kb.patch(NAME, spec_patch(n + 1))
    assert get(raw) == patched


def test_etcds_limit_holds_for_the_status_subresource(raw):
    current = create(raw, job())

    def status_patch(k: int) -> dict[str, Any]:
        return {"status": {"conditions": [{"type": "Created", "status": "True", "reason": "TFJobCreated",
                                           "message": "x" * k}]}}

    expected = copy.deepcopy(current) | status_patch(0)
    expected["metadata"]["resourceVersion"] = str(int(expected["metadata"]["resourceVersion"]) + 1)
    n = MAX_ETCD_REQUEST_BYTES - encoded_size(expected)
    patched = patch_status(raw, status_patch(n))
    assert encoded_size(patched) == 1572864

    status, out = refused(lambda: patch_status(raw, status_patch(n + 1)))
    assert (status, out) == (500, ETCD_500)
    assert get(raw) == patched


def test_etcds_limit_can_answer_413_instead():
    with FakeKubeAPI(etcd_too_large_code=413) as server:
        raw = k8s.CustomObjectsApi(kube.host_client(server.host))
        status, out = refused(lambda: create(raw, padded(MAX_ETCD_REQUEST_BYTES)))
        assert (status, out["reason"], out["message"]) == (413, "RequestEntityTooLarge",
                                                           "etcdserver: request is too large")
        with pytest.raises(PermanentError) as info:
            KubeBackend.for_host(server.host).create(padded(MAX_ETCD_REQUEST_BYTES))
        assert not isinstance(info.value, Invalid)


# -- the request body: kube-apiserver's 3 MiB ----------------------------------------------------------------
def sent_size(body: dict[str, Any]) -> int:
    return len(json.dumps(body).encode())  # how the kubernetes client serializes a JSON body


def test_a_body_at_the_api_servers_limit_is_read_and_one_byte_over_is_413(raw, kb):
    n = MAX_BODY_BYTES - sent_size(padded(0))
    assert sent_size(padded(n)) == 3145728
    status, out = refused(lambda: create(raw, padded(n)))
    assert (status, out) == (500, ETCD_500)  # read and decoded; then too large for etcd

    status, out = refused(lambda: create(raw, padded(n + 1)))
    assert (status, out) == (413, BODY_413)
    with pytest.raises(PermanentError, match="answered 413: Request entity too large") as info:
        kb.create(padded(n + 1))
    assert not isinstance(info.value, (Invalid, TemporaryError))

    bad = padded(n + 1)  # the body limit comes before validation
    bad["metadata"]["labels"]["landfall.dev/v"] = "-"
    assert refused(lambda: create(raw, bad)) == (413, BODY_413)


def test_patch_bodies_over_the_api_servers_limit_are_413(raw):
    create(raw, job())
    big = "x" * MAX_BODY_BYTES
    assert refused(lambda: patch(raw, {"metadata": {"annotations": {"a": big}}})) == (413, BODY_413)
    assert refused(lambda: patch_status(raw, {"status": {"message": big}})) == (413, BODY_413)
    assert "status" not in get(raw)
