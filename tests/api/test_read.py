"""read_embeddings on the command's runs: every --vector_dtype decoded as the dtype defines it
against the float32 run, a TFRecord-only run as its Parquet twin, a run on gs:// (the storage
emulator), and a damaged run refused by name."""

from __future__ import annotations

import os

import numpy as np
import pytest

from beam_embed import read_embeddings
from tests.job_helpers import parquet_rows, run_job, write_lines

pytestmark = pytest.mark.pipeline  # each reads what a whole run wrote

TEXTS = ["the cat sat on the mat", "a dog ran", "the river bank", "money is big", "play",
         "the bank is big and the river is small"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_lines(str(tmp_path_factory.mktemp("read") / "c.txt"), TEXTS)


@pytest.fixture(scope="module")
def exact(corpus, tiny_export, tmp_path_factory):
    """The float32 run: (its folder, id -> row)."""
    out = str(tmp_path_factory.mktemp("float32") / "run")
    run_job(out, "--input", corpus, "--model", tiny_export, "--pooling", "mean,cls")
    return out, parquet_rows(out)


def test_a_float32_run_reads_back_exactly_with_its_other_columns(exact):
    out, rows = exact
    stored = read_embeddings(out)  # the first pooling by default
    assert stored.pooling == "mean" and len(stored) == len(TEXTS)
    assert stored.vectors.dtype == np.float32 and stored.vectors.shape == (len(TEXTS), 8)
    assert stored.table.column_names == ["id", "text", "source", "num_tokens", "truncated"]
    table = stored.table.to_pylist()
    for i, rid in enumerate(stored.ids):
        np.testing.assert_array_equal(stored.vectors[i], np.float32(rows[rid]["mean"]))
        assert table[i] == {k: rows[rid][k] for k in table[i]}
    cls = read_embeddings(out, pooling="cls")
    assert cls.ids == stored.ids
    np.testing.assert_array_equal(cls.vectors, np.float32([rows[i]["cls"] for i in cls.ids]))
    assert stored.manifest["counts"]["embedded"] == len(TEXTS)


@pytest.mark.parametrize("dtype", ["float16", "int8", "binary"])
def test_every_vector_dtype_decodes_as_it_is_defined(dtype, exact, corpus, tiny_export,
                                                      tmp_path):
    out = str(tmp_path / dtype)
    manifest = run_job(out, "--input", corpus, "--model", tiny_export, "--pooling", "mean",
                       "--vector_dtype", dtype)
    stored = read_embeddings(out)
    want = np.float32([exact[1][rid]["mean"] for rid in stored.ids])
    assert stored.vectors.dtype == np.float32 and stored.vectors.shape == want.shape
    if dtype == "binary":  # the signs, as +1/-1
        np.testing.assert_array_equal(stored.vectors, np.where(want > 0, 1.0, -1.0))
    elif dtype == "int8":  # within half a step of each dimension's calibrated range
        step = np.float32(manifest["poolings"][0]["scale"])
        assert (np.abs(stored.vectors - want) <= step / 2 + 1e-5).all()
    else:
        np.testing.assert_allclose(stored.vectors, want, rtol=1e-3, atol=1e-3)


def test_a_tfrecord_only_run_reads_as_its_parquet_twin(exact, corpus, tiny_export, tmp_path):
    out = str(tmp_path / "tfrecord")
    run_job(out, "--input", corpus, "--model", tiny_export, "--pooling", "mean,cls",
            "--format", "tfrecord", "--vector_dtype", "float16")
    stored = read_embeddings(out, pooling="cls")
    twin = str(tmp_path / "parquet")
    run_job(twin, "--input", corpus, "--model", tiny_export, "--pooling", "mean,cls",
            "--format", "parquet", "--vector_dtype", "float16")
    expected = read_embeddings(twin, pooling="cls")
    order = np.argsort(stored.ids)
    back = np.argsort(expected.ids)
    np.testing.assert_array_equal(stored.vectors[order], expected.vectors[back])
    assert stored.table.take(order).to_pylist() == expected.table.take(back).to_pylist()


def test_a_run_on_gs_reads_as_the_local_one(exact, gcs):
    out, _ = exact
    remote = gcs.upload_tree(out, "run")
    stored, local = read_embeddings(remote), read_embeddings(out)
    assert stored.ids == local.ids
    np.testing.assert_array_equal(stored.vectors, local.vectors)
    assert stored.table.equals(local.table)


def test_an_unknown_pooling_and_a_missing_shard_are_named(exact, tmp_path):
    out, _ = exact
    with pytest.raises(ValueError, match=r"unknown pooling 'max'.*expected one of \['cls', "
                                         r"'mean'\]"):
        read_embeddings(out, pooling="max")
    import shutil

    broken = str(tmp_path / "broken")
    shutil.copytree(out, broken)
    shard = next(n for n in sorted(os.listdir(broken)) if n.endswith(".parquet"))
    os.remove(os.path.join(broken, shard))
    with pytest.raises(Exception, match=rf"{shard} is missing"):
        read_embeddings(broken)
