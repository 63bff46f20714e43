"""Malformed and oversized messages are refused at the edge, in Cloud Storage's terms, and never crash a reader.

The object-name rule is Cloud Storage's, held here as data with its source; the names the stages derive from a
dataset and a request id are checked against it, not against what ``layout`` believes.
"""

from __future__ import annotations

import json
import logging

import pytest
from google.api_core import exceptions as gexc

from landfall.core.artifacts import rejections
from landfall.core.contracts import layout
from landfall.core.contracts.layout import Layout
from landfall.core.contracts.messages import MAX_DEPTH, Manifest, Rejection, TrainingRequest, decode, loads
from landfall.core.errors import AccessDenied, AlreadyExists, Invalid, NotFound, PermanentError, TemporaryError
from landfall.core.services import google_api
from landfall.core.services.storage import Storage

# https://cloud.google.com/storage/docs/objects#naming (read 2026-12): "Object names can contain any sequence
# of valid Unicode characters, of length 1-1024 bytes when UTF-8 encoded"; "cannot contain Carriage Return or
# Line Feed characters"; "avoid control characters that are illegal in XML 1.0 (#x7F-#x84 and #x86-#x9F)".
# XML 1.0's Char production (https://www.w3.org/TR/xml/#charsets) leaves out C0 but tab, LF and CR: avoided too.
GCS_OBJECT_NAME = {"source": "https://cloud.google.com/storage/docs/objects#naming", "read": "2026-12",
                   "max_utf8_bytes": 1024, "min_utf8_bytes": 1, "forbidden": ["\r", "\n"],
                   "avoid": [chr(c) for c in range(0x20) if c not in (0x9, 0xA, 0xD)]
                   + [chr(c) for c in range(0x7F, 0x85)] + [chr(c) for c in range(0x86, 0xA0)]}


def gcs_accepts(name: str) -> bool:
    rule = GCS_OBJECT_NAME
    size = len(name.encode("utf-8"))
    return (rule["min_utf8_bytes"] <= size <= rule["max_utf8_bytes"]
            and not any(c in name for c in rule["forbidden"]) and not any(c in name for c in rule["avoid"]))


def request(**fields) -> bytes:
    base = {"schema": "landfall.request/v1", "dataset": "ds", "manifest": "gs://b/tfrecords/ds/a/manifest.json",
            "request_id": "r1"}
    return json.dumps({**base, **fields}).encode()


@pytest.mark.parametrize("name", ["a" * 1024, "é" * 512, "a" * 1025, "é" * 513, "x\ny", "x\rz", "x\x85y",
                                  "x\x7fy", "x\ty", "x\x00y", "x\x1fy", "ok/name.json"])
def test_object_name_problem_agrees_with_cloud_storage(name):
    assert (layout.object_name_problem(name) is None) == gcs_accepts(name)


def test_the_longest_dataset_and_request_id_make_names_cloud_storage_accepts():
    lay = Layout()
    dataset, rid = "d" * 63, "r" * 128
    assert layout.valid_dataset(dataset) and layout.valid_request_id(rid)
    assert not layout.valid_dataset("d" * 64) and not layout.valid_request_id("r" * 129)
    names = [f"{lay.requests_prefix}{dataset}/pending/{rid}.json", f"{lay.received_prefix}{dataset}/{rid}.json",
             layout.rejection_name(lay, dataset, f"request-{rid}"), f"{lay.requests_prefix}{dataset}/head.json"]
    assert all(gcs_accepts(n) for n in names), names


@pytest.mark.parametrize("dataset", ["ds\n", "ds\r", "\nds", "d s", "ds\x00", "-ds", "é"])
def test_a_dataset_is_matched_whole(dataset):
    assert not layout.valid_dataset(dataset)
    with pytest.raises(Invalid, match="dataset"):
        TrainingRequest.from_message(request(dataset=dataset))


@pytest.mark.parametrize("rid", ["r" * 1100, "r\n", "../x", "r/1", "", " r"])
def test_a_request_id_that_cloud_storage_would_refuse_in_a_name_is_invalid(rid):
    with pytest.raises(Invalid) as err:
        TrainingRequest.from_message(request(request_id=rid))
    assert len(str(err.value)) < 400  # the 1,100 bytes are clipped, not repeated


@pytest.mark.parametrize("manifest", ["gs://b/" + "m" * 1030, "gs://b/x\n.json", "gs://b/", "gs:///x.json",
                                      "s3://b/x.json", 7])
def test_a_manifest_uri_that_is_no_cloud_storage_object_is_invalid(manifest):
    with pytest.raises(Invalid, match="manifest"):
        TrainingRequest.from_message(request(manifest=manifest))


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 1000, 100_000])
def test_json_nested_deep_is_invalid_not_a_recursion_error(depth):
    nested = "[" * depth + "]" * depth
    with pytest.raises(Invalid, match="nested deeper"):
        TrainingRequest.from_message(nested.encode())
    with pytest.raises(Invalid, match="nested deeper"):
        Manifest.from_json('{"schema": "landfall.manifest/v1", "x": ' + nested + "}")
    with pytest.raises(Invalid):
        decode(dict, nested, "landfall.inputs/v1", "inputs")


