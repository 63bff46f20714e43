"""Bad manifests and data fail with a clear message and an exit code of the right class.

Permanent (1-127): the TFJob must not retry. These run ``python -m trainer.task`` as the TFJob
does, against the storage emulator; all but the corrupt-record case fail before TensorFlow loads.
"""

from __future__ import annotations

import base64
import dataclasses
import json

import google_crc32c
import pytest

from landfall.core.contracts.messages import Manifest
from landfall.core.services.storage import Storage
from tests.trainer.helpers import make_array, run_trainer, write_dataset
from trainer.errors import EXIT_INVALID, EXIT_NOT_FOUND, EXIT_USAGE

SMALL = ["--epochs", "1", "--batch-size-per-worker", "32", "--units", "8,4", "--verbose", "0"]


@pytest.fixture
def dataset(emulator_stack, bucket):
    storage: Storage = emulator_stack.storage
    prefix = f"gs://{bucket}/tfrecords/demo/arrival-1"
    return storage, bucket, prefix, write_dataset(storage, prefix, make_array(300), shards=2)


def _rewrite_manifest(storage: Storage, uri: str, **changes) -> None:
    manifest = Manifest.from_json(storage.read_bytes(uri))
    storage.write_bytes(uri, dataclasses.replace(manifest, **changes).to_json().encode())


def _fail(args: list[str], code: int, message: str, job_dir: str | None = None):
    proc = run_trainer([*args, *SMALL])
    assert proc.returncode == code, proc.stderr[-3000:]
    assert 1 <= code <= 127
    errors = [json.loads(line) for line in proc.stderr.splitlines()
              if line.startswith("{") and '"ERROR"' in line]
    assert any(message in e["message"] for e in errors), proc.stderr[-3000:]
    return proc


def test_missing_shard(dataset):
    storage, bucket, prefix, manifest = dataset
    storage.delete(f"{prefix}/part-00001-of-00002.tfrecord")
    job = f"gs://{bucket}/runs/missing-shard"
    _fail(["--manifest", manifest, "--job-dir", job], EXIT_NOT_FOUND,
          f"shard {prefix}/part-00001-of-00002.tfrecord listed in manifest {manifest} does not exist")
    metrics = json.loads(storage.read_bytes(f"{job}/metrics.json"))
    assert metrics["status"] == "failed" and metrics["retryable"] is False
    assert "does not exist" in metrics["error"]


def test_wrong_shape(dataset):
    storage, bucket, _, manifest = dataset
    _rewrite_manifest(storage, manifest, shape=[36, 12], stats=dataclasses.replace(
        Manifest.from_json(storage.read_bytes(manifest)).stats, mean=[0.0] * 12))
    _fail(["--manifest", manifest, "--job-dir", f"gs://{bucket}/runs/shape"], EXIT_INVALID,
          "instance shape is [36, 12], the model expects [36, 10]")


def test_wrong_dtype(dataset):
    storage, bucket, _, manifest = dataset
    _rewrite_manifest(storage, manifest, dtype="float64")
    _fail(["--manifest", manifest, "--job-dir", f"gs://{bucket}/runs/dtype"], EXIT_INVALID,
          "dtype is 'float64', the trainer reads 'float32' records")


def _corrupt_shard(storage: Storage, uri: str) -> bytes:
    data = bytearray(storage.read_bytes(uri))
    data[len(data) // 2] ^= 0xFF  # inside some record's payload
    storage.write_bytes(uri, bytes(data))
    return bytes(data)


def test_corrupt_record_is_caught_when_staging(dataset):
    storage, bucket, prefix, manifest = dataset
    _corrupt_shard(storage, f"{prefix}/part-00000-of-00002.tfrecord")
    _fail(["--manifest", manifest, "--job-dir", f"gs://{bucket}/runs/crc"], EXIT_INVALID,
          "part-00000-of-00002.tfrecord (manifest")


def test_corrupt_record_is_caught_by_the_reader(dataset):
    """A shard whose manifest agrees with its (corrupt) bytes: TFRecord's own record CRC catches it."""
    storage, bucket, prefix, manifest = dataset
    uri = f"{prefix}/part-00000-of-00002.tfrecord"
    data = _corrupt_shard(storage, uri)
    crc = base64.b64encode(google_crc32c.Checksum(data).digest()).decode()
    parsed = Manifest.from_json(storage.read_bytes(manifest))
    shards = [dataclasses.replace(s, crc32c=crc) if s.uri == uri else s for s in parsed.shards]
    _rewrite_manifest(storage, manifest, shards=shards)
    _fail(["--manifest", manifest, "--job-dir", f"gs://{bucket}/runs/record", "--validation-fraction", "0"],
          EXIT_INVALID, "corrupt record in a shard: corrupted record at")


def test_bad_arguments_and_missing_manifest(dataset):
    _storage, bucket, _prefix, manifest = dataset
    proc = run_trainer(["--manifest", manifest])
    assert proc.returncode == EXIT_USAGE and "--job-dir is required" in proc.stderr
    proc = run_trainer(["--manifest", manifest, "--job-dir", "/tmp/x", "--epochs", "0"])
    assert proc.returncode == EXIT_USAGE and "epochs must be >= 1" in proc.stderr
    _fail(["--manifest", f"gs://{bucket}/tfrecords/other", "--job-dir", f"gs://{bucket}/runs/none"],
          EXIT_NOT_FOUND, f"no manifest.json under gs://{bucket}/tfrecords/other/")
