"""Each format's module encodes a batch under the one schema: the Parquet table read back by
pyarrow and the TFRecord Examples parsed by protobuf hold the batch's values (every vector dtype,
metadata, the token columns), computed here independently of the encoders; one column per name,
an input field named like one of the run's own columns (`source`) kept as `meta_source`; and the
TFRecord bytes are those the job wrote before its encodings moved into the format modules."""

from __future__ import annotations

import hashlib
import io

import numpy as np
import pyarrow.parquet as pq
import pytest
import tensorflow as tf

from beam_embed.models.tokens import TokenVectors
from beam_embed.pipeline.common.output_formats import parquet, tfrecord
from beam_embed.pipeline.common.output_formats.schema import OutputSchema, TokenSchema
from beam_embed.pipeline.common.rows.records import EmbeddedBatch, Record
from beam_embed.pipeline.common.rows.vector_dtypes import StoredVectors

ROWS = 9
WIDTHS = (("mean", 6), ("cls", 3))
META = ("topic", "source")  # `source`: the corpus's own field, beside the run's (the file)
COLUMNS = ["id", "text", "source", "topic", "meta_source", "mean", "cls", "num_tokens",
           "truncated"]


def _records() -> tuple[Record, ...]:
    return tuple(Record(f"doc-{i}", "naïve café 北京 " * (i % 3), f"in-{i % 2}.csv",
                        (("topic", f"t{i}"), ("source", f"their {i}")) if i % 2 else
                        (("source", "theirs"),))
                 for i in range(ROWS))


def _batch() -> EmbeddedBatch:
    rng = np.random.default_rng(7)
    vectors = {c: rng.standard_normal((ROWS, w)).astype(np.float32) for c, w in WIDTHS}
    vectors["mean"][0, :2] = [-0.0, 1e-30]
    return EmbeddedBatch(_records(), vectors, np.arange(ROWS, dtype=np.int64) * 300 + 2,
                         np.arange(ROWS) % 4 == 0)


def _storage(dtype: str, batch: EmbeddedBatch) -> tuple[StoredVectors, ...]:
    out = []
    for column, width in WIDTHS:
        v = batch.vectors[column]
        ranges = ((), ())
        if dtype == "int8":  # any ranges will do: the codes are computed below from them
            ranges = (tuple(float(x) for x in (v.max(0) - v.min(0)) / 255),
                      tuple(float(x) for x in v.min(0) + 128 * (v.max(0) - v.min(0)) / 255))
        out.append(StoredVectors(dtype, width, *ranges))
    return tuple(out)


def _expected_bytes(stored: StoredVectors, vectors: np.ndarray) -> list[bytes]:
    """Each vector as stored, by numpy alone (the formats' docs: float16 little-endian, int8
    codes, np.packbits' bits)."""
    if stored.dtype == "float16":
        rows = vectors.astype("<f2")
    elif stored.dtype == "int8":
        rows = np.clip(np.rint((vectors - np.float32(stored.offset)) / np.float32(stored.scale)),
                       -128, 127).astype(np.int8)
    else:
        rows = np.packbits(vectors > 0, axis=1)
    return [row.tobytes() for row in rows]


