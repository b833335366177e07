"""`beam-embed search` on real job outputs: exact brute-force top k, the index, clear errors."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from beam_embed.pipeline.cli import main as cli
from beam_embed.pipeline.search.index import check_local
from tests.evaluate.test_command import reference_vectors
from tests.job_helpers import parquet_rows, run_job, write_lines

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end

WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "bank", "river", "money", "is", "was",
         "big", "small", "run", "play"]
QUERIES = ["the cat sat on the mat", "money is big", "a river bank"]


def _corpus(n: int = 60) -> list[str]:
    rng = np.random.default_rng(3)
    return [" ".join(rng.choice(WORDS, rng.integers(1, 9))) for _ in range(n)]


@pytest.fixture(scope="module")
def output(tiny_export, tmp_path_factory):
    """60 records in 7 Parquet shards; vectors not normalized (search normalizes blocks)."""
    folder = tmp_path_factory.mktemp("search")
    corpus = write_lines(str(folder / "corpus.txt"), _corpus())
    out = str(folder / "out")
    run_job(out, "--input", corpus, "--model", tiny_export, "--pooling", "mean,cls",
            "--no-normalize", "--format", "parquet", "--num_shards", "7", "--batch_tokens", "64")
    return out


def _search(capsys, *argv) -> tuple[int, str, str]:
    code = cli(["search", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _brute_force(output: str, weights, column: str, pooling: str, k: int):
    """Every stored row scored in float64 against the numpy-BERT query vector."""
    rows = list(parquet_rows(output).values())
    stored = np.array([r[column] for r in rows], np.float64)
    stored /= np.linalg.norm(stored, axis=1, keepdims=True)
    q = reference_vectors(weights, QUERIES)[pooling]
    scores = stored @ (q / np.linalg.norm(q, axis=1, keepdims=True)).T
    return [sorted(((float(s[i]), rows[i]["id"], rows[i]["text"]) for i in range(len(rows))),
                   key=lambda h: -h[0])[:k] for s in scores.T]


@pytest.mark.parametrize("pooling, column", [("mean", "mean"), ("cls", "cls")])
def test_top_k_equals_brute_force_over_many_shards(output, tiny_checkpoint, capsys, pooling,
                                                   column):
    manifest = json.load(open(os.path.join(output, "manifest.json")))
    assert len(manifest["files"]["parquet"]) == 7
    code, out, err = _search(capsys, output, *QUERIES, "-k", "12", "--pooling", pooling,
                             "--block-rows", "4", "--json", "--no-collapse")  # every record
    assert code == 0 and "60 records from 7 Parquet shard(s)" in err
    results = json.loads(out)
    for result, query, want in zip(results, QUERIES,
                                   _brute_force(output, tiny_checkpoint[1], column, pooling, 12)):
        assert result["query"] == query
        assert [h["id"] for h in result["hits"]] == [w[1] for w in want]
        assert [h["text"] for h in result["hits"]] == [w[2] for w in want]
        np.testing.assert_allclose([h["score"] for h in result["hits"]], [w[0] for w in want],
                                   atol=1e-5)


def test_index_gives_the_same_hits_and_is_rebuilt_for_a_new_run(output, tmp_path, capsys):
    copy = str(tmp_path / "copy")
    shutil.copytree(output, copy)
    argv = [copy, QUERIES[0], "-k", "9", "--block-rows", "5", "--json"]
    scanned = json.loads(_search(capsys, *argv)[1])
    for expected_source in ("building the search index", "from the search index"):
        code, out, err = _search(capsys, *argv, "--index")
        assert code == 0 and expected_source in err
        got = json.loads(out)
        assert [h["id"] for h in got[0]["hits"]] == [h["id"] for h in scanned[0]["hits"]]
        np.testing.assert_allclose([h["score"] for h in got[0]["hits"]],
                                   [h["score"] for h in scanned[0]["hits"]], atol=1e-6)
    index = np.load(os.path.join(copy, "search-index", "mean.npy"))
    assert index.shape == (60, 8)
    np.testing.assert_allclose(np.linalg.norm(index, axis=1), 1.0, atol=1e-6)
    manifest_path = os.path.join(copy, "manifest.json")
    manifest = json.load(open(manifest_path))
    manifest["finished_at"] = "a later run"
    json.dump(manifest, open(manifest_path, "w"))
    assert "building the search index" in _search(capsys, *argv, "--index")[2]


def test_text_output_highlights_shared_words(output, capsys):
    code, out, _ = _search(capsys, output, "cat", "-k", "60", "--no-collapse")
    lines = out.splitlines()
    assert code == 0 and lines[0] == "query: cat" and len(lines) == 61
    assert lines[1].startswith("  1. ")
    with_cat = [t for t in _corpus() if "cat" in t.split()]
    assert with_cat and sum("**cat**" in line for line in lines) == len(with_cat)
    code, out, _ = _search(capsys, output, "cat", "--highlight", "bold")
    assert "\033[1mcat\033[0m" in out


def test_query_with_another_model_fails_naming_both(output, minilm_export, capsys):
    code, out, err = _search(capsys, output, "cat", "--model", minilm_export)
    assert code == 2 and out == ""
    assert f"--model '{minilm_export}' is all-MiniLM-L6-v2 (fingerprint " in err
    assert "was embedded with tiny-bert (fingerprint " in err
    assert len(err.strip().splitlines()) == 1


def test_moved_model_is_caught_and_can_be_given(output, tiny_export, tmp_path, capsys):
    copy = str(tmp_path / "copy")
    shutil.copytree(output, copy)
    manifest_path = os.path.join(copy, "manifest.json")
    manifest = json.load(open(manifest_path))
    manifest["model"].update(encoder=str(tmp_path / "gone" / "encoder"),
                             preprocessor=str(tmp_path / "gone" / "preprocessor"))
    json.dump(manifest, open(manifest_path, "w"))
    code, _, err = _search(capsys, copy, "cat")
    assert code == 2 and "the model tiny-bert at" in err and "is missing or changed" in err
    assert _search(capsys, copy, "cat", "--model", tiny_export)[0] == 0


def test_bad_configuration_fails_before_work(output, tmp_path, capsys):
    code, _, err = _search(capsys, str(tmp_path), "cat")
    assert code == 2 and "holds no manifest.json" in err
    code, _, err = _search(capsys, output, "cat", "--pooling", "max")
    assert code == 2 and "unknown pooling 'max'" in err and "expected one of ['cls', 'mean']" in err
    code, _, err = _search(capsys, output, "cat", "-k", "0")  # a flag error: one line, exit 2
    assert code == 2 and err == "beam-embed search: -k must be a positive integer, got 0\n"
    with pytest.raises(ValueError, match="--index needs a local output folder; 'gs://b/r'"):
        check_local("gs://b/r")
