"""The one module that talks to Cloud Storage (``google-cloud-storage``); local paths work alike.

Every other module passes URIs (``gs://bucket/name`` or a local path) to ``Storage``. Against the
emulator, ``STORAGE_EMULATOR_HOST`` is honoured by the client itself; we only switch to anonymous
credentials so no Application Default Credentials are looked up.

Errors come out with their retry class (``landfall.core.services.google_api``): 404 -> ``NotFound``, 409/412 ->
``AlreadyExists``, 429/5xx/connection errors -> ``TemporaryError``.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import os
import posixpath
import shutil
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

import google_crc32c
from google.api_core.retry import Retry
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage as gcs
from google.cloud.storage.retry import DEFAULT_RETRY

from landfall.core.config import default_project
from landfall.core.contracts.layout import split_gs
from landfall.core.errors import AlreadyExists, NotFound, TemporaryError
from landfall.core.services import google_api

WRITE_CHUNK = 8 * 1024 * 1024  # resumable upload chunk: bounds memory per open writer
READ_CHUNK = 8 * 1024 * 1024
# ``upload`` of a file over this many bytes: on Cloud Storage a resumable upload in chunks of this size (a
# multiple of 256 KiB; the client holds one chunk, not the library's default 100 MiB); against the emulator one
# streamed single-request upload (``upload``'s docstring says why).
UPLOAD_CHUNK = 32 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class ObjectInfo:
    uri: str
    size: int
    generation: int
    crc32c: str | None
    metadata: dict[str, str] | None = None  # custom metadata (``x-goog-meta-*``)


def crc32c_b64(checksum: google_crc32c.Checksum) -> str:
    """Base64 of the big-endian CRC32C: the form Cloud Storage reports in ``crc32c``."""
    return base64.b64encode(checksum.digest()).decode()


def mapped_errors(what: str) -> contextlib.AbstractContextManager[None]:
    return google_api.mapped_errors(what, "Cloud Storage")


def is_gs(uri: str) -> bool:
    return uri.startswith("gs://")


def join(base: str, *parts: str) -> str:
    out = base.rstrip("/")
    for p in parts:
        out = f"{out}/{p.strip('/')}"
    return out


def resolve(manifest_uri: str, uri: str) -> str:
    """A URI a manifest names (a shard's), absolute: as written, or relative to the manifest's folder."""
    if is_gs(uri) or os.path.isabs(uri):
        return uri
    base = manifest_uri.rsplit("/", 1)[0]
    return join(base, uri) if is_gs(base) else posixpath.normpath(os.path.join(base, uri))


def _local_generation(data: bytes) -> int:
    """A positive stand-in for a generation on local disk: from the content (never 0, which means absent)."""
    return int.from_bytes(hashlib.sha256(data).digest()[:7], "big") | 1


class _ChecksumWriter:
    """Wraps a binary writer and keeps the CRC32C and size of what passed through."""

    def __init__(self, raw: BinaryIO):
        self.raw = raw
        self.checksum = google_crc32c.Checksum()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.checksum.update(data)
        self.size += len(data)
        return self.raw.write(data)

    @property
    def crc32c(self) -> str:
        return crc32c_b64(self.checksum)


class Storage:
    """``retry_deadline_s`` bounds the client's own retries of transient failures: past it the
    error surfaces as ``TemporaryError`` and the platform's retry (with its backoff) takes over,
    instead of a function instance spinning for the library's default two minutes."""

    def __init__(self, project: str | None = None, client: gcs.Client | None = None,
                 retry_deadline_s: float = 30.0):
        self._project = project
        self._client = client
        self.retry: Retry = DEFAULT_RETRY.with_timeout(retry_deadline_s)

    def bounded(self, retry_deadline_s: float) -> Storage:
        """This storage (its client shared) with its retries bounded by ``retry_deadline_s``: for a best-effort
        record written beside an error that is already being raised (``landfall.core.artifacts.failing``)."""
        return Storage(self._project, self._client, retry_deadline_s)

    @property
    def client(self) -> gcs.Client:
        if self._client is None:
            project = self._project or default_project()
            if os.environ.get("STORAGE_EMULATOR_HOST"):
                self._client = gcs.Client(project=project, credentials=AnonymousCredentials())
            else:
                self._client = gcs.Client(project=self._project)
        return self._client

    def _blob(self, uri: str, generation: int | None = None) -> gcs.Blob:
        bucket, name = split_gs(uri)
        return self.client.bucket(bucket).blob(name, generation=generation)

    # -- buckets ---------------------------------------------------------------------------------
    def ensure_bucket(self, bucket: str) -> None:
        with contextlib.suppress(AlreadyExists), mapped_errors(f"gs://{bucket}"):
            self.client.create_bucket(bucket, retry=self.retry)

    # -- metadata --------------------------------------------------------------------------------
    def stat(self, uri: str, generation: int | None = None) -> ObjectInfo:
        if not is_gs(uri):
            try:
                st = os.stat(uri)
            except FileNotFoundError:
                raise NotFound(f"{uri}: not found") from None
            return ObjectInfo(uri, st.st_size, int(st.st_mtime_ns), None)
        with mapped_errors(uri):
            blob = self._blob(uri, generation)
            blob.reload(retry=self.retry)
            return ObjectInfo(uri, int(blob.size or 0), int(blob.generation or 0), blob.crc32c)

    def exists(self, uri: str) -> bool:
        if not is_gs(uri):
            return os.path.exists(uri)
        with mapped_errors(uri):
            return self._blob(uri).exists(retry=self.retry)

    def list(self, prefix: str, suffix: str | tuple[str, ...] = "") -> list[str]:
        """URIs under ``prefix`` (a gs:// prefix or a local folder) ending with ``suffix`` (or one of them), sorted."""
        return [info.uri for info in self.list_objects(prefix, suffix)]

    def list_objects(self, prefix: str, suffix: str | tuple[str, ...] = "") -> list[ObjectInfo]:
        """As ``list``, with each object's size and generation (in Cloud Storage, its write time in µs)."""
        if not is_gs(prefix):
            root = Path(prefix)
            if not root.exists():
                return []
            return [ObjectInfo(str(p), p.stat().st_size, p.stat().st_mtime_ns // 1000, None)
                    for p in sorted(root.rglob("*")) if p.is_file() and str(p).endswith(suffix)]
        bucket, name = split_gs(prefix)
        with mapped_errors(prefix):
            return sorted(
                (ObjectInfo(f"gs://{bucket}/{b.name}", int(b.size or 0), int(b.generation or 0), b.crc32c, b.metadata)
                 for b in self.client.list_blobs(bucket, prefix=name, retry=self.retry) if b.name.endswith(suffix)),
                key=lambda info: info.uri,
            )

    def list_prefixes(self, prefix: str) -> list[str]:
        """The "folders" directly under ``prefix`` (a listing with delimiter ``/``), as sorted URIs ending in ``/``:
        one request's worth per page, whatever the objects below them hold."""
        if not is_gs(prefix):
            root = Path(prefix)
            return sorted(str(p) + "/" for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        bucket, name = split_gs(prefix)
        with mapped_errors(prefix):
            pages = self.client.list_blobs(bucket, prefix=name, delimiter="/", retry=self.retry)
            for _ in pages:  # the prefixes are filled in as the pages are read
                pass
            return sorted(f"gs://{bucket}/{p}" for p in pages.prefixes)

    # -- whole objects ---------------------------------------------------------------------------
    def read_bytes(self, uri: str, generation: int | None = None) -> bytes:
        """The object's bytes (of ``generation`` when given: ``NotFound`` once that generation is gone)."""
        if not is_gs(uri):
            try:
                return Path(uri).read_bytes()
            except FileNotFoundError:
                raise NotFound(f"{uri}: not found") from None
        with mapped_errors(uri):
            return self._blob(uri, generation).download_as_bytes(retry=self.retry)

    def write_bytes(self, uri: str, data: bytes, *, if_absent: bool = False,
                    content_type: str = "application/octet-stream", metadata: dict[str, str] | None = None) -> None:
        """One-request upload. ``if_absent`` makes it create-only (``AlreadyExists`` otherwise).

        One request on purpose: preconditions are honoured on single-request uploads everywhere,
        the emulator included (fake-gcs-server ignores them on resumable ones).
        """
        if not is_gs(uri):
            path = Path(uri)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")  # per writer thread
            tmp.write_bytes(data)
            if if_absent:
                try:
                    os.link(tmp, path)  # atomic create-if-absent
                except FileExistsError:
                    raise AlreadyExists(f"{uri}: already exists") from None
                finally:
                    tmp.unlink()
            else:
                os.replace(tmp, path)
            return
        with mapped_errors(uri):
            blob = self._blob(uri)
            blob.metadata = metadata
            blob.upload_from_string(
                data, content_type=content_type, if_generation_match=0 if if_absent else None, retry=self.retry,
            )

    def create(self, uri: str, data: bytes, *, content_type: str = "application/octet-stream",
               metadata: dict[str, str] | None = None) -> bool:
        """Writes ``data`` only if ``uri`` does not exist (``ifGenerationMatch=0``): False if it did. Of any
        number of concurrent creators exactly one gets True: the records that decide who acts use it."""
        try:
            self.write_bytes(uri, data, if_absent=True, content_type=content_type, metadata=metadata)
        except AlreadyExists:
            return False
        return True

    # -- conditional updates (compare-and-swap on the object's generation) -------------------------
    def read_generation(self, uri: str) -> tuple[bytes, int]:
        """The object's bytes and the generation they belong to (``NotFound`` if absent).

        On local disk the "generation" is a number derived from the content (there is no counter), which is
        enough for ``write_if_generation``: the same content is the same state."""
        if not is_gs(uri):
            try:
                data = Path(uri).read_bytes()
            except FileNotFoundError:
                raise NotFound(f"{uri}: not found") from None
            return data, _local_generation(data)
        with mapped_errors(uri):
            blob = self._blob(uri)
            data = blob.download_as_bytes(retry=self.retry)
            return data, int(blob.generation or 0)

    def write_if_generation(self, uri: str, data: bytes, generation: int, *,
                            content_type: str = "application/json") -> int:
        """Writes ``data`` only if the object is still at ``generation`` (0: only if it does not exist);
        returns the new generation. A lost race raises ``AlreadyExists`` (HTTP 412, as for ``if_absent``):
        re-read and decide again. One-request upload, so the precondition holds on the emulator too."""
        if not is_gs(uri):
            path = Path(uri)
            path.parent.mkdir(parents=True, exist_ok=True)
            import fcntl

            with open(path.with_name(f".{path.name}.lock"), "a+b") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                try:
                    current = _local_generation(path.read_bytes())
                except FileNotFoundError:
                    current = 0
                if current != generation:
                    raise AlreadyExists(f"{uri}: generation {current}, not {generation}")
                tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
                tmp.write_bytes(data)
                os.replace(tmp, path)
            return _local_generation(data)
        with mapped_errors(uri):
            blob = self._blob(uri)
            # A retried request whose first try landed would see its own write and fail the precondition:
            # a spurious AlreadyExists, which the caller's re-read resolves.
            blob.upload_from_string(data, content_type=content_type, if_generation_match=generation,
                                    retry=self.retry)
            return int(blob.generation or 0)

    def delete(self, uri: str, missing_ok: bool = True) -> None:
        if not is_gs(uri):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(uri)
            return
        try:
            with mapped_errors(uri):
                self._blob(uri).delete(retry=self.retry)
        except NotFound:
            if not missing_ok:
                raise

    def remove_empty_dir(self, uri: str) -> None:
        """Removes a local folder left empty (Cloud Storage has no folders to remove)."""
        if not is_gs(uri):
            with contextlib.suppress(OSError):
                os.rmdir(uri)

    def move(self, src: str, dst: str) -> None:
        """Server-side copy then delete on Cloud Storage; a rename on disk."""
        if not is_gs(src):
            Path(dst).parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dst)
            return
        sb, sn = split_gs(src)
        db, dn = split_gs(dst)
        with mapped_errors(src):
            source = self.client.bucket(sb).blob(sn)
            self.client.bucket(sb).copy_blob(source, self.client.bucket(db), dn, retry=self.retry)
            source.delete(retry=self.retry)

    # -- streams ---------------------------------------------------------------------------------
    @contextlib.contextmanager
    def open_read(self, uri: str, generation: int | None = None) -> Iterator[BinaryIO]:
        """A seekable binary reader that fetches ``READ_CHUNK`` bytes at a time."""
        if not is_gs(uri):
            try:
                fh = open(uri, "rb")  # noqa: SIM115
            except FileNotFoundError:
                raise NotFound(f"{uri}: not found") from None
            with fh:
                yield fh
            return
        with mapped_errors(uri):
            reader = self._blob(uri, generation).open("rb", chunk_size=READ_CHUNK, retry=self.retry)
        with reader, mapped_errors(uri):
            yield reader

    @contextlib.contextmanager
    def open_write(self, uri: str) -> Iterator[_ChecksumWriter]:
        """A streaming writer (resumable upload in ``WRITE_CHUNK`` pieces) that tracks CRC32C and size.

        Against the emulator (``STORAGE_EMULATOR_HOST``) what is written goes to a local temporary file and, once
        the writer closes, to the emulator as one streamed request (``_upload_streamed``, as ``upload`` sends a big
        file): fake-gcs-server (v1.54) keeps every chunk of a resumable upload in memory and appends each to the
        last, about 7x the object per open writer (a converter task's 128 MiB shard: ~0.9 GiB), against ~2x for one
        streamed request (docs/benchmarks.md, the local stack's memory). Nothing reaches the emulator if the
        block raises: as on Cloud Storage, where an unfinished resumable upload never becomes an object."""
        if not is_gs(uri):
            path = Path(uri)
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as fh:
                yield _ChecksumWriter(fh)
            return
        if os.environ.get("STORAGE_EMULATOR_HOST"):
            with tempfile.TemporaryDirectory(prefix="landfall-write-") as tmp:
                local = Path(tmp) / "object"
                with open(local, "wb") as fh:
                    writer = _ChecksumWriter(fh)
                    yield writer
                with mapped_errors(uri):
                    self._upload_streamed(local, uri, writer.size, writer.crc32c)
            return
        with mapped_errors(uri):
            writer = self._blob(uri).open("wb", chunk_size=WRITE_CHUNK, ignore_flush=True, retry=self.retry)
            with writer:
                yield _ChecksumWriter(writer)

    # -- files -----------------------------------------------------------------------------------
    def download(self, uri: str, dest: str | Path) -> Path:
        dest = Path(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not is_gs(uri):
            try:
                shutil.copyfile(uri, dest)
            except FileNotFoundError:
                raise NotFound(f"{uri}: not found") from None
            return dest
        with mapped_errors(uri):
            self._blob(uri).download_to_filename(str(dest), retry=self.retry)
        return dest

    def upload(self, src: str | Path, uri: str) -> None:
        """Copies the local file ``src`` to ``uri``, reading it ``UPLOAD_CHUNK`` bytes at a time when it is bigger.

        On Cloud Storage a big file goes as a resumable upload in ``UPLOAD_CHUNK`` chunks (a failed chunk is
        resent, not the file). Against the emulator (``STORAGE_EMULATOR_HOST``) it goes as one streamed
        ``uploadType=media`` request: fake-gcs-server (v1.54) keeps every chunk of a resumable upload in memory,
        appends each to the last and rehashes the whole object per chunk (its issue #669), which peaked at about
        7x the file's size; a streamed simple upload it buffers once (about 2x). The arrived object's CRC32C is
        checked against the file's."""
        if not is_gs(uri):
            Path(uri).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, uri)
            return
        size = os.path.getsize(src)
        with mapped_errors(uri):
            if size > UPLOAD_CHUNK and os.environ.get("STORAGE_EMULATOR_HOST"):
                self._upload_streamed(Path(src), uri, size)
                return
            blob = self._blob(uri)
            if size > UPLOAD_CHUNK:
                blob.chunk_size = UPLOAD_CHUNK
            blob.upload_from_filename(str(src), retry=self.retry)

    def _upload_streamed(self, src: Path, uri: str, size: int, crc32c: str | None = None) -> None:
        """One ``uploadType=media`` request whose body is read from ``src`` as it is sent; what arrived is checked
        against ``crc32c`` (the file's, when the caller already has it: ``open_write``'s writer) or the file read
        again."""
        from google.api_core import exceptions as gexc

        bucket, name = split_gs(uri)
        url = f"{self.client._connection.API_BASE_URL}/upload/storage/v1/b/{bucket}/o"

        def send() -> dict[str, Any]:
            with open(src, "rb") as fh:
                resp = self.client._http.post(
                    url, params={"uploadType": "media", "name": name}, data=fh,
                    headers={"Content-Type": "application/octet-stream", "Content-Length": str(size)})
            if resp.status_code >= 400:
                raise gexc.from_http_response(resp)
            return dict(resp.json())

        arrived = self.retry(send)()
        if crc32c is None:
            checksum = google_crc32c.Checksum()
            with open(src, "rb") as fh:
                while block := fh.read(READ_CHUNK):
                    checksum.update(block)
            crc32c = crc32c_b64(checksum)
        if int(arrived.get("size", -1)) != size or arrived.get("crc32c") != crc32c:
            raise TemporaryError(f"{uri}: the upload arrived as {arrived.get('size')} bytes, crc32c "
                                 f"{arrived.get('crc32c')}; the file has {size}, crc32c {crc32c}")

    def download_many(self, pairs: list[tuple[str, Path]], workers: int = 8) -> list[Path]:
        """Parallel downloads (the trainer stages its shards this way)."""
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            return list(pool.map(lambda p: self.download(*p), pairs))

    def delete_many(self, uris: list[str], workers: int = 16) -> None:
        """Deletes ``uris`` (missing ones are fine), ``workers`` at a time: thousands of small deletes one after
        another, at Cloud Storage's tens of milliseconds each, would take minutes."""
        if uris:
            with ThreadPoolExecutor(max_workers=min(workers, len(uris))) as pool:
                list(pool.map(self.delete, uris))

    def sync_down(self, uri_prefix: str, local_dir: str | Path) -> int:
        prefix = uri_prefix.rstrip("/") + "/"
        uris = self.list(prefix)
        pairs = [(u, Path(local_dir) / u[len(prefix):]) for u in uris]
        self.download_many(pairs)
        return len(pairs)
