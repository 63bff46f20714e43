"""The data-arrival stage against the real Pub/Sub emulator and fake-gcs-server."""

from __future__ import annotations

import gzip
import io
import json
import logging
import zipfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from landfall.arrival import handler as arrival
from landfall.core.contracts import layout
from landfall.core.contracts.events import ObjectEvent
from landfall.core.contracts.messages import REQUEST_SCHEMA, Manifest
from landfall.core.errors import TemporaryError
from landfall.core.quality.profile import Profile
from landfall.local.synthetic import time_series
from tests.conftest import pull_all
from tests.landfall.arrival import badfiles
from tests.support import read_back

N = 600


@pytest.fixture(scope="module")
def data() -> np.ndarray:
    return time_series(N, seed=3)


def put(storage, bucket: str, name: str, payload: bytes) -> ObjectEvent:
    uri = f"gs://{bucket}/{name}"
    storage.write_bytes(uri, payload)
    info = storage.stat(uri)
    return ObjectEvent(bucket, name, info.generation, info.size, info.crc32c)


def npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=True)
    return buf.getvalue()


def csv_bytes(arr: np.ndarray, header: bool = False) -> bytes:
    rows = arr.reshape(len(arr), -1)
    head = (",".join(f"v{i}" for i in range(rows.shape[1])) + "\n") if header else ""
    return (head + "\n".join(",".join(repr(float(v)) for v in r) for r in rows) + "\n").encode()


def parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()



def load_manifest(storage, bucket: str, obj: ObjectEvent) -> Manifest:
    aid = layout.arrival_id(obj.name, obj.generation)
    uri = f"gs://{bucket}/tfrecords/{obj.name.split('/')[1]}/{aid}/manifest.json"
    return Manifest.from_json(storage.read_bytes(uri), uri)


def encodings(arr: np.ndarray) -> dict[str, bytes]:
    flat = arr.reshape(len(arr), -1)
    buf = io.BytesIO()
    np.savez_compressed(buf, instances=arr)
    return {
        "a.npy": npy_bytes(arr),
        "a.npz": buf.getvalue(),
        "a.csv": csv_bytes(arr),
        "with-header.csv": csv_bytes(arr, header=True),
        "a.csv.gz": gzip.compress(csv_bytes(arr)),
        "columns.parquet": parquet_bytes(pa.table({f"c{i}": flat[:, i] for i in range(flat.shape[1])})),
        "list.parquet": parquet_bytes(pa.table({"x": pa.FixedSizeListArray.from_arrays(pa.array(flat.ravel()), 360)})),
    }


@pytest.mark.parametrize("name", ["a.npy", "a.npz", "a.csv", "with-header.csv", "a.csv.gz", "columns.parquet",
                                  "list.parquet"])
