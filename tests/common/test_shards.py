"""Readers check the manifest's shards: a missing, truncated or swapped file is named in one
line instead of being read as fewer records."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from beam_embed.pipeline.common.embedding_set import load_embedding_set
from beam_embed.pipeline.common.errors import IncompleteInput
from beam_embed.pipeline.common.output_formats import output_format
from beam_embed.pipeline.common.output_formats.tfrecord import framed_records, read_records
from beam_embed.pipeline.common.shards import check_shards
from tests.pca.fixtures import clustered_matrix, records, write_embeddings


@pytest.fixture
def output(tmp_path):
    x, _ = clustered_matrix(300)
    return write_embeddings(str(tmp_path / "emb"), records({"mean": x}), shards=3,
                            formats=("parquet", "tfrecord"))


def _shard(output, index: int, fmt: str) -> str:
    return os.path.join(output, f"embeddings-{index:05d}-of-00003.{fmt}")


def test_a_complete_output_passes_and_counts_agree(output):
    es = load_embedding_set(output)
    assert check_shards(es, "parquet") == es.files["parquet"]
    count = output_format("tfrecord").count_rows
    assert [count(p) for p in es.files["tfrecord"]] == [100, 100, 100]


@pytest.mark.parametrize("fmt", ["parquet", "tfrecord"])
def test_a_missing_shard_is_named(output, fmt):
    os.remove(_shard(output, 1, fmt))
    with pytest.raises(IncompleteInput) as missing:
        check_shards(load_embedding_set(output), fmt)
    assert str(missing.value).startswith(f"{_shard(output, 1, fmt)} is missing: ")
    assert "manifest.json lists it" in str(missing.value)


def test_a_truncated_parquet_shard_is_named(output):
    path = _shard(output, 2, "parquet")
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
    with pytest.raises(IncompleteInput) as damaged:
        check_shards(load_embedding_set(output), "parquet")
    message = str(damaged.value)
    assert message.startswith(f"{path} is damaged: not a readable Parquet file (") and \
        "\n" not in message


def test_a_swapped_parquet_shard_is_named(output, tmp_path):
    x, _ = clustered_matrix(90, seed=5)
    other = write_embeddings(str(tmp_path / "other"), records({"mean": x}), shards=3)
    shutil.copy(os.path.join(other, "embeddings-00000-of-00003.parquet"), _shard(output, 0,
                                                                                "parquet"))
    with pytest.raises(IncompleteInput, match="holds 30 rows, but .* counts 100"):
        check_shards(load_embedding_set(output), "parquet")


def test_tfrecord_shard_cut_anywhere_is_named(output):
    path = _shard(output, 0, "tfrecord")
    whole = open(path, "rb").read()
    records_in = list(read_records(path, 100))
    assert len(records_in) == 100
    sizes = np.cumsum([len(r) + 16 for r in records_in])
    # inside a record's 12-byte header (tf.data alone reads that as a clean end), inside its
    # data, and exactly at a record boundary (only the manifest's count can tell)
    for cut, expected in ((int(sizes[40]) + 5, "not a whole record"),
                          (int(sizes[40]) + 30, "ends in the middle of a record"),
                          (int(sizes[40]), "holds 41 records, but the manifest counts 100")):
        with open(path, "wb") as f:
            f.write(whole[:cut])
        with pytest.raises(IncompleteInput) as damaged:
            list(read_records(path, 100))
        assert str(damaged.value).startswith(path) and expected in str(damaged.value)


def test_the_framing_count_agrees_with_tf_data_and_names_damage(output):
    path = _shard(output, 0, "tfrecord")
    assert framed_records(path, os.path.getsize(path)) == \
        sum(1 for _ in read_records(path)) == 100
    data = open(path, "rb").read()
    cases = {"cut": (data[:-1], "runs 1 bytes past the end: cut short) after record 99"),
             "inside a header": (data + data[:5], "ends inside a record's header"),
             "length": (data[:3] + bytes([data[3] ^ 0x40]) + data[4:],
                        "a record's length fails its checksum: corrupt data) after record 0")}
    for damaged, message in cases.values():
        with open(path, "wb") as f:
            f.write(damaged)
        with pytest.raises(IncompleteInput, match=message.replace("(", r"\(").replace(")", r"\)")):
            framed_records(path, len(damaged))
