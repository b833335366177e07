"""--format lance: the run's rows as one Lance dataset in its folder, opened by LanceDB as the
table `embeddings`: every row once, vectors and columns equal to the Parquet shards', listed in
the manifest and published with the run; a killed run leaves no readable version and its
resume publishes every row once; what cannot be written is refused before any data is read."""

from __future__ import annotations

import glob
import json
import os

import lancedb
import numpy as np
import pytest

from beam_embed.pipeline.job.command import main
from beam_embed.process import exits
from tests.job_helpers import parquet_rows, run_job
from tests.resume_helpers import kill_after, local_commits, long_docs

pytestmark = pytest.mark.pipeline


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> str:
    return long_docs(tmp_path_factory.mktemp("lance") / "docs.txt", 1200, seed=5)


def args(corpus: str, model: str, *more: str) -> list[str]:
    return ["--input", corpus, "--model", model, "--shard_mb", "1", "--max_seq_length", "16",
            "--max_batch_size", "64", "--format", "parquet,lance", "--progress_every", "0",
            *more]


def table_rows(output: str) -> dict[str, dict]:
    table = lancedb.connect(output).open_table("embeddings").to_arrow()
    rows = table.to_pylist()
    assert len({r["id"] for r in rows}) == len(rows)  # every id once
    return {r["id"]: r for r in rows}


def test_the_dataset_holds_the_runs_rows_and_is_listed_in_the_manifest(corpus, tiny_export,
                                                                     tmp_path):
    out = str(tmp_path / "out")
    m = run_job(out, *args(corpus, tiny_export)[:-2], "--vector_dtype", "float16")
    lance_rows, parquet = table_rows(out), parquet_rows(out)
    assert set(lance_rows) == set(parquet) and len(parquet) == m["counts"]["embedded"]
    for i, row in parquet.items():
        assert lance_rows[i]["text"] == row["text"] and lance_rows[i]["source"] == row["source"]
        np.testing.assert_array_equal(np.asarray(lance_rows[i]["cls"], np.float16),
                                      np.asarray(row["cls"], np.float16))
    listed = m["files"]["lance"]
    on_disk = sorted(os.path.relpath(p, out) for p in glob.glob(f"{out}/embeddings.lance/**",
                                                                recursive=True)
                     if os.path.isfile(p))
    assert sorted(listed) == on_disk and all(n in m["digests"] for n in listed)
    data = [n for n in listed if "/data/" in n]
    assert len(data) == len(m["files"]["parquet"]) > 1  # one fragment a shard set
    assert sum(m["rows"][n] for n in data) == m["counts"]["embedded"]
    # LanceDB's nearest rows by cosine are the nearest rows computed from the Parquet vectors
    ids = sorted(parquet)
    vectors = np.stack([np.asarray(parquet[i]["cls"], np.float32) for i in ids])
    query = vectors[7]
    cos = vectors @ query / np.linalg.norm(vectors, axis=1) / np.linalg.norm(query)
    found = (lancedb.connect(out).open_table("embeddings").search(query, vector_column_name="cls")
             .distance_type("cosine").limit(10).to_list())
    by_id = dict(zip(ids, cos))
    np.testing.assert_allclose([r["_distance"] for r in found], 1 - np.sort(cos)[::-1][:10],
                               atol=2e-3)  # the ten nearest distances (float16 vectors)
    np.testing.assert_allclose([r["_distance"] for r in found],
                               [1 - by_id[r["id"]] for r in found], atol=2e-3)


def test_a_killed_lance_run_leaves_no_version_and_resumes_with_every_row_once(
        corpus, tiny_export, tmp_path):
    out = str(tmp_path / "out")
    run = [*args(corpus, tiny_export), "--output", out]
    kill_after(run, lambda: local_commits(out), 2)
    staged = glob.glob(f"{out}/.beam-embed-staging-*/embeddings.lance")
    assert staged and not glob.glob(f"{staged[0]}/_versions/*")  # fragments, no version
    assert main([*run, "--resume"]) == exits.OK
    with open(f"{out}/manifest.json") as f:
        m = json.load(f)
    assert m["resumed"]["records_kept"] > 0
    assert set(table_rows(out)) == set(parquet_rows(out)) and \
        len(table_rows(out)) == m["counts"]["read"] == 1200


@pytest.mark.parametrize("more, said", [
    (("--output", "gs://bucket/out"), "--format lance writes a local folder"),
    (("--granularity", "token"), "--format lance holds sentence vectors"),
])
def test_what_lance_cannot_hold_is_refused_before_any_data_is_read(tiny_export, tmp_path,
                                                                  capsys, more, said):
    code = main(["--input", str(tmp_path / "none.txt"), "--model", tiny_export, "--format",
                 "lance", "--output", str(tmp_path / "out"), *more])
    assert code == exits.BAD_CONFIG and said in capsys.readouterr().err


def test_lance_index_builds_an_ann_index_that_finds_the_nearest_rows(corpus, tiny_export,
                                                                     tmp_path):
    out = str(tmp_path / "out")
    m = run_job(out, *args(corpus, tiny_export)[:-2], "--lance_index")
    table = lancedb.connect(out).open_table("embeddings")
    assert [i.columns for i in table.list_indices()] == [["cls"]]
    assert any("/_indices/" in n for n in m["files"]["lance"])  # published with the run
    parquet = parquet_rows(out)
    ids = sorted(parquet)
    vectors = np.stack([np.asarray(parquet[i]["cls"], np.float32) for i in ids])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    by_id = dict(zip(ids, range(len(ids))))
    for q in (3, 300, 900):  # the rows found are as near as the true ten nearest (ties alike)
        cos = vectors @ vectors[q]
        found = (table.search(vectors[q], vector_column_name="cls").distance_type("cosine")
                 .nprobes(64).refine_factor(20).limit(10).to_list())
        assert len(found) == 10
        assert min(cos[by_id[r["id"]]] for r in found) >= np.sort(cos)[-10] - 1e-4


def test_lance_index_needs_float_vectors_in_a_lance_dataset(tiny_export, tmp_path, capsys):
    code = main(["--model", tiny_export, "--format", "lance", "--vector_dtype", "int8",
                 "--lance_index", "--output", str(tmp_path / "out")])
    assert code == exits.BAD_CONFIG
    assert "--lance_index indexes the float vectors" in capsys.readouterr().err
