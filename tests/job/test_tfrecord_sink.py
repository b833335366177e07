"""The batch TFRecord encoder: each record's bytes are protobuf's own deterministic serialization
of the Example the protobuf API builds, parse back to the batch's values, and the sink's shards
read back with TensorFlow's TFRecord reader."""

from __future__ import annotations

import glob

import apache_beam as beam
import numpy as np
import pytest
import tensorflow as tf

from beam_embed.pipeline.common.output_formats.schema import OutputSchema
from beam_embed.pipeline.common.output_formats.tfrecord import (
    examples,
    framed,
    int64_feature,
    serialized,
    sink,
)
from beam_embed.pipeline.common.rows.records import EmbeddedBatch, Record


def _batch(rows: int = 40) -> EmbeddedBatch:
    rng = np.random.default_rng(3)
    records = tuple(
        Record(f"doc-{i}", "naïve café 北京 " * (i % 5), f"in-{i % 3}.txt",
               (("topic", f"t{i}"), ("lang", "")) if i % 2 else (("lang", "en"),))
        for i in range(rows))
    mean = rng.standard_normal((rows, 384)).astype(np.float32)
    mean[0, :3] = [np.nan, np.inf, -0.0]
    cls = rng.standard_normal((rows, 7)).astype(np.float32)
    return EmbeddedBatch(records, {"mean": mean, "cls": cls},
                         np.arange(rows, dtype=np.int64) * 997, np.arange(rows) % 3 == 0)


SCHEMAS = [OutputSchema((("mean", 384), ("cls", 7)), ("topic", "lang"), True),
           OutputSchema((("mean", 384),), (), False)]


@pytest.mark.parametrize("schema", SCHEMAS, ids=["text+metadata+2 poolings", "plain"])
def test_records_are_protobufs_deterministic_serialization(schema):
    batch = _batch()
    reference = [tf.train.Example.FromString(raw).SerializeToString(deterministic=True)
                 for raw in examples(schema, batch)]
    assert serialized(schema, batch) == reference


def test_records_parse_back_to_the_batch():
    schema, batch = SCHEMAS[0], _batch()
    features = {"id": tf.io.FixedLenFeature([], tf.string),
                "text": tf.io.FixedLenFeature([], tf.string),
                "topic": tf.io.FixedLenFeature([], tf.string, default_value="(none)"),
                "num_tokens": tf.io.FixedLenFeature([], tf.int64),
                "truncated": tf.io.FixedLenFeature([], tf.int64),
                "mean": tf.io.FixedLenFeature([384], tf.float32),
                "cls": tf.io.FixedLenFeature([7], tf.float32)}
    parsed = tf.io.parse_example(serialized(schema, batch), features)
    assert [v.decode() for v in parsed["id"].numpy()] == [r.id for r in batch.records]
    assert [v.decode() for v in parsed["text"].numpy()] == [r.text for r in batch.records]
    assert [v.decode() for v in parsed["topic"].numpy()] == [
        dict(r.meta).get("topic", "(none)") for r in batch.records]
    np.testing.assert_array_equal(parsed["num_tokens"].numpy(), batch.num_tokens)
    np.testing.assert_array_equal(parsed["truncated"].numpy(), batch.truncated.astype(np.int64))
    for col in ("mean", "cls"):  # bit for bit, NaN and -0.0 included
        np.testing.assert_array_equal(parsed[col].numpy().view(np.uint32),
                                      batch.vectors[col].view(np.uint32))


@pytest.mark.parametrize("values", [[0], [1, 127, 128, 300, 2**40], [-1, -(2**63)]])
def test_int64_feature_matches_protobuf(values):
    reference = tf.train.Feature(int64_list=tf.train.Int64List(value=values)).SerializeToString()
    assert int64_feature(values) == reference


def test_the_sink_writes_every_batch_in_order(tmp_path):
    schema = SCHEMAS[1]
    batches = [_batch(5), _batch(3)]
    with beam.Pipeline() as p:
        _ = (p | beam.Create(batches, reshuffle=False) | beam.Map(lambda b: serialized(schema, b))
             | beam.io.iobase.Write(sink(str(tmp_path / "out"), ".tfrecord", 1,
                                         "-SSSSS-of-NNNNN")))
    [shard] = glob.glob(str(tmp_path / "out-*.tfrecord"))
    read = list(tf.data.TFRecordDataset(shard).as_numpy_iterator())
    assert read == [raw for b in batches for raw in serialized(schema, b)]


def test_a_batch_is_framed_as_beams_record_writer_frames_each_record():
    import io

    from apache_beam.io.tfrecordio import _TFRecordUtil

    records = [b"", b"x", bytes(range(256)) * 70, b"\x00" * 3]
    beams = io.BytesIO()
    for record in records:
        _TFRecordUtil.write_record(beams, record)
    assert framed(records) == beams.getvalue()
    assert framed([]) == b""
