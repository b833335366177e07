"""A corpus field named like one of the run's own columns (`source`, the file a record was read
from) never disappears and never collides: it is kept as `meta_source`, by default, when named in
--metadata_fields, and through the API's WriteEmbeddings, in both formats and every shard with
one column per name (pandas reads it); fields that would still share a column are refused before
any data is read, with the fix named; pca --color-by source says which column it colours by."""

from __future__ import annotations

import csv
import json
import os

import apache_beam as beam
import pyarrow.parquet as pq
import pytest
from apache_beam.testing import test_pipeline

from beam_embed import EmbedTexts, WriteEmbeddings
from beam_embed.pipeline.cli import main as cli
from tests.job_helpers import parquet_rows, run_job, tfrecord_rows

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end

WORDS = ("the", "cat", "dog", "sat", "on", "mat", "bank", "river", "money", "big", "small")
ROWS = [{"doc_id": f"d{i}", "title": f"title {i % 3}",
         "body": " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 2 + i % 5)),
         "source": ("debian", "python", "man")[i % 3]} for i in range(12)]  # the tiny vocabulary


def _corpus(path, rows=ROWS) -> str:
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return str(path)


def _kept(out: str, manifest: dict, columns: list[str], corpus: str) -> None:
    """The user's `source` is column meta_source, the run's own is the file, in both formats,
    and no name appears twice."""
    assert manifest["metadata_columns"] == columns
    names = pq.read_schema(os.path.join(out, manifest["files"]["parquet"][0])).names
    assert len(names) == len(set(names)) and {"source", "meta_source"} <= set(names)
    theirs = {r["doc_id"]: r["source"] for r in ROWS}
    for rows in (parquet_rows(out), tfrecord_rows(out)):
        assert {rid: r["meta_source"] for rid, r in rows.items()} == theirs
        assert {r["source"] for r in rows.values()} == {corpus}
    import pandas as pd  # as docs/reading.md's pandas snippet reads the run

    frame = pd.concat(pd.read_parquet(os.path.join(out, name))
                      for name in manifest["files"]["parquet"])
    assert sorted(frame[["id", *manifest["metadata_columns"]]]["meta_source"]) == sorted(
        theirs.values())


def test_a_corpus_source_field_is_kept_by_default_and_pca_says_which_it_colours_by(
        tiny_export, tmp_path, capsys):
    corpus = _corpus(tmp_path / "corpus.csv")
    out = str(tmp_path / "out")
    manifest = run_job(out, "--input", corpus, "--model", tiny_export, "--text_field", "body",
                       "--id_field", "doc_id")
    _kept(out, manifest, ["title", "meta_source"], corpus)
    err = capsys.readouterr().err
    assert "metadata columns title, source as meta_source (the input's fields;" in err
    viz = str(tmp_path / "viz")
    assert cli(["pca", "--input", out, "--output", viz, "--color-by", "source"]) == 0
    err = capsys.readouterr().err
    assert ("colouring by column 'source', the run's own; the input's field 'source' is column "
            "'meta_source': --color-by meta_source colours by it") in err
    with open(os.path.join(viz, "manifest.json")) as f:
        assert json.load(f)["plot"]["color_by"] == "source"
    # a field the run did not carry: the flag that carries it names the input's fields
    assert cli(["pca", "--input", out, "--output", str(tmp_path / "v2"), "--color-by", "x"]) == 2
    assert capsys.readouterr().err.rstrip().endswith(
        "run `beam-embed run` again with --metadata_fields title,source,x")


def test_metadata_fields_naming_source_keeps_it(tiny_export, tmp_path, capsys):
    corpus = _corpus(tmp_path / "corpus.csv")
    out = str(tmp_path / "out")
    manifest = run_job(out, "--input", corpus, "--model", tiny_export, "--text_field", "body",
                       "--id_field", "doc_id", "--metadata_fields", "title,source")
    _kept(out, manifest, ["title", "meta_source"], corpus)


@pytest.mark.parametrize("flags, message", [
    ([], "the input's fields, carried by default,: 'source' and 'meta_source' would both be "
         "column 'meta_source' (a field named like one of the run's own columns, id, text, "
         "source, num_tokens, truncated, cls, is kept as meta_<field>); name the fields to "
         "carry with --metadata_fields, leaving out 'source' or 'meta_source'"),
    (["--metadata_fields", "meta_source,source"],
     "--metadata_fields: 'meta_source' and 'source' would both be column 'meta_source' (a field "
     "named like one of the run's own columns, id, text, source, num_tokens, truncated, cls, is "
     "kept as meta_<field>); name each field once, leaving out 'meta_source' or 'source'"),
])
def test_fields_that_would_share_a_column_are_refused_up_front(flags, message, tiny_export,
                                                                tmp_path, capsys):
    corpus = _corpus(tmp_path / "corpus.csv", [{**r, "meta_source": "x"} for r in ROWS])
    out = tmp_path / "out"
    code = cli(["run", "--output", str(out), "--input", corpus, "--model", tiny_export,
                "--text_field", "body", "--pooling", "cls", "--progress_every", "0", *flags])
    err = capsys.readouterr().err
    assert code == 2, err
    assert not out.exists()  # refused before any output folder is made
    assert f"beam-embed run: {message}" in err.splitlines()


def test_the_api_keeps_a_source_field_beside_its_own(tiny_export, tmp_path):
    out = str(tmp_path / "out")
    with test_pipeline.TestPipeline() as p:
        _ = (p | beam.Create([{"id": r["doc_id"], "text": r["body"], "title": r["title"],
                               "source": r["source"]} for r in ROWS])
             | EmbedTexts(model=tiny_export, poolings=["mean"])
             | WriteEmbeddings(out, metadata_fields=["title", "source"]))
    with open(os.path.join(out, "manifest.json")) as f:
        manifest = json.load(f)
    assert manifest["metadata_columns"] == ["title", "meta_source"]
    names = pq.read_schema(os.path.join(out, manifest["files"]["parquet"][0])).names
    assert len(names) == len(set(names))
    theirs = {r["doc_id"]: r["source"] for r in ROWS}
    for rows in (parquet_rows(out), tfrecord_rows(out)):
        assert {rid: r["meta_source"] for rid, r in rows.items()} == theirs
        assert {r["source"] for r in rows.values()} == {""}  # an element has no file


def test_the_api_refuses_fields_that_would_share_a_column(tiny_export, tmp_path):
    out = str(tmp_path / "out")
    with pytest.raises(ValueError, match=r"^metadata_fields: 'source' and 'meta_source' would "
                                         r"both be column 'meta_source'"):
        with test_pipeline.TestPipeline() as p:
            _ = (p | beam.Create([{"id": "a", "text": "x", "source": "s", "meta_source": "m"}])
                 | EmbedTexts(model=tiny_export, poolings=["mean"])
                 | WriteEmbeddings(out, metadata_fields=["source", "meta_source"]))
    assert not os.path.exists(out)
