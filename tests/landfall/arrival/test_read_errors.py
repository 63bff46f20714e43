"""Every way a read can fail has its class: a documented permanent reason, or temporary.

No emulator: the readers run on in-memory streams (and ``convert`` on local files).
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import io
import zipfile
import zlib

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import requests
from google.api_core import exceptions as gexc

from landfall.arrival import converter, formats
from landfall.arrival.config import ConverterConfig
from landfall.core.errors import BadInput, NotFound, TemporaryError
from landfall.core.services.storage import Storage
from landfall.local.synthetic import time_series
from tests.landfall.arrival import badfiles
from tests.landfall.arrival.test_rejection_reasons import documented_reasons

CFG = ConverterConfig.load({})


def decode(fmt: str, stream: io.BytesIO, cfg: ConverterConfig = CFG) -> int:
    """Opens and decodes like ``convert`` does (minus the shards); returns the instances kept."""
    decoder = converter.Decoder(cfg)
    for _ in decoder.chunks(formats.read(fmt, stream, len(stream.getbuffer()), cfg).chunks):
        pass
    return decoder.kept


def rejection(fmt: str, data: bytes) -> str:
    with pytest.raises(BadInput) as caught:
        decode(fmt, io.BytesIO(data))
    return caught.value.reason


def test_an_encrypted_npz_is_rejected_as_encrypted():
    data = badfiles.encrypted_npz(time_series(3), b"secret")
    archive = zipfile.ZipFile(io.BytesIO(data))
    with pytest.raises(RuntimeError, match="encrypted"):  # what zipfile says without the password
        archive.read("x.npy")
    assert archive.read("x.npy", pwd=b"secret") == badfiles.npy_bytes(time_series(3))  # really encrypted
    assert rejection("npz", data) == "encrypted_npz"


def test_an_npz_in_a_compression_method_zipfile_lacks_is_unsupported():
    data = badfiles.deflate64_npz(time_series(3))
    with pytest.raises(NotImplementedError):
        zipfile.ZipFile(io.BytesIO(data)).read("x.npy")
    assert rejection("npz", data) == "unsupported_npz"


def test_a_corrupt_deflate_stream_inside_an_npz_is_corrupt_npz():
    data = badfiles.corrupt_deflate_npz()
    with pytest.raises(zlib.error):
        zipfile.ZipFile(io.BytesIO(data)).read("x.npy")
    assert rejection("npz", data) == "corrupt_npz"


def test_a_parquet_codec_pyarrow_lacks_is_unsupported():
    data = badfiles.lzo_parquet(time_series(20).reshape(20, -1))
    assert pq.ParquetFile(io.BytesIO(data)).metadata.row_group(0).column(0).compression == "LZO"
    with pytest.raises(OSError, match="not supported"):  # an ArrowIOError, not ArrowNotImplementedError
        pq.read_table(io.BytesIO(data))
    assert rejection("parquet", data) == "unsupported_parquet"


def test_an_npy_header_numpy_cannot_tokenize_is_corrupt_npy():
    assert rejection("npy", badfiles.unclosed_header_npy()) == "corrupt_npy"


def _parquet(flat: np.ndarray) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.table({f"c{i}": flat[:, i] for i in range(flat.shape[1])}), buf)
    return buf.getvalue()


@pytest.mark.parametrize("stage", ["open", "read"])
@pytest.mark.parametrize("error,expected", [
    (pa.ArrowInvalid("bad page"), "corrupt_parquet"),
    (OSError("unexpected end of stream"), "corrupt_parquet"),  # pa.ArrowIOError is OSError
    (pa.ArrowTypeError("mismatch"), "corrupt_parquet"),
    (pa.ArrowIndexError("out of bounds"), "corrupt_parquet"),
    (pa.ArrowKeyError("no such field"), "corrupt_parquet"),
    (pa.ArrowSerializationError("thrift"), "corrupt_parquet"),
    (pa.ArrowException("unknown"), "corrupt_parquet"),
    (UnicodeDecodeError("utf-8", b"\x90", 0, 1, "invalid start byte"), "corrupt_parquet"),  # column names
    (pa.ArrowNotImplementedError("codec not built"), "unsupported_parquet"),
    (pa.ArrowCapacityError("array larger than 2 GiB"), "unsupported_parquet"),  # same file, same failure
    (pa.ArrowMemoryError("malloc of size 1 GiB failed"), TemporaryError),
    (MemoryError(), TemporaryError),
])
def test_each_pyarrow_error_has_its_class(monkeypatch, stage, error, expected):
    def fail(*args, **kwargs):
        raise error

    if stage == "open":
        monkeypatch.setattr(pq, "read_metadata", fail)
    else:
        monkeypatch.setattr(pq.ParquetFile, "iter_batches", fail)
    data = _parquet(time_series(5).reshape(5, -1))
    if expected is TemporaryError:
        with pytest.raises(TemporaryError, match="out of memory"):
            decode("parquet", io.BytesIO(data))
    else:
        assert rejection("parquet", data) == expected


@functools.cache
def _inputs() -> dict[str, tuple[str, bytes]]:
    arr = time_series(300, seed=5)
    flat = arr.reshape(len(arr), -1)
    csv = ("\n".join(",".join(f"{v:.6g}" for v in row) for row in flat) + "\n").encode()
    return {"npy": ("npy", badfiles.npy_bytes(arr)), "npz": ("npz", badfiles.npz_bytes(arr)),
            "csv": ("csv", csv), "csv.gz": ("csv.gz", gzip.compress(csv)), "parquet": ("parquet", _parquet(flat))}


class FailingStream(io.BytesIO):
    """Fails with ``error`` on its ``fail_at``-th read, as a storage stream does when the network drops."""

    def __init__(self, data: bytes, error: BaseException | None = None, fail_at: int = 0):
        super().__init__(data)
        self.error, self.fail_at, self.reads = error, fail_at, 0

    def _count(self) -> None:
        self.reads += 1
        if self.error is not None and self.reads == self.fail_at:
            raise self.error

    def read(self, n: int | None = -1) -> bytes:
        self._count()
        return super().read(n)

    def readline(self, limit: int | None = -1) -> bytes:
        self._count()
        return super().readline(limit)


STREAM_FAILURES = {
    "TemporaryError": (lambda: TemporaryError("storage unavailable"), "same"),
    "NotFound": (lambda: NotFound("gone"), "same"),
    "gexc.NotFound": (lambda: gexc.NotFound("gone"), NotFound),
    "gexc.ServiceUnavailable": (lambda: gexc.ServiceUnavailable("503"), TemporaryError),
    "requests.ConnectionError": (lambda: requests.ConnectionError("reset by peer"), TemporaryError),  # an OSError
    "ChunkedEncodingError": (lambda: requests.exceptions.ChunkedEncodingError("broken body"), TemporaryError),
    "OSError": (lambda: OSError(5, "Input/output error"), TemporaryError),
    "MemoryError": (lambda: MemoryError(), TemporaryError),
}


@pytest.mark.parametrize("when", ["first", "middle"])
@pytest.mark.parametrize("failure", sorted(STREAM_FAILURES))
@pytest.mark.parametrize("name", ["npy", "npz", "csv", "csv.gz", "parquet"])
def test_a_failing_stream_is_never_taken_for_bad_data(name, failure, when):
    fmt, data = _inputs()[name]
    cfg = dataclasses.replace(CFG, chunk_instances=100)  # "middle" falls among the data reads
    clean = FailingStream(data)
    assert decode(fmt, clean, cfg) == 300
    make, expected = STREAM_FAILURES[failure]
    error = make()
    stream = FailingStream(data, error, 1 if when == "first" else max(2, clean.reads // 2))
    with pytest.raises((TemporaryError, NotFound)) as caught:
        decode(fmt, stream, cfg)
    if expected == "same":
        assert caught.value is error
    else:
        assert type(caught.value) is expected, repr(caught.value)


def test_out_of_memory_in_convert_is_temporary_and_leaves_nothing(tmp_path, monkeypatch):
    src = tmp_path / "in.parquet"
    src.write_bytes(_parquet(time_series(50).reshape(50, -1)))

    def exhausted(*args, **kwargs):
        raise pa.ArrowMemoryError("malloc of size 4294967296 failed")

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", exhausted)
    with pytest.raises(TemporaryError, match="out of memory"):
        converter.convert(str(src), str(tmp_path / "out"), "d", CFG, Storage())
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*"))


def _mutations(data: bytes, rng: np.random.Generator, count: int):
    """Truncations, overwritten bytes, flipped bits and scrambled runs: what a bad disk or upload does."""
    for _ in range(count):
        out = bytearray(data)
        kind = rng.integers(4)
        if kind == 0:
            out = out[: rng.integers(1, len(out))]
        for _ in range(rng.integers(1, 8) if kind else 0):
            at = int(rng.integers(len(out)))
            if kind == 1:
                out[at] = int(rng.integers(256))
            elif kind == 2:
                out[at] ^= 1 << int(rng.integers(8))
            else:
                end = min(len(out), at + int(rng.integers(1, 64)))
                out[at:end] = rng.integers(0, 256, end - at, dtype=np.uint8).tobytes()
        yield bytes(out)


@functools.cache
def _seed_files() -> dict[str, tuple[str, bytes]]:
    arr = time_series(40, seed=1)
    flat = arr.reshape(len(arr), -1)
    csv = ("\n".join(",".join(repr(float(v)) for v in row) for row in flat) + "\n").encode()
    files = {"npy": ("npy", badfiles.npy_bytes(arr)), "npz": ("npz", badfiles.npz_bytes(arr)),
             "csv": ("csv", csv), "csv.gz": ("csv.gz", gzip.compress(csv))}
    for method in (zipfile.ZIP_STORED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", method) as zf:
            zf.writestr("x.npy", badfiles.npy_bytes(arr))
        files[f"npz-{method}"] = ("npz", buf.getvalue())
    for codec in ("snappy", "zstd", "gzip", "none"):
        buf = io.BytesIO()
        pq.write_table(pa.table({f"c{i}": flat[:, i] for i in range(360)}), buf, compression=codec)
        files[f"columns-{codec}.parquet"] = ("parquet", buf.getvalue())
    buf = io.BytesIO()
    pq.write_table(pa.table({"x": pa.FixedSizeListArray.from_arrays(pa.array(flat.ravel()), 360)}), buf)
    files["list.parquet"] = ("parquet", buf.getvalue())
    return files


@pytest.mark.parametrize("name", sorted(_seed_files()))
def test_damaged_files_are_converted_or_rejected_with_a_documented_reason(name):
    fmt, data = _seed_files()[name]
    documented = documented_reasons()
    reasons: set[str] = set()
    for damaged in _mutations(data, np.random.default_rng(sum(name.encode())), 100):
        try:
            decode(fmt, io.BytesIO(damaged))
        except BadInput as exc:
            reasons.add(exc.reason)
    assert reasons and reasons <= documented, reasons - documented
