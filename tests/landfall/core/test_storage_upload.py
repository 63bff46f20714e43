"""``Storage.upload`` of a file over ``UPLOAD_CHUNK``, against fake-gcs-server: the object arrives intact, sent as
one streamed ``uploadType=media`` request to the emulator, or as a resumable upload in ``UPLOAD_CHUNK`` chunks (the
Cloud Storage path, here driven against the same emulator). The requests are recorded on the way, not answered:
the emulator serves every one. Why the emulator gets the streamed request: docs/benchmarks.md, "The local stack's
memory"."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from landfall.core.services import storage as storage_mod
from landfall.core.services.storage import Storage

CHUNK = 1024 * 1024  # a multiple of 256 KiB, as Cloud Storage requires of every chunk but the last


def big_file(path: Path, size: int) -> bytes:
    data = os.urandom(size)
    path.write_bytes(data)
    return data


def recorded(storage: Storage) -> list[dict[str, Any]]:
    """Every request the client sends from now on (method, upload type, Content-Range), passed on unchanged."""
    seen: list[dict[str, Any]] = []
    http = storage.client._http
    send = http.request

    def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        params = kwargs.get("params") or {}
        headers = kwargs.get("headers") or {}
        query = parse_qs(urlsplit(url).query)
        kind = params.get("uploadType") or query.get("uploadType", [None])[0]
        seen.append({"method": method, "url": url, "upload": kind,
                     "range": headers.get("content-range") or headers.get("Content-Range")})
        return send(method, url, *args, **kwargs)

    http.request = request
    return seen


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(storage_mod, "UPLOAD_CHUNK", CHUNK)
    return CHUNK


def test_a_big_file_goes_to_the_emulator_as_one_streamed_request_and_arrives_intact(
        emulator_stack, bucket, tmp_path, small_chunks) -> None:
    src = tmp_path / "big.npy"
    data = big_file(src, 3 * small_chunks + 12345)
    storage = Storage(emulator_stack.project)
    seen = recorded(storage)
    uri = f"gs://{bucket}/incoming/ds/big.npy"
    storage.upload(src, uri)
    uploads = [r for r in seen if "/upload/" in r["url"]]
    assert [(r["method"], r["upload"]) for r in uploads] == [("POST", "media")]
    assert storage.read_bytes(uri) == data
    info = storage.stat(uri)
    assert info.size == len(data)
    # A file at the threshold or under it takes the client's own path (one request, no streaming needed).
    small = tmp_path / "small.npy"
    small_data = big_file(small, small_chunks)
    storage.upload(small, f"gs://{bucket}/incoming/ds/small.npy")
    assert storage.read_bytes(f"gs://{bucket}/incoming/ds/small.npy") == small_data
    assert [r["upload"] for r in seen if "/upload/" in r["url"]][1:] == ["multipart"]


def test_on_cloud_storage_a_big_file_goes_resumable_in_upload_chunk_pieces(
        emulator_stack, bucket, tmp_path, small_chunks, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "big.npy"
    # Over the client's one-request limit (8 MiB, google-cloud-storage's _MAX_MULTIPART_SIZE), as every file over
    # UPLOAD_CHUNK (32 MiB) is.
    data = big_file(src, 9 * small_chunks + 777)
    storage = Storage(emulator_stack.project)
    storage.client  # noqa: B018  the client keeps the emulator's endpoint; upload() then takes the Cloud Storage path
    monkeypatch.delenv("STORAGE_EMULATOR_HOST")
    seen = recorded(storage)
    uri = f"gs://{bucket}/incoming/ds/big.npy"
    storage.upload(src, uri)
    uploads = [r for r in seen if "/upload/" in r["url"] or r["range"]]
    assert uploads[0]["method"] == "POST" and uploads[0]["upload"] == "resumable"
    chunks = [r for r in uploads[1:] if r["method"] == "PUT"]
    assert len(chunks) == math.ceil(len(data) / small_chunks)
    total = len(data)
    assert [c["range"] for c in chunks] == [
        f"bytes {i}-{min(i + small_chunks, total) - 1}/{total}" for i in range(0, total, small_chunks)]
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator_stack.storage_url)
    assert storage.read_bytes(uri) == data


def test_a_writer_reaches_the_emulator_as_one_streamed_request_when_it_closes_and_not_at_all_if_it_fails(
        emulator_stack, bucket) -> None:
    """``open_write`` against the emulator: written to a local file, sent as one ``uploadType=media`` request on
    close (not a resumable upload in WRITE_CHUNK pieces, which fake-gcs-server keeps in memory whole), its CRC32C
    and size those of the bytes written; a block that raises leaves no object."""
    storage = Storage(emulator_stack.project)
    seen = recorded(storage)
    uri = f"gs://{bucket}/tfrecords/ds/a/part-00000.tfrecord"
    pieces = [os.urandom(storage_mod.WRITE_CHUNK // 3) for _ in range(4)]  # over one WRITE_CHUNK in all
    with storage.open_write(uri) as out:
        for piece in pieces:
            out.write(piece)
        assert not [r for r in seen if "/upload/" in r["url"]]  # nothing sent while the writer is open
    assert [(r["method"], r["upload"]) for r in seen if "/upload/" in r["url"]] == [("POST", "media")]
    data = b"".join(pieces)
    assert storage.read_bytes(uri) == data
    assert (storage.stat(uri).size, storage.stat(uri).crc32c) == (len(data), out.crc32c) and out.size == len(data)
    broken = f"gs://{bucket}/tfrecords/ds/a/part-00001.tfrecord"
    with pytest.raises(RuntimeError, match="the writer's block failed"), storage.open_write(broken) as out:
        out.write(pieces[0])
        raise RuntimeError("the writer's block failed")
    assert not storage.exists(broken)


def test_on_cloud_storage_a_writer_is_a_resumable_upload_in_write_chunk_pieces(
        emulator_stack, bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    storage = Storage(emulator_stack.project)
    storage.client  # noqa: B018  the client keeps the emulator's endpoint; open_write then takes the Cloud Storage path
    monkeypatch.delenv("STORAGE_EMULATOR_HOST")
    seen = recorded(storage)
    uri = f"gs://{bucket}/tfrecords/ds/b/part-00000.tfrecord"
    data = os.urandom(storage_mod.WRITE_CHUNK + 4321)
    with storage.open_write(uri) as out:
        out.write(data)
    uploads = [r for r in seen if "/upload/" in r["url"] or r["range"]]
    assert uploads[0]["upload"] == "resumable" and len([r for r in uploads if r["method"] == "PUT"]) == 2
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator_stack.storage_url)
    assert storage.read_bytes(uri) == data
