"""`run --truncate_dim K` (Matryoshka): each vector's first K dimensions, unit length again when
the run normalizes; recorded in the manifest; refused above the model's width before any data is
read; search embeds its queries the same way, pca reads the run, --reuse copies only between
runs truncated alike."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from beam_embed.pipeline.cli import main as cli
from beam_embed.process import exits
from tests.job_helpers import parquet_rows, run_job, write_lines

pytestmark = pytest.mark.pipeline  # whole runs and the commands that read them

TEXTS = ["the cat sat on the mat", "a dog", "the river bank", "money is big", "small cats run",
         "a dog was playing", "the bank is big", "x"]
ARGS = ("--pooling", "mean,cls", "--batch_tokens", "64", "--format", "parquet")


@pytest.fixture(scope="module")
def runs(tiny_export, tmp_path_factory):
    base = tmp_path_factory.mktemp("truncate")
    corpus = write_lines(str(base / "c.txt"), TEXTS)
    whole = str(base / "whole")
    run_job(whole, "--input", corpus, "--model", tiny_export, *ARGS, "--no-normalize")
    cut = str(base / "cut")
    manifest = run_job(cut, "--input", corpus, "--model", tiny_export, *ARGS, "--normalize",
                       "--truncate_dim", "5")
    return base, corpus, whole, cut, manifest


def _matrix(rows: dict, column: str) -> np.ndarray:
    return np.array([rows[k][column] for k in sorted(rows)], np.float64)


def test_the_first_k_dimensions_normalized_again_and_recorded(runs):
    _, _, whole, cut, manifest = runs
    full, ours = parquet_rows(whole), parquet_rows(cut)
    for column in ("mean", "cls"):
        first = _matrix(full, column)[:, :5]
        expected = first / np.linalg.norm(first, axis=1, keepdims=True)
        np.testing.assert_allclose(_matrix(ours, column), expected, atol=1e-6)
    assert manifest["model"]["truncate_dim"] == 5
    assert [(p["column"], p["width"], p["normalize"]) for p in manifest["poolings"]] == [
        ("mean", 5, True), ("cls", 5, True)]


def test_without_normalization_it_is_the_first_k_dimensions(runs, tiny_export, tmp_path):
    base, corpus, whole, _, _ = runs
    out = str(tmp_path / "plain")
    run_job(out, "--input", corpus, "--model", tiny_export, *ARGS, "--no-normalize",
            "--truncate_dim", "3")
    np.testing.assert_array_equal(_matrix(parquet_rows(out), "mean"),
                                  _matrix(parquet_rows(whole), "mean")[:, :3])


def test_above_the_width_is_refused_before_any_data_is_read(runs, tiny_export, tmp_path,
                                                           capsys):
    _, corpus, _, _, _ = runs
    out = str(tmp_path / "wide")
    capsys.readouterr()
    code = cli(["run", "--input", corpus, "--model", tiny_export, *ARGS, "--output", out,
                "--truncate_dim", "9", "--progress_every", "0"])
    err = capsys.readouterr().err
    assert code == exits.BAD_CONFIG, err
    assert "--truncate_dim 9 is above the width of pooling 'mean' (8); expected 1..8" in err
    assert not os.path.exists(os.path.join(out, "manifest.json"))
    assert cli(["run", "--input", corpus, "--model", tiny_export, "--output", out,
                "--truncate_dim", "0"]) == exits.BAD_CONFIG
    assert "truncate_dim" in capsys.readouterr().err


def test_search_pca_and_reuse_read_a_truncated_run(runs, tiny_export, tmp_path, capsys):
    base, corpus, whole, cut, manifest = runs
    capsys.readouterr()
    assert cli(["search", cut, "a dog", "--json", "-k", "1"]) == exits.OK
    said = capsys.readouterr()
    assert '"a dog"' in said.out, said.err  # the query's own text is its nearest record
    assert cli(["pca", "--input", cut, "--output", str(tmp_path / "pca"), "--components", "2",
                "--pooling", "mean"]) == exits.OK
    with open(tmp_path / "pca" / "manifest.json") as f:
        assert json.load(f)["kind"] == "pca"
    new = str(tmp_path / "new")
    assert cli(["run", "--input", corpus, "--model", tiny_export, *ARGS, "--normalize",
                "--truncate_dim", "5", "--output", new, "--progress_every", "0",
                "--reuse", cut]) == exits.OK
    with open(os.path.join(new, "manifest.json")) as f:
        assert json.load(f)["counts"]["reused"] == len(TEXTS)
    capsys.readouterr()
    code = cli(["run", "--input", corpus, "--model", tiny_export, *ARGS, "--normalize",
                "--output", str(tmp_path / "other"), "--progress_every", "0", "--reuse", cut])
    assert code == exits.BAD_CONFIG
    assert "truncate_dim 5, this run's None" in capsys.readouterr().err