def test_a_deeply_nested_storage_notification_is_invalid():
    import base64

    from landfall.core.contracts import events

    data = base64.b64encode(b"[" * 100_000 + b"]" * 100_000).decode()
    event = {"type": "google.cloud.pubsub.topic.v1.messagePublished", "data": {"message": {
        "data": data, "attributes": {"eventType": "OBJECT_FINALIZE", "bucketId": "b", "objectId": "incoming/d/x"}}}}
    with pytest.raises(Invalid, match="nested deeper"):
        events.object_event(event)


def test_brackets_inside_strings_do_not_count_as_nesting():
    text = json.dumps({"a": "[" * 10_000, "b": [[1]]})
    assert loads(text, "x")["b"] == [[1]]


def test_a_10_mb_field_is_clipped_in_the_error():
    with pytest.raises(Invalid) as err:
        TrainingRequest.from_message(request(reason="x" * 10_000_000))
    assert len(str(err.value)) < 400


def _manifest(counts: list, count: int) -> str:
    return json.dumps({"schema": "landfall.manifest/v1", "dataset": "d", "arrival_id": "a",
                       "source": {"bucket": "", "name": "x", "generation": 1, "size": 1}, "shape": [36, 10],
                       "count": count, "stats": {"mean": [0] * 10, "std": [0] * 10, "min": [0] * 10, "max": [0] * 10},
                       "shards": [{"uri": f"s{i}", "count": c, "bytes": 10, "crc32c": "x"}
                                  for i, c in enumerate(counts)]})


@pytest.mark.parametrize("counts, count", [([10, -5], 5), ([10, "5"], 15), ([10.0], 10), ([True], 1), ([3], 3.0)])
def test_shard_counts_must_be_non_negative_integers_summing_to_count(counts, count):
    with pytest.raises(Invalid):
        Manifest.from_json(_manifest(counts, count))


def test_good_shard_counts_pass():
    assert Manifest.from_json(_manifest([10, 5], 15)).count == 15


# https://cloud.google.com/storage/docs/retry-strategy (read 2026-12): "408 Request Timeout", "429 Too Many
# Requests" and "5xx Server Error" are retryable; other 4xx are not. 404 and 409/412 have meanings of their own.
RETRY_RULE = {"source": "https://cloud.google.com/storage/docs/retry-strategy", "retryable": {408, 429},
              "retryable_from": 500}
# https://cloud.google.com/iam/docs/access-change-propagation (read 2026-12-01): a granted or revoked role takes
# effect only after minutes. 401/403 are therefore retried (and end dead-lettered), never a rejected input.
PROPAGATING = {"source": "https://cloud.google.com/iam/docs/access-change-propagation", "codes": {401, 403}}


def expected_class(code: int) -> type[Exception]:
    if code in PROPAGATING["codes"]:
        return AccessDenied
    if code in RETRY_RULE["retryable"] or code >= RETRY_RULE["retryable_from"]:
        return TemporaryError
    return {404: NotFound, 409: AlreadyExists, 412: AlreadyExists, 400: Invalid}.get(code, PermanentError)


@pytest.mark.parametrize("code", [400, 401, 403, 404, 405, 408, 409, 411, 412, 413, 416, 418, 429, 500, 502, 503,
                                  504, 507])
def test_every_storage_error_class_is_mapped(code):
    with pytest.raises(Exception) as err, google_api.mapped_errors("gs://b/x", "Cloud Storage"):
        raise gexc.from_http_status(code, "refused")
    assert type(err.value) is expected_class(code) or (
        expected_class(code) is PermanentError and isinstance(err.value, PermanentError)), type(err.value)
    assert not isinstance(err.value, gexc.GoogleAPIError)


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(self.format(record))


def test_a_rejection_record_and_its_log_line_are_bounded(tmp_path):
    handler = _Lines()
    logger = logging.getLogger("landfall.rejections")
    logger.addHandler(handler)
    try:
        huge = "y" * 10_000_000
        rejection = Rejection(stage="submit", reason="Invalid", detail="bad: " + huge, dataset="ds",
                              request={"schema": "landfall.request/v1", "dataset": "ds", "manifest": huge,
                                       "nested": {"k": huge}})
        uri = rejections.record(rejection, "training request r1", storage=Storage(), lay=Layout(),
                                bucket=None, key="request-r1")
        assert uri is None
        written = rejections.bounded(rejection).to_json()
    finally:
        logger.removeHandler(handler)
    assert len(written) < 8 * 1024
    record = json.loads(written)
    assert record["request"]["dataset"] == "ds" and "10000000 characters" in record["request"]["manifest"]
    assert handler.lines and max(len(line) for line in handler.lines) < 2 * rejections.MAX_DETAIL
