"""The record format is a contract: TensorFlow must read back exactly what the converter writes."""

from __future__ import annotations

import io

import numpy as np
import pytest

from landfall.core.contracts import records


@pytest.fixture(scope="module")
def tf():
    import tensorflow as tf

    return tf


def test_framing_is_byte_identical_to_tensorflows_writer(tf, tmp_path):
    batch = np.random.default_rng(1).normal(size=(17, 36, 10)).astype("<f4")
    ours = records.RecordFramer((36, 10)).frame(batch)
    path = str(tmp_path / "tf.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for inst in batch:
            example = tf.train.Example(features=tf.train.Features(feature={
                "x": tf.train.Feature(bytes_list=tf.train.BytesList(value=[inst.tobytes()]))}))
            w.write(example.SerializeToString())
    assert (tmp_path / "tf.tfrecord").read_bytes() == ours


def test_tensorflow_parses_and_decodes_exactly(tf, tmp_path):
    batch = np.random.default_rng(2).normal(size=(40, 36, 10)).astype("<f4")
    batch[3, 4, 5] = np.float32(1e-38)  # denormal-adjacent values survive bit for bit
    path = tmp_path / "ours.tfrecord"
    path.write_bytes(records.RecordFramer((36, 10)).frame(batch))
    ds = tf.data.TFRecordDataset(str(path)).batch(16)
    spec = {records.FEATURE_KEY: tf.io.FixedLenFeature([], tf.string)}
    got = []
    for serialized in ds:
        parsed = tf.io.parse_example(serialized, spec)
        got.append(tf.reshape(tf.io.decode_raw(parsed[records.FEATURE_KEY], tf.float32), (-1, 36, 10)).numpy())
    assert np.array_equal(np.concatenate(got), batch)


def test_reader_detects_corruption():
    clean = records.RecordFramer((2, 3)).frame(np.ones((2, 2, 3), "<f4"))
    assert len(list(records.iter_records(io.BytesIO(clean)))) == 2
    with pytest.raises(ValueError, match="truncated"):
        list(records.iter_records(io.BytesIO(clean[:-3])))
    data = bytearray(clean)
    data[30] ^= 0xFF
    with pytest.raises(ValueError, match="corrupt record data"):
        list(records.iter_records(io.BytesIO(bytes(data))))


def test_decode_example_round_trip():
    inst = np.arange(360, dtype="<f4").reshape(36, 10)
    assert np.array_equal(records.decode_example(records.encode_example(inst), (36, 10)), inst)
