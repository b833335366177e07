"""Readers check the manifest's shards: a missing, truncated, swapped or edited file is named in
one line instead of being read as fewer or other records, and a file replaced after the check is
named once read."""

from __future__ import annotations

import os
import shutil
import sys

import numpy as np
import pytest

from beam_embed.pipeline.common.finished_run.embedding_set import load_embedding_set
from beam_embed.pipeline.common.finished_run.shards import check_shards, check_unchanged, unverified
from beam_embed.pipeline.common.output_formats import output_format
from beam_embed.pipeline.common.output_formats.tfrecord import framed_records, read_records
from beam_embed.pipeline.common.settings.errors import IncompleteInput
from tests.pca.fixtures import clustered_matrix, records, without_digests, write_embeddings


@pytest.fixture
def output(tmp_path):
    x, _ = clustered_matrix(300)
    return write_embeddings(str(tmp_path / "emb"), records({"mean": x}), shards=3,
                            formats=("parquet", "tfrecord"))


def _shard(output, index: int, fmt: str) -> str:
    return os.path.join(output, f"embeddings-{index:05d}-of-00003.{fmt}")


def test_a_complete_output_passes_and_counts_agree(output):
    es = load_embedding_set(output)
    assert check_shards(es, "parquet").paths == es.files["parquet"]
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


_opened: list[str] | None = None  # the files Python opens while a test records them


def _record_opens(event: str, args: tuple) -> None:
    if _opened is not None and event == "open" and isinstance(args[0], str):
        _opened.append(args[0])


sys.addaudithook(_record_opens)  # Python's own record of open(): no function is replaced


def _same_rows_other_values(output, tmp_path) -> str:
    """A shard of another run with the same rows (ids, texts, sizes) and other vectors, as a
    --no-normalize run of the same texts has: its path."""
    x, _ = clustered_matrix(300)
    other = write_embeddings(str(tmp_path / "other"), records({"mean": x * 6.5}), shards=3,
                             formats=("parquet", "tfrecord"))
    return os.path.join(other, "embeddings-00001-of-00003.parquet")


def test_a_shard_with_the_same_rows_and_size_but_other_vectors_is_named(output, tmp_path):
    path = _shard(output, 1, "parquet")
    other = _same_rows_other_values(output, tmp_path)
    assert os.path.getsize(other) == os.path.getsize(path)  # only the content tells them apart
    shutil.copy(other, path)
    with pytest.raises(IncompleteInput) as swapped:
        check_shards(load_embedding_set(output), "parquet")
    assert str(swapped.value) == (
        f"{path} is not the file {output}/manifest.json lists: its SHA-256 differs from the one "
        "recorded as the run wrote it (it was replaced or changed since); restore it or rerun "
        "the job")


def test_a_shard_of_another_size_is_named_before_it_is_hashed(output):
    path = _shard(output, 0, "tfrecord")  # TFRecord: no rows counted up front
    with open(path, "ab") as f:
        f.write(b"\0" * 16)
    with pytest.raises(IncompleteInput, match=rf"^{path} holds \d+ bytes, but .* records \d+: "
                                              "it was replaced or cut short"):
        check_shards(load_embedding_set(output), "tfrecord")


def test_a_checked_run_is_not_hashed_again_until_a_file_changes(output):
    """TFRecord: its rows are not counted up front, so only hashing would open the files."""
    global _opened
    es = load_embedding_set(output)
    assert check_shards(es, "tfrecord").verified
    _opened = []
    try:
        check_shards(es, "tfrecord")
        looked = list(_opened)
    finally:
        _opened = None
    assert not [p for p in looked if p in es.files["tfrecord"]]  # remembered, not read again
    with open(es.files["tfrecord"][2], "r+b") as f:  # the same size, one byte changed
        f.seek(40)
        byte = f.read(1)
        f.seek(40)
        f.write(bytes([byte[0] ^ 1]))
    with pytest.raises(IncompleteInput, match="SHA-256 differs"):
        check_shards(es, "tfrecord")


def test_a_file_replaced_after_the_check_is_named_once_read(output, tmp_path):
    es = load_embedding_set(output)
    checked = check_shards(es, "parquet")
    check_unchanged(checked)  # nothing changed: nothing said
    path = es.files["parquet"][1]
    shutil.copy(path, path + ".new")  # the same bytes, another file: as a new run publishes it
    os.replace(path + ".new", path)
    with pytest.raises(IncompleteInput, match=rf"^{path} was replaced or changed while it was "
                                              "read"):
        check_unchanged(checked)
    checked = check_shards(es, "parquet")
    manifest = os.path.join(output, "manifest.json")
    with open(manifest, "a") as f:
        f.write("\n")
    with pytest.raises(IncompleteInput, match=r"manifest.json was replaced while its run was "
                                              "read"):
        check_unchanged(checked)


def test_a_manifest_of_an_earlier_version_is_checked_by_rows_and_says_so(output):
    without_digests(output)
    es = load_embedding_set(output)
    checked = check_shards(es, "parquet")
    assert not checked.verified and checked.paths == es.files["parquet"]
    assert unverified(es) == (f"{output}/manifest.json records no checksums of its shards (a run "
                              "of an earlier version): they are checked by their sizes and row "
                              "counts only")
