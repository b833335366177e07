"""PCA and search on an embedding output with a shard missing or damaged: one line naming the
file and exit 3, never a fit or a ranking over part of the records."""

from __future__ import annotations

import os

import numpy as np
import pytest

from beam_embed.pipeline.cli import main as cli
from beam_embed.process import exits
from tests.pca.fixtures import clustered_matrix, records, without_digests, write_embeddings

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end


def _output(folder, fmt: str) -> str:
    x, _ = clustered_matrix(400)
    return write_embeddings(str(folder), records({"mean": x}, texts=["t"] * 400), shards=4,
                            formats=(fmt,))


def _one_line(capsys, prog: str) -> str:
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith(f"beam-embed {prog}:")]
    assert len(lines) == 1 and "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("fmt", ["parquet", "tfrecord"])
def test_pca_refuses_an_output_with_a_missing_shard(tmp_path, capsys, fmt):
    out = _output(tmp_path / "emb", fmt)
    missing = os.path.join(out, f"embeddings-00002-of-00004.{fmt}")
    os.remove(missing)
    code = cli(["pca", "--input", out, "--output", str(tmp_path / "viz")])
    assert code == exits.INCOMPLETE_INPUT
    assert _one_line(capsys, "pca").startswith(f"beam-embed pca: {missing} is missing: ")
    assert not (tmp_path / "viz").exists()  # refused before anything was read or written


def test_pca_names_a_truncated_parquet_shard(tmp_path, capsys):
    out = _output(tmp_path / "emb", "parquet")
    shard = os.path.join(out, "embeddings-00001-of-00004.parquet")
    with open(shard, "r+b") as f:
        f.truncate(os.path.getsize(shard) - 100)
    assert cli(["pca", "--input", out, "--output", str(tmp_path / "viz")]) == 3
    assert _one_line(capsys, "pca").startswith(
        f"beam-embed pca: {shard} is damaged: not a readable Parquet file (")


def test_pca_names_a_tfrecord_shard_cut_at_a_record_boundary(tmp_path, capsys):
    """The file reads cleanly: the size its manifest records shows this cut before anything is
    read; a manifest of an earlier version, which records no sizes, has the record count per
    shard, checked as the shard is read."""
    out = _output(tmp_path / "emb", "tfrecord")
    shard = os.path.join(out, "embeddings-00003-of-00004.tfrecord")
    data = open(shard, "rb").read()
    sizes, at = [], 0
    while at < len(data):  # the records' framed sizes: 8-byte length, CRCs, data
        n = int(np.frombuffer(data[at:at + 8], "<u8")[0])
        at += n + 16
        sizes.append(at)
    with open(shard, "wb") as f:
        f.write(data[:sizes[59]])  # 60 of its 100 records
    assert cli(["pca", "--input", out, "--output", str(tmp_path / "viz"),
                "--components", "4"]) == exits.INCOMPLETE_INPUT
    line = _one_line(capsys, "pca")
    assert f"{shard} holds {sizes[59]} bytes, but {out}/manifest.json records {len(data)}" in line
    assert not (tmp_path / "viz").exists()  # refused before anything was read or written

    without_digests(out)
    assert cli(["pca", "--input", out, "--output", str(tmp_path / "viz"),
                "--components", "4"]) == exits.INCOMPLETE_INPUT
    line = _one_line(capsys, "pca")
    assert f"{shard} holds 60 records, but the manifest counts 100 in it" in line
    assert not (tmp_path / "viz" / "manifest.json").exists()


def test_search_refuses_missing_and_truncated_shards(tmp_path, capsys):
    out = _output(tmp_path / "emb", "parquet")
    shard = os.path.join(out, "embeddings-00000-of-00004.parquet")
    with open(shard, "r+b") as f:
        f.truncate(10)
    assert cli(["search", out, "a query"]) == exits.INCOMPLETE_INPUT
    assert _one_line(capsys, "search").startswith(
        f"beam-embed search: {shard} is damaged: not a readable Parquet file (")
    os.remove(shard)
    assert cli(["search", out, "a query"]) == exits.INCOMPLETE_INPUT
    assert _one_line(capsys, "search").startswith(f"beam-embed search: {shard} is missing: ")
