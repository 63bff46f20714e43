"""A request whose data cannot be found never blocks its dataset; hostile requests are refused at the edge.

Against the Cloud Storage emulator and the local backend: a pending request whose manifest was deleted is
rejected for good by the next release (or reconcile pass) and the others are released; one whose manifest
exists but is not listed is retried within ``LISTING_LAG_S``, then rejected; ``landfall status`` shows both.
"""

from __future__ import annotations

import json

import pytest

from landfall.cli import status
from landfall.core.contracts import layout
from landfall.core.contracts.messages import TrainingRequest
from landfall.core.errors import TemporaryError
from landfall.submit import coalesce, jobmeta
from landfall.submit.backends.local import LocalBackend
from landfall.submit.handler import handle_message
from tests.support import convert_arrival, copy_arrival, inputs_of, pending_of, runtime, set_state


def _record(storage, bucket: str, dataset: str, request_id: str) -> dict:
    return json.loads(storage.read_bytes(layout.gs(bucket, f"rejected/{dataset}/request-{request_id}.json")))


def _waiting_behind_a_running_job(emulator_stack, bucket, dataset, tmp_path):
    storage = emulator_stack.storage
    rt = runtime(emulator_stack, bucket, LocalBackend(tmp_path / "state"))
    first = convert_arrival(storage, bucket, dataset, tmp_path)
    assert handle_message(first.to_json(), {}, rt) == "submitted"
    (head,) = rt.backend.list(dataset)
    set_state(rt.backend, jobmeta.name_of(head), "Running")
    return rt, first, head


@pytest.mark.parametrize("then", ["a_new_request", "reconcile"])
def test_a_pending_request_whose_manifest_was_deleted_is_rejected_and_the_dataset_moves_on(
        emulator_stack, bucket, tmp_path, then, capsys):
    storage = emulator_stack.storage
    rt, first, head = _waiting_behind_a_running_job(emulator_stack, bucket, "lost", tmp_path)
    doomed = copy_arrival(storage, first, 0)
    assert handle_message(doomed.to_json(), {}, rt) == "coalesced"
    storage.delete(doomed.manifest)  # a person cleaned up the arrival, or the lifecycle rule swept it

    report = status.collect(rt.config, storage, rt.backend, "lost")
    (shown,) = report["datasets"]["lost"]["latest_pending"]
    assert shown["request_id"] == doomed.request_id and shown["manifest_missing"] is True
    set_state(rt.backend, jobmeta.name_of(head), "Succeeded")

    if then == "a_new_request":
        later = copy_arrival(storage, first, 1)
        assert handle_message(later.to_json(), {}, rt) == "submitted"
        (follow,) = [j for j in rt.backend.list("lost") if jobmeta.name_of(j) != jobmeta.name_of(head)]
        assert [r["request_id"] for r in inputs_of(storage, follow).requests] == [later.request_id]
        assert doomed.manifest not in inputs_of(storage, follow).manifest_uris
    else:
        assert coalesce.reconcile(rt.backend, storage, rt.config) == []  # nothing left to train for
    assert pending_of(storage, bucket, "lost") == []
    record = _record(storage, bucket, "lost", doomed.request_id)
    assert record["reason"] == "NotFound" and "no longer exists" in record["detail"]
    assert record["request"]["manifest"] == doomed.manifest
    # Shown as resolved: a rejection, no longer waiting.
    after = status.collect(rt.config, storage, rt.backend, "lost")["datasets"]["lost"]
    assert "latest_pending" not in after
    assert any("no longer exists" in r["detail"] for r in after["latest_rejections"])
    # A redelivery of the rejected request is a duplicate: it is not pending again.
    assert handle_message(doomed.to_json(), {}, rt) == "rejected"  # its manifest is gone: refused at the edge
    assert pending_of(storage, bucket, "lost") == []