def test_every_format_converts_exactly_and_publishes_one_request(
        emulator_stack, bucket, topic, arrival_runtime, data, name):
    rt = arrival_runtime(shard_target_bytes=300_000)
    obj = put(rt.storage, bucket, f"incoming/sensors/{name}", encodings(data)[name])
    assert arrival.handle(obj, rt) == "converted"
    manifest = load_manifest(rt.storage, bucket, obj)
    assert manifest.count == N and manifest.shape == [36, 10] and len(manifest.shards) == 3
    assert [s.uri.rsplit("/", 1)[1] for s in manifest.shards] == [
        f"part-0000{i}-of-00003.tfrecord" for i in range(3)]
    np.testing.assert_array_equal(read_back(rt.storage, manifest), data)
    np.testing.assert_allclose(manifest.stats.mean, data.reshape(-1, 10).mean(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(manifest.stats.max, data.reshape(-1, 10).max(0), rtol=1e-6)
    assert manifest.source.generation == obj.generation and manifest.source.size == obj.size
    for shard in manifest.shards:  # our CRC32C matches what Cloud Storage computed
        assert rt.storage.stat(shard.uri).crc32c == shard.crc32c
    (msg,) = pull_all(rt.pubsub, topic, expect=1)
    body = json.loads(msg.data)
    assert body["schema"] == REQUEST_SCHEMA and body["reason"] == "arrival" and body["dataset"] == "sensors"
    assert body["manifest"].endswith("/manifest.json") and msg.attributes["request_id"] == body["request_id"]
    assert body["request_id"] == layout.request_id(bucket, obj.name, obj.generation)
    assert not rt.storage.list(f"gs://{bucket}/tmp/")  # temporaries of a successful attempt are gone


def test_redelivery_makes_one_manifest_and_same_request_id(emulator_stack, bucket, topic, arrival_runtime, data):
    rt = arrival_runtime(shard_target_bytes=300_000)
    obj = put(rt.storage, bucket, "incoming/sensors/a.npy", npy_bytes(data))
    outcomes = [arrival.handle(obj, rt) for _ in range(3)]
    assert outcomes == ["converted", "duplicate", "duplicate"]
    objects = rt.storage.list(f"gs://{bucket}/tfrecords/")
    # 3 shards + the manifest + the arrival's profile, and the dataset's reference holding it once
    assert len(objects) == 6 and sum(u.endswith("/profile.json") for u in objects) == 1
    assert objects[0] == f"gs://{bucket}/tfrecords/sensors/_reference.json"
    reference, raw = Profile.from_json(rt.storage.read_bytes(objects[0]))
    assert reference.arrivals == 1 and len(raw["near"]) == 1
    messages = pull_all(rt.pubsub, topic, expect=3)
    assert len({json.loads(m.data)["request_id"] for m in messages}) == 1


def test_crash_mid_conversion_is_repaired_by_the_retry(
        emulator_stack, bucket, topic, arrival_runtime, data, monkeypatch):
    rt = arrival_runtime(shard_target_bytes=300_000)
    obj = put(rt.storage, bucket, "incoming/sensors/a.npy", npy_bytes(data))
    real_open = rt.storage.open_write  # the converter's shards, each opened as it is written
    calls = {"n": 0}

    def crash_after_first_shard(uri):
        calls["n"] += 1
        if calls["n"] == 2:
            raise TemporaryError("simulated crash: instance lost mid-conversion")
        return real_open(uri)

    monkeypatch.setattr(rt.storage, "open_write", crash_after_first_shard)
    with pytest.raises(TemporaryError):
        arrival.handle(obj, rt)
    assert not [u for u in rt.storage.list(f"gs://{bucket}/tfrecords/") if u.endswith("manifest.json")]
    assert pull_all(rt.pubsub, topic, timeout_s=3) == []
    monkeypatch.setattr(rt.storage, "open_write", real_open)
    assert arrival.handle(obj, rt) == "converted"
    np.testing.assert_array_equal(read_back(rt.storage, load_manifest(rt.storage, bucket, obj)), data)
    assert len(pull_all(rt.pubsub, topic, expect=1)) == 1


def test_crash_between_manifest_and_publish_is_repaired(
        emulator_stack, bucket, topic, arrival_runtime, data, monkeypatch):
    rt = arrival_runtime()
    obj = put(rt.storage, bucket, "incoming/sensors/a.npy", npy_bytes(data[:50]))
    real_publish = rt.pubsub.publish

    def down(*args, **kwargs):
        raise TemporaryError("Pub/Sub unavailable")

    monkeypatch.setattr(rt.pubsub, "publish", down)
    with pytest.raises(TemporaryError):
        arrival.handle(obj, rt)
    monkeypatch.setattr(rt.pubsub, "publish", real_publish)
    assert arrival.handle(obj, rt) == "duplicate"
    (msg,) = pull_all(rt.pubsub, topic, expect=1)
    assert json.loads(msg.data)["request_id"] == layout.request_id(bucket, obj.name, obj.generation)


def test_objects_outside_incoming_are_ignored(emulator_stack, bucket, arrival_runtime, data):
    rt = arrival_runtime()
    for name in ("tfrecords/sensors/x/manifest.json", "rejected/sensors/x.json", "runs/j/metrics.json"):
        assert arrival.handle(put(rt.storage, bucket, name, b"{}"), rt) == "ignored"
    assert rt.storage.list(f"gs://{bucket}/rejected/sensors/") == [f"gs://{bucket}/rejected/sensors/x.json"]


def test_nonfinite_rows_dropped_and_counted_when_configured(emulator_stack, bucket, topic, arrival_runtime, data):
    rt = arrival_runtime(drop_nonfinite=True)
    bad = data[:100].copy()
    bad[[5, 17, 50], 3, 2] = [np.nan, np.inf, -np.inf]
    obj = put(rt.storage, bucket, "incoming/sensors/a.npy", npy_bytes(bad))
    assert arrival.handle(obj, rt) == "converted"
    manifest = load_manifest(rt.storage, bucket, obj)
    assert manifest.count == 97 and manifest.dropped_nonfinite == 3
    np.testing.assert_array_equal(read_back(rt.storage, manifest), np.delete(bad, [5, 17, 50], axis=0))


def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def _bomb() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("x.npy", npy_bytes(np.zeros((20000, 36, 10), "<f4")))
    return buf.getvalue()


def _npy_with_shape(shape: str) -> bytes:
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }"
    header = header.ljust(118) + "\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + b"\0" * 1440


BAD_INPUTS = {
    "empty.csv": (b"", "empty_file"),
    "header-only.csv": (b"a,b,c\n", "wrong_column_count"),
    "header-only-full.csv": ((",".join(f"v{i}" for i in range(360)) + "\n").encode(), "no_instances"),
    "wrong-columns.csv": (b"1,2,3\n4,5,6\n", "wrong_column_count"),
    "ragged.csv": (("1," * 359 + "1\n" + "1," * 358 + "1\n").encode(), "ragged_rows"),
    "non-numeric.csv": (("1," * 359 + "1\n" + "1," * 359 + "abc\n").encode(), "non_numeric"),
    "nan.csv": (("1," * 359 + "1\n" + "1," * 359 + "nan\n").encode(), "non_finite"),
    "inf.npy": (npy_bytes(np.full((3, 36, 10), np.inf, "<f4")), "non_finite"),
    "truncated.npy": (npy_bytes(np.ones((10, 36, 10), "<f4"))[:-100], "corrupt_npy"),
    "garbage.npy": (b"this is not numpy at all" * 10, "corrupt_npy"),
    "ints.npy": (npy_bytes(np.ones((3, 36, 10), np.int64)), "bad_dtype"),
    "objects.npy": (npy_bytes(np.array([[[object()] * 10] * 36] * 2, dtype=object)), "bad_dtype"),
    "absurd.npy": (_npy_with_shape("(4000000000000, 36, 10)"), "absurd_shape"),
    "zero.npy": (npy_bytes(np.ones((0, 36, 10), "<f4")), "zero_length"),
    "zero-dim.npy": (npy_bytes(np.ones((5, 0, 10), "<f4")), "zero_length"),
    "shape.npy": (npy_bytes(np.ones((5, 36, 9), "<f4")), "shape_mismatch"),
    "several.npz": (_npz(a=np.ones((2, 36, 10), "<f4"), b=np.ones((2, 36, 10), "<f4")), "npz_several_arrays"),
    "bomb.npz": (_bomb(), "compression_bomb"),
    "corrupt.npz": (b"PK\x03\x04 definitely not a zip", "corrupt_npz"),
    "corrupt-deflate.npz": (badfiles.corrupt_deflate_npz(), "corrupt_npz"),
    "encrypted.npz": (badfiles.encrypted_npz(time_series(3), b"secret"), "encrypted_npz"),
    "deflate64.npz": (badfiles.deflate64_npz(time_series(3)), "unsupported_npz"),
    "unclosed-header.npy": (badfiles.unclosed_header_npy(), "corrupt_npy"),
    "corrupt.csv.gz": (b"\x1f\x8b\x08\x00garbage-garbage-garbage", "corrupt_gzip"),
    "not-gzip.csv.gz": (b"1,2,3\n4,5,6\n", "corrupt_gzip"),  # a plain CSV named .csv.gz: no gzip magic
    "bad.parquet": (b"PAR1 nope PAR1", "corrupt_parquet"),
    "ints.parquet": (parquet_bytes(pa.table({f"c{i}": [1, 2] for i in range(360)})), "bad_dtype"),
    "lzo.parquet": (badfiles.lzo_parquet(time_series(3).reshape(3, -1)), "unsupported_parquet"),
    "data.txt": (b"1,2,3\n", "unsupported_format"),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_is_rejected_loudly_and_leaves_nothing(
        emulator_stack, bucket, topic, arrival_runtime, name, caplog):
    payload, reason = BAD_INPUTS[name]
    rt = arrival_runtime()
    obj = put(rt.storage, bucket, f"incoming/sensors/{name}", payload)
    with caplog.at_level(logging.ERROR, logger="landfall"):
        assert arrival.handle(obj, rt) == "rejected"
    uri = f"gs://{bucket}/rejected/sensors/{layout.arrival_id(obj.name, obj.generation)}.json"
    record = json.loads(rt.storage.read_bytes(uri))
    assert record["reason"] == reason, record
    assert record["detail"] and record["source"]["name"] == obj.name
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and reason in errors[0].getMessage() and name in errors[0].getMessage()
    assert rt.storage.list(f"gs://{bucket}/tfrecords/") == []
    assert rt.storage.list(f"gs://{bucket}/tmp/") == []
    assert pull_all(rt.pubsub, topic, timeout_s=3) == []


@pytest.mark.parametrize("name,reason,where", [
    ("incoming/sensors/../escape.npy", "bad_object_name", "sensors"),
    ("incoming/dätä/a.npy", "bad_dataset_name", "_invalid"),
])
def test_bad_object_names_are_rejected(emulator_stack, bucket, topic, arrival_runtime, data, name, reason, where):
    rt = arrival_runtime()
    obj = ObjectEvent(bucket, name, 1)
    assert arrival.handle(obj, rt) == "rejected"
    (uri,) = rt.storage.list(f"gs://{bucket}/rejected/{where}/")
    assert json.loads(rt.storage.read_bytes(uri))["reason"] == reason


def test_spaces_and_non_ascii_in_file_names_are_accepted(emulator_stack, bucket, topic, arrival_runtime, data):
    rt = arrival_runtime()
    obj = put(rt.storage, bucket, "incoming/sensors/mesures d'été 2026.npy", npy_bytes(data[:10]))
    assert arrival.handle(obj, rt) == "converted"
    assert load_manifest(rt.storage, bucket, obj).count == 10