DTYPES = ["float32", "float16", "int8", "binary"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_parquet_table_read_back_by_pyarrow(dtype):
    batch = _batch()
    schema = OutputSchema(WIDTHS, META, True, _storage(dtype, batch))
    buffer = io.BytesIO()
    pq.write_table(parquet.table(schema, batch), buffer)
    read = pq.read_table(io.BytesIO(buffer.getvalue()))
    assert read.column_names == COLUMNS
    rows = read.to_pylist()
    for record, row in zip(batch.records, rows):
        meta = dict(record.meta)
        assert (row["id"], row["text"], row["source"]) == (record.id, record.text, record.source)
        assert (row["topic"], row["meta_source"]) == (meta.get("topic"), meta["source"])
    assert [r["num_tokens"] for r in rows] == batch.num_tokens.tolist()
    assert [r["truncated"] for r in rows] == batch.truncated.tolist()
    for (column, _), stored in zip(WIDTHS, schema.stored):
        values = [r[column] for r in rows]
        if dtype == "float32":  # bit for bit, -0.0 and denormals included
            np.testing.assert_array_equal(np.array(values, np.float32).view(np.uint32),
                                          batch.vectors[column].view(np.uint32))
        elif dtype == "float16":
            np.testing.assert_array_equal(np.array(values, np.float16),
                                          batch.vectors[column].astype(np.float16))
        else:
            assert values == _expected_bytes(stored, batch.vectors[column])


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_tfrecord_examples_parsed_by_protobuf(dtype):
    batch = _batch()
    schema = OutputSchema(WIDTHS, META, True, _storage(dtype, batch))
    examples = [tf.train.Example.FromString(raw).features.feature
                for raw in tfrecord.serialized(schema, batch)]
    for i, (record, f) in enumerate(zip(batch.records, examples)):
        meta = dict(record.meta)
        assert sorted(f) == sorted(c for c in COLUMNS if c != "topic" or "topic" in meta)
        assert [f[c].bytes_list.value[0].decode() for c in ("id", "text", "source")] == [
            record.id, record.text, record.source]
        assert f["meta_source"].bytes_list.value[0].decode() == meta["source"]
        assert f["num_tokens"].int64_list.value[:] == [batch.num_tokens[i]]
        assert f["truncated"].int64_list.value[:] == [int(batch.truncated[i])]
        for (column, _), stored in zip(WIDTHS, schema.stored):
            if dtype == "float32":
                np.testing.assert_array_equal(
                    np.array(f[column].float_list.value, np.float32).view(np.uint32),
                    batch.vectors[column][i].view(np.uint32))
            else:
                assert f[column].bytes_list.value[:] == [
                    _expected_bytes(stored, batch.vectors[column])[i]]


# SHA-256 of the batch's serialized Examples as the job wrote them before each format's encoding
# moved into its module (checked against that code): the shards' bytes did not change.
BEFORE = {"float32": "20c2e24aa2207899", "float16": "1848ff2483b4db5c",
          "int8": "f1d8fa302bba6fe2", "binary": "0126ae43934d50a7"}


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_tfrecord_bytes_are_those_written_before(dtype):
    batch = _batch()
    schema = OutputSchema(WIDTHS, ("topic",), True, _storage(dtype, batch))
    digest = hashlib.sha256(b"".join(tfrecord.serialized(schema, batch))).hexdigest()
    assert digest[:16] == BEFORE[dtype]


def _token_batch(rows: int = 5) -> EmbeddedBatch:
    rng = np.random.default_rng(11)
    counts = [i % 3 for i in range(rows)]  # a record with no token too
    tokens = TokenVectors([[f"w{j}é" for j in range(n)] for n in counts],
                          [np.arange(n) * 3 for n in counts], [np.arange(n) * 3 + 2 for n in counts],
                          [rng.standard_normal((n, 4)).astype(np.float32) for n in counts],
                          np.array(counts), np.zeros(rows, bool))
    return EmbeddedBatch(_records()[:rows], {}, np.array(counts), np.zeros(rows, bool), tokens)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_token_columns_in_both_formats(dtype):
    batch, t = _token_batch(), _token_batch().tokens
    schema = TokenSchema((("vectors", 4),), ("source",), True, dtype=dtype)
    buffer = io.BytesIO()
    pq.write_table(parquet.table(schema, batch), buffer)
    read = pq.read_table(io.BytesIO(buffer.getvalue()))
    assert read.column_names == ["id", "text", "source", "meta_source", "tokens", "token_start",
                                 "token_end", "vectors", "num_tokens", "truncated"]
    serialized = tfrecord.serialized(schema, batch)
    # canonical bytes (map entries in key order): a run's shards are the same in every process
    assert serialized == [tf.train.Example.FromString(raw).SerializeToString(deterministic=True)
                          for raw in serialized]
    examples = [tf.train.Example.FromString(raw).features.feature for raw in serialized]
    for i, (row, f) in enumerate(zip(read.to_pylist(), examples)):
        assert row["tokens"] == t.tokens[i] == [v.decode() for v in f["tokens"].bytes_list.value]
        assert row["token_start"] == t.starts[i].tolist() == f["token_start"].int64_list.value[:]
        assert row["token_end"] == t.ends[i].tolist() == f["token_end"].int64_list.value[:]
        np.testing.assert_array_equal(np.array(row["vectors"], np.float32).reshape(-1, 4),
                                      t.vectors[i].astype(dtype).astype(np.float32))
        np.testing.assert_array_equal(np.array(f["vectors"].float_list.value, np.float32),
                                      t.vectors[i].reshape(-1))  # float32 whatever the dtype
        assert f["vector_width"].int64_list.value[:] == [4]
        assert row["meta_source"] == f["meta_source"].bytes_list.value[0].decode() == \
            dict(batch.records[i].meta)["source"]
