"""Inputs that real tools write and Landfall cannot read, built byte for byte (no extra packages needed)."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from landfall.local.synthetic import time_series


def npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def npz_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, x=arr)
    return buf.getvalue()


class _ZipCrypto:
    """Traditional PKWARE encryption (APPNOTE 6.1), what ``zip -e`` and Windows' compressed folders write."""

    def __init__(self, password: bytes):
        self.keys = [0x12345678, 0x23456789, 0x34567890]
        for byte in password:
            self._update(byte)

    @staticmethod
    def _crc(crc: int, byte: int) -> int:  # one raw CRC-32 step (zlib.crc32 inverts before and after)
        return zlib.crc32(bytes([byte]), crc ^ 0xFFFFFFFF) ^ 0xFFFFFFFF

    def _update(self, byte: int) -> None:
        k0, k1, k2 = self.keys
        k0 = self._crc(k0, byte)
        k1 = ((k1 + (k0 & 0xFF)) * 134775813 + 1) & 0xFFFFFFFF
        k2 = self._crc(k2, k1 >> 24)
        self.keys = [k0, k1, k2]

    def encrypt(self, data: bytes) -> bytes:
        out = bytearray()
        for byte in data:
            t = (self.keys[2] | 2) & 0xFFFF
            out.append(byte ^ (((t * (t ^ 1)) >> 8) & 0xFF))
            self._update(byte)
        return bytes(out)


def encrypted_npz(arr: np.ndarray, password: bytes) -> bytes:
    """An .npz whose one array is stored and ZipCrypto-encrypted, as ``zip -e -P PASSWORD`` writes it."""
    name, payload = b"x.npy", npy_bytes(arr)
    crc = zlib.crc32(payload)
    # 12-byte encryption header: random bytes, the last one the CRC's high byte (the password check).
    body = _ZipCrypto(password).encrypt(bytes(range(11)) + bytes([crc >> 24]) + payload)
    flags, method, version, time, date = 0x1, zipfile.ZIP_STORED, 20, 0, 0x21
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", version, flags, method, time, date, crc, len(body),
                        len(payload), len(name), 0) + name
    central = struct.pack("<4s6H3L5H2L", b"PK\x01\x02", version, version, flags, method, time, date, crc,
                          len(body), len(payload), len(name), 0, 0, 0, 0, 0, 0) + name
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, len(central), len(local) + len(body), 0)
    return local + body + central + end


def deflate64_npz(arr: np.ndarray) -> bytes:
    """``np.savez_compressed`` output whose member declares method 9 (Deflate64, which 7-Zip and Windows
    write for large files) in its local header and central directory: zipfile has no Deflate64 decoder."""
    data = bytearray(npz_bytes(arr))
    central = data.index(b"PK\x01\x02")
    for method_at in (8, central + 10):
        assert data[method_at : method_at + 2] == b"\x08\x00"  # deflate
        data[method_at : method_at + 2] = b"\x09\x00"
    return bytes(data)


def corrupt_deflate_npz() -> bytes:
    """``np.savez_compressed`` output with 64 bytes of its deflate stream overwritten by 0xFF mid-way: decoding
    fails with ``zlib.error`` (invalid block type) after the .npy header has been read. The values are
    rounded so that zlib writes Huffman-coded blocks (stored blocks would only fail the CRC check)."""
    data = bytearray(npz_bytes(np.round(time_series(2000, seed=3), 1)))
    at = len(data) // 2
    data[at : at + 64] = b"\xff" * 64
    return bytes(data)


def lzo_parquet(flat: np.ndarray) -> bytes:
    """A Parquet file (one column per value, uncompressed) whose first column chunk says it is LZO-compressed.

    The footer is Thrift compact protocol; in column ``c0``'s ColumnMetaData, ``path_in_schema`` (list of one
    2-byte string: 0x18 0x02 "c0") is followed by field 4, ``codec`` (header 0x15: delta 1, i32), whose
    zigzag varint goes from 0 (UNCOMPRESSED) to 6 (3, LZO). Parquet-mr writes LZO; pyarrow cannot read it.
    """
    buf = io.BytesIO()
    pq.write_table(pa.table({f"c{i}": flat[:, i] for i in range(flat.shape[1])}), buf, compression="NONE")
    data = buf.getvalue()
    assert data.count(b"\x18\x02c0\x15\x00") == 1
    return data.replace(b"\x18\x02c0\x15\x00", b"\x18\x02c0\x15\x06")


def unclosed_header_npy() -> bytes:
    """An .npy whose header dict is never closed: numpy retries it as a Python 2 header through ``tokenize``,
    which raises ``TokenError`` (neither ValueError nor SyntaxError)."""
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 36, 10), ".ljust(117) + "\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + b"\0" * 2880