def test_an_existing_manifest_the_listing_lacks_is_retried_within_the_bound_then_rejected(
        emulator_stack, bucket, tmp_path, monkeypatch):
    storage = emulator_stack.storage
    rt, first, head = _waiting_behind_a_running_job(emulator_stack, bucket, "lag", tmp_path)
    # A manifest in the bucket but not one of the dataset's (past the edge's check: a request of an older
    # version, or a listing that lags): recorded pending while the head runs.
    stray = layout.gs(bucket, "incoming/lag/manifest.json")
    storage.write_bytes(stray, storage.read_bytes(first.manifest))
    odd = TrainingRequest("lag", stray, "stray1")
    assert coalesce.submit(odd, rt.config, rt.backend, storage, rt.layout).outcome == "coalesced"
    good = copy_arrival(storage, first, 0)
    assert handle_message(good.to_json(), {}, rt) == "coalesced"
    set_state(rt.backend, jobmeta.name_of(head), "Succeeded")

    with pytest.raises(TemporaryError, match=r"listing lag.*retried for 300 s"):
        coalesce.reconcile(rt.backend, storage, rt.config)
    assert pending_of(storage, bucket, "lag") == sorted([odd.request_id, good.request_id])
    monkeypatch.setattr(coalesce, "LISTING_LAG_S", 0.0)  # the bound has passed
    (released,) = coalesce.reconcile(rt.backend, storage, rt.config)
    (follow,) = [j for j in rt.backend.list("lag") if jobmeta.name_of(j) == released]
    assert [r["request_id"] for r in inputs_of(storage, follow).requests] == [good.request_id]
    assert pending_of(storage, bucket, "lag") == []
    record = _record(storage, bucket, "lag", odd.request_id)
    assert record["reason"] == "Invalid" and "still lacks" in record["detail"]


def test_a_manifest_that_is_not_one_of_the_datasets_is_refused_at_the_edge(emulator_stack, bucket, tmp_path):
    storage = emulator_stack.storage
    rt = runtime(emulator_stack, bucket, LocalBackend(tmp_path / "state"))
    first = convert_arrival(storage, bucket, "edge", tmp_path)
    stray = layout.gs(bucket, "incoming/edge/manifest.json")
    storage.write_bytes(stray, storage.read_bytes(first.manifest))
    assert handle_message(TrainingRequest("edge", stray, "stray2").to_json(), {}, rt) == "rejected"
    assert "not one of dataset edge's manifests" in _record(storage, bucket, "edge", "stray2")["detail"]
    assert pending_of(storage, bucket, "edge") == [] and rt.backend.list("edge") == []


def _hostile(bucket: str) -> dict[str, bytes]:
    good = {"schema": "landfall.request/v1", "dataset": "hostile",
            "manifest": f"gs://{bucket}/tfrecords/hostile/a/manifest.json", "request_id": "r1"}
    return {
        "nested-100000": b'{"schema": "landfall.request/v1", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "request-id-1100-bytes": json.dumps({**good, "request_id": "r" * 1100}).encode(),
        "dataset-with-newline": json.dumps({**good, "dataset": "hostile\n"}).encode(),
        "field-of-10-mb": json.dumps({**good, "reason": "x" * 10_000_000}).encode(),
    }


def test_hostile_requests_are_rejected_and_recorded_small(emulator_stack, bucket, tmp_path):
    storage = emulator_stack.storage
    rt = runtime(emulator_stack, bucket, LocalBackend(tmp_path / "state"))
    for data in _hostile(bucket).values():
        assert handle_message(data, {}, rt) == "rejected"
    records = storage.list_objects(layout.gs(bucket, "rejected/"))
    assert len(records) == 4
    where = sorted(r.uri.split("/rejected/", 1)[1].split("/")[0] for r in records)
    assert where == ["_invalid", "_invalid", "hostile", "hostile"]  # nested, newline: no valid dataset
    assert max(r.size for r in records) < 8 * 1024
    assert storage.list(layout.gs(bucket, "requests/")) == [] and storage.list(layout.gs(bucket, "received/")) == []


def test_with_landfall_bucket_unset_no_request_writes_to_the_bucket_it_names(emulator_stack, bucket, tmp_path):
    storage = emulator_stack.storage
    request = convert_arrival(storage, bucket, "nobucket", tmp_path)
    rt = runtime(emulator_stack, "", LocalBackend(tmp_path / "state"))
    with pytest.raises(TemporaryError, match="LANDFALL_BUCKET is not set"):
        handle_message(request.to_json(), {}, rt)
    assert handle_message(b"not json", {}, rt) == "rejected"  # logged only
    bad = TrainingRequest("nobucket", layout.gs(bucket, "tfrecords/nobucket/gone/manifest.json"), "gone1")
    with pytest.raises(TemporaryError):
        handle_message(bad.to_json(), {}, rt)
    for prefix in ("requests/", "received/", "rejected/", "runs/"):
        assert storage.list(layout.gs(bucket, prefix)) == [], prefix
    assert rt.backend.list() == []
