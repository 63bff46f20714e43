"""Hostile bodies on every queue and in every record reader (#46): valid JSON of the wrong type, invalid UTF-8,
empty and huge bodies, and objects whose fields have any type at all. Each reader answers with its value or one
``Invalid`` whose message is one short line naming the thing; nothing else ever escapes (no ``AttributeError`` from
``body.get`` on a list, no ``TypeError`` from a field that is a number)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from landfall.core.artifacts import champion, detections, results, snapshots
from landfall.core.contracts import events, messages
from landfall.core.contracts.messages import JobInputs, Manifest, TrainingRequest, peeked
from landfall.core.errors import Invalid
from landfall.core.quality import quarantine

# Any JSON value; objects that use the contracts' own field names with values of any type; bytes that are not
# UTF-8; bodies that are empty, blank or deep; and a large body.
FIELDS = ["schema", "dataset", "request_id", "manifest", "reason", "arrival", "arrival_id", "source", "shards",
          "shape", "count", "stats", "job", "model", "status", "epochs", "message", "seq", "run", "manifests",
          "requests", "ranges", "summary", "generation", "bucket", "name"]
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8),
                                                                                        inner, max_size=3),
                      max_leaves=8)
OBJECTS = st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=8)
SCHEMAS = st.sampled_from([messages.REQUEST_SCHEMA, messages.MANIFEST_SCHEMA, messages.INPUTS_SCHEMA,
                           results.RESULT_SCHEMA, detections.SUMMARY_SCHEMA,
                           detections.SCORE_REQUEST_SCHEMA, champion.CHAMPION_SCHEMA, snapshots.SNAPSHOT_SCHEMA,
                           quarantine.ADMISSION_SCHEMA, "x"])


@st.composite
def with_schema(draw) -> dict:
    doc = draw(OBJECTS)
    doc["schema"] = draw(SCHEMAS)
    return doc


BODIES = st.one_of(
    VALUES.map(lambda v: json.dumps(v).encode()),
    OBJECTS.map(lambda v: json.dumps(v).encode()),
    with_schema().map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=64),
    st.sampled_from([b"", b"   ", b"\xff\xfe\x00", b"\xc3\x28", b"[" * 5000, b'{"a":' * 40 + b"1" + b"}" * 40,
                     b"null", b"[]", b'"x"', b"42", b"true",
                     b'{"dataset": "' + b"d" * 2_000_000 + b'"}', b"[" + b"1," * 300_000 + b"1]"]),
)


def _one_line(exc: Exception) -> None:
    text = str(exc)
    assert "\n" not in text and 0 < len(text) <= 600, text[:300]


READERS = {
    "training request": lambda b: TrainingRequest.from_message(b, {}),
    "score request": lambda b: detections.parse_request(b, {}),
    "manifest": lambda b: Manifest.from_json(b, "manifest gs://b/m.json"),
    "job inputs": lambda b: JobInputs.from_json(b, "inputs gs://b/i.json"),
    "result": lambda b: results.Result.from_json(b, "result gs://b/r.json"),
    "detection summary": lambda b: detections.Summary.from_json(b, "gs://b/scores/s.json"),
    "champion": lambda b: champion.Champion.from_json(b, "champion gs://b/c.json"),
    "snapshot": lambda b: snapshots.Snapshot.from_json(b, "snapshot gs://b/s.json"),
    "admission": lambda b: quarantine.Admission.from_json(b, "admission gs://b/a.json"),
    "record": lambda b: messages.loads_object(b, "gs://b/metrics.json"),
}


@pytest.mark.parametrize("reader", sorted(READERS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(body=BODIES)
def test_every_reader_answers_any_body_with_its_value_or_one_line(reader, body):
    try:
        READERS[reader](body)
    except Invalid as exc:
        _one_line(exc)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(body=BODIES, attributes=st.dictionaries(st.sampled_from(["dataset", "objectId", "x"]), st.text(max_size=30),
                                               max_size=3))
def test_a_peeked_dead_letter_is_shown_whatever_its_body(body, attributes):
    seen = peeked(body, attributes, "dead letter 7")
    assert set(seen) == {"dataset", "request_id", "manifest", "arrival", "unreadable"}
    assert all(v is None or (isinstance(v, str) and len(v) < 400) for v in seen.values())
    try:
        is_object = isinstance(json.loads(body.decode("utf-8")), dict)
    except (ValueError, RecursionError):
        is_object = False
    if is_object and b"[" * 5000 not in body and b'{"a":' * 40 not in body:
        assert seen["unreadable"] is None
    else:
        assert seen["unreadable"] and seen["unreadable"].startswith("dead letter 7 is ")
        _one_line(Invalid(seen["unreadable"]))


def test_the_wrong_json_type_is_named_and_empty_is_empty():
    for body, kind in ((b"[]", "list"), (b'"x"', "str"), (b"42", "int"), (b"null", "null"), (b"1.5", "float")):
        with pytest.raises(Invalid, match=rf"^gs://b/m\.json is JSON but not an object \(a {kind}\)$"):
            messages.loads_object(body, "gs://b/m.json")
    for body in (b"", b" \n"):
        with pytest.raises(Invalid, match=r"^gs://b/m\.json is empty$"):
            messages.loads_object(body, "gs://b/m.json")
    with pytest.raises(Invalid, match=r"is not JSON: .*utf-8"):
        messages.loads_object(b"\xff", "gs://b/m.json")


@settings(max_examples=100, deadline=None)
@given(data=st.one_of(st.none(), VALUES, st.dictionaries(st.sampled_from(["message", "subscription"]), VALUES)),
       kind=st.sampled_from([events.PUBSUB_PUBLISHED, "google.cloud.storage.object.v1.finalized", "x"]))
def test_a_cloud_event_of_any_shape_is_a_message_or_one_line(data, kind):
    event = {"type": kind, "data": data, "id": "1"}
    for parse in (events.pubsub_message, events.object_event):
        try:
            parse(event)
        except Invalid as exc:
            _one_line(exc)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(evaluation=st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(
    max_size=8), lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.sampled_from(["loss", "detector", "x"]), inner, max_size=3), max_leaves=6))
def test_a_champions_evaluation_of_any_json_type_reads_as_its_value_or_none(evaluation):
    """A champion.json whose ``evaluation`` (or its ``loss``, ``detector``) is valid JSON of another type: ``loss`` is
    a number or None and ``detector`` a name or None (status, the page and the verdict read them), never a crash."""
    import json

    doc = {"schema": champion.CHAMPION_SCHEMA, "dataset": "d", "run": "r", "model": "m", "seq": 1, "reason": "first",
           "promoted_by": "trainer", "evaluation": evaluation}
    current = champion.Champion.from_json(json.dumps(doc), "champion gs://b/c.json")
    found = evaluation if isinstance(evaluation, dict) else {}
    loss, detector = found.get("loss"), found.get("detector")
    number = isinstance(loss, int | float) and not isinstance(loss, bool)
    assert current.loss == (float(loss) if number else None)
    assert current.detector == (detector if isinstance(detector, str) else None)
