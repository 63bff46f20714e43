"""The record format: a public contract shared by the converter (writer) and the trainer (reader).

Each TFRecord record is a serialized ``tf.train.Example`` with one feature, ``x``: a ``bytes_list``
holding one instance as raw little-endian float32 in C order. Shape and dtype live in the manifest.
Any TensorFlow user reads it with ``tf.io.parse_example`` + ``tf.io.decode_raw``.

The converter must not import TensorFlow (Cloud Function cold start and size), so the ``Example``
message is built from its descriptor with ``protobuf`` and the TFRecord framing (length, masked
CRC32C) uses ``google-crc32c``. Every record of a shard has the same layout, so the serialized
prefix is computed once and the payloads are framed in bulk with numpy.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import BinaryIO

import google_crc32c
import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

FEATURE_KEY = "x"
DTYPE = "float32"
NUMPY_DTYPE = np.dtype("<f4")
SHARD_SUFFIX = ".tfrecord"

_MASK_DELTA = 0xA282EAD8


def _example_class() -> type:
    """tensorflow/core/example/{example,feature}.proto, the fields this format uses, by number."""
    fdp = descriptor_pb2.FileDescriptorProto(name="landfall_example.proto", package="tensorflow")
    fdp.syntax = "proto3"
    bytes_list = fdp.message_type.add(name="BytesList")
    bytes_list.field.add(name="value", number=1, type=12, label=3)  # repeated bytes
    float_list = fdp.message_type.add(name="FloatList")
    float_list.field.add(name="value", number=1, type=2, label=3, options=descriptor_pb2.FieldOptions(packed=True))
    feature = fdp.message_type.add(name="Feature")
    feature.oneof_decl.add(name="kind")
    feature.field.add(name="bytes_list", number=1, type=11, label=1, type_name=".tensorflow.BytesList",
                      oneof_index=0)
    feature.field.add(name="float_list", number=2, type=11, label=1, type_name=".tensorflow.FloatList",
                      oneof_index=0)
    features = fdp.message_type.add(name="Features")
    entry = features.nested_type.add(name="FeatureEntry", options=descriptor_pb2.MessageOptions(map_entry=True))
    entry.field.add(name="key", number=1, type=9, label=1)
    entry.field.add(name="value", number=2, type=11, label=1, type_name=".tensorflow.Feature")
    features.field.add(name="feature", number=1, type=11, label=3,
                       type_name=".tensorflow.Features.FeatureEntry")
    example = fdp.message_type.add(name="Example")
    example.field.add(name="features", number=1, type=11, label=1, type_name=".tensorflow.Features")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow.Example"))


Example = _example_class()


def masked_crc32c(data: bytes | np.ndarray) -> int:
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def encode_example(instance: np.ndarray) -> bytes:
    """One instance as a serialized Example (the reference path; bulk writers use ``RecordFramer``)."""
    example = Example()
    payload = np.ascontiguousarray(instance, dtype=NUMPY_DTYPE).tobytes()
    example.features.feature[FEATURE_KEY].bytes_list.value.append(payload)
    return example.SerializeToString()


def decode_example(data: bytes, shape: tuple[int, ...]) -> np.ndarray:
    example = Example()
    example.ParseFromString(data)
    values = example.features.feature[FEATURE_KEY].bytes_list.value
    if len(values) != 1:
        raise ValueError(f"feature {FEATURE_KEY!r} holds {len(values)} values, expected 1")
    return np.frombuffer(values[0], dtype=NUMPY_DTYPE).reshape(shape)


class RecordFramer:
    """Frames many same-shaped instances into TFRecord bytes at once.

    Layout of one record: uint64 length | masked crc32c(length) | Example bytes | masked crc32c(data).
    The Example bytes are a constant prefix followed by the instance payload, so only the data CRC
    differs between records.
    """

    def __init__(self, instance_shape: tuple[int, ...]):
        self.payload_bytes = int(np.prod(instance_shape)) * NUMPY_DTYPE.itemsize
        zero = encode_example(np.zeros(instance_shape, dtype=NUMPY_DTYPE))
        self.prefix = zero[: len(zero) - self.payload_bytes]
        assert zero.endswith(b"\0" * self.payload_bytes) and len(self.prefix) > 0
        self.data_bytes = len(zero)
        length = struct.pack("<Q", self.data_bytes)
        self.header = length + struct.pack("<I", masked_crc32c(length))
        self.record_bytes = len(self.header) + self.data_bytes + 4

    def frame(self, batch: np.ndarray) -> bytes:
        """``batch`` is (n, *instance_shape) float32 little-endian C-contiguous."""
        n = batch.shape[0]
        flat = np.ascontiguousarray(batch, dtype=NUMPY_DTYPE).reshape(n, -1).view(np.uint8)
        out = np.empty((n, self.record_bytes), dtype=np.uint8)
        h, p = len(self.header), len(self.prefix)
        out[:, :h] = np.frombuffer(self.header, dtype=np.uint8)
        out[:, h : h + p] = np.frombuffer(self.prefix, dtype=np.uint8)
        out[:, h + p : h + self.data_bytes] = flat
        out.flags.writeable = False  # google-crc32c reads read-only buffers without a copy
        data = out[:, h : h + self.data_bytes]
        crcs = np.fromiter((masked_crc32c(row) for row in data), dtype="<u4", count=n)
        out.flags.writeable = True
        out[:, h + self.data_bytes :] = crcs.view(np.uint8).reshape(n, 4)
        return out.tobytes()


def iter_records(stream: BinaryIO, verify: bool = True) -> Iterator[bytes]:
    """Reads TFRecord framing, checking both CRCs; raises ``ValueError`` on a corrupt record."""
    while True:
        header = stream.read(12)
        if not header:
            return
        if len(header) < 12:
            raise ValueError("truncated record header")
        (length,) = struct.unpack("<Q", header[:8])
        if verify and struct.unpack("<I", header[8:])[0] != masked_crc32c(header[:8]):
            raise ValueError("corrupt record length")
        data = stream.read(length)
        footer = stream.read(4)
        if len(data) < length or len(footer) < 4:
            raise ValueError("truncated record")
        if verify and struct.unpack("<I", footer)[0] != masked_crc32c(data):
            raise ValueError("corrupt record data")
        yield data
