"""`--store bigquery://PROJECT.DATASET.TABLE`: written by the job's own WriteToBigQuery step.
Nothing here reaches BigQuery (there is no network): the URI and the launch checks refuse bad
values before any data is read, the offline dry run shows the step and the table's schema, and
the rows the step writes are checked against the run's own storage of the vectors."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from beam_embed.pipeline.common.stores import parse_store_uri
from beam_embed.pipeline.common.stores.bigquery_store import table_rows, table_schema
from beam_embed.pipeline.job.command import main
from tests.job.test_dry_run import CPU_CONFIG
from tests.job.test_dry_run import dry_run as offline_dry_run
from tests.job_helpers import write_lines

BQ = "bigquery://my-project.my_dataset.docs"


@pytest.mark.parametrize("uri, host, table", [
    (BQ, "my-project.my_dataset", "docs"),
    ("bigquery://example.com:my-project.Data_1.table-2", "example.com:my-project.Data_1",
     "table-2"),
])
def test_a_bigquery_uri_names_project_dataset_and_table(uri, host, table):
    target = parse_store_uri(uri, "ignored_here")
    assert (target.scheme, target.host, target.table, target.path) == ("bigquery", host, table,
                                                                       None)


@pytest.mark.parametrize("uri, said", [
    ("bigquery://my-project.docs", "expected bigquery://PROJECT.DATASET.TABLE"),
    ("bigquery:my-project.ds.docs", "expected bigquery://PROJECT.DATASET.TABLE"),
    ("bigquery://My_Project.ds.docs", "'My_Project' is not a BigQuery project name"),
    ("bigquery://proj.ds.docs", "'proj' is not a BigQuery project name"),
    ("bigquery://my-project.my-dataset.docs", "'my-dataset' is not a BigQuery dataset name"),
    ("bigquery://my-project.ds.do$cs", "'do$cs' is not a BigQuery table name"),
    ("bigquery://my-project..docs", "three names"),
])
def test_a_bad_bigquery_uri_is_named(uri, said):
    with pytest.raises(ValueError, match="--store") as e:
        parse_store_uri(uri)
    assert said in str(e.value)


def test_a_bad_bigquery_uri_refuses_the_run_before_any_data(tiny_export, tmp_path, capsys):
    corpus = write_lines(str(tmp_path / "c.txt"), ["one text"])
    out = str(tmp_path / "out")
    code = main(["--input", corpus, "--model", tiny_export, "--output", out,
                 "--store", "bigquery://my-project.my-dataset.docs"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "'my-dataset' is not a BigQuery dataset name" in err[0]
    assert not os.path.exists(out)


def test_a_bigquery_store_needs_a_cloud_storage_temp_location(tiny_export, tmp_path, capsys):
    corpus = write_lines(str(tmp_path / "c.txt"), ["one text"])
    out = str(tmp_path / "out")
    code = main(["--input", corpus, "--model", tiny_export, "--output", out, "--store", BQ,
                 "--temp_location", str(tmp_path / "tmp")])
    err = capsys.readouterr().err
    assert code == 2 and "expected --temp_location gs://BUCKET/PATH" in err and BQ in err
    assert not os.path.exists(out)


def test_the_dry_run_shows_the_bigquery_step_and_its_schema(tmp_path):
    code, job, _ = offline_dry_run(str(tmp_path), "--config", CPU_CONFIG, "--store", BQ,
                                   "--metadata_fields", "title,lang")
    assert code == 0
    names = [s["name"] for s in job["steps"]]
    step = "WriteBigQuery[my-project.my_dataset.docs]"
    assert step in names and f"{step}/ToTableRows" in names
    assert f"{step}/WriteToBigQuery/BigQueryBatchFileLoads" in names  # Beam's file loads
    assert [s for s in job["stores"] if s["step"] == step] == [{
        "uri": BQ, "step": step, "table": "my-project.my_dataset.docs", "pooling": "mean",
        "vector_column": "embedding",
        "write": "WRITE_TRUNCATE (the table holds this run's rows), CREATE_IF_NEEDED",
        "schema": [{"name": "id", "type": "STRING", "mode": "REQUIRED"},
                   {"name": "text", "type": "STRING", "mode": "NULLABLE"},
                   {"name": "source", "type": "STRING", "mode": "NULLABLE"},
                   {"name": "title", "type": "STRING", "mode": "NULLABLE"},
                   {"name": "lang", "type": "STRING", "mode": "NULLABLE"},
                   {"name": "embedding", "type": "FLOAT64", "mode": "REPEATED"}]}]


def test_the_dry_run_refuses_a_metadata_column_bigquery_would(tmp_path, capsys):
    code, _, _ = offline_dry_run(str(tmp_path), "--config", CPU_CONFIG, "--store", BQ,
                                 "--metadata_fields", "user-name", "--no-include_text")
    assert code == 2
    assert "column 'user-name' is not a BigQuery column name" in capsys.readouterr().err


def test_the_store_command_says_bigquery_is_written_by_the_run(tmp_path, capsys):
    from beam_embed.pipeline.store.command import main as store

    assert store([str(tmp_path), BQ]) == 2
    err = capsys.readouterr().err
    assert "written by the job itself" in err and f"--store {BQ}" in err


def test_the_table_rows_hold_the_vectors_as_the_run_stores_them():
    """The step's rows for a batch stored as float16 and as int8: each row's `embedding` is the
    vector the run's Parquet column reads back as, computed here from the dtype's own rule."""
    from beam_embed.pipeline.common.rows.records import EmbeddedBatch, Record
    from beam_embed.pipeline.common.rows.vector_dtypes import StoredVectors

    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(3, 5)).astype(np.float32)
    records = tuple(Record(f"id{i}", f"text {i}", "in.jsonl", (("lang", f"l{i}"),))
                    for i in range(3))
    batch = EmbeddedBatch(records, {"mean": vectors}, np.array([2, 2, 2]), np.zeros(3, bool))
    half = table_rows(batch, True, (("lang", "lang"),), "mean", StoredVectors("float16", 5))
    assert [{k: v for k, v in r.items() if k != "embedding"} for r in half] == [
        {"id": f"id{i}", "text": f"text {i}", "source": "in.jsonl", "lang": f"l{i}"}
        for i in range(3)]
    np.testing.assert_array_equal([r["embedding"] for r in half],
                                  vectors.astype(np.float16).astype(np.float64))
    scale, offset = (0.02,) * 5, (-0.1,) * 5
    codes = np.clip(np.rint((vectors + 0.1) / 0.02), -128, 127)
    int8 = table_rows(batch, False, (), "mean", StoredVectors("int8", 5, scale, offset))
    assert "text" not in int8[0] and "lang" not in int8[0]
    np.testing.assert_allclose([r["embedding"] for r in int8], codes * 0.02 - 0.1, atol=1e-6)
    json.dumps(int8)  # the load files' JSON: plain floats and strings


def test_the_schema_is_one_vector_search_reads():
    fields = table_schema(False, ["title"])["fields"]
    assert fields[-1] == {"name": "embedding", "type": "FLOAT64", "mode": "REPEATED"}
    assert [f["name"] for f in fields] == ["id", "source", "title", "embedding"]
    with pytest.raises(ValueError, match="'embedding' is not a BigQuery column name"):
        table_schema(False, ["embedding"])


def test_token_vectors_are_refused_for_a_bigquery_table(tiny_export, tmp_path, capsys):
    code = main(["--input", "x", "--model", tiny_export, "--output", str(tmp_path / "o"),
                 "--granularity", "token", "--store", BQ])
    assert code == 2 and "a BigQuery table holds one vector a row; expected --granularity " \
        "sentence" in capsys.readouterr().err


def test_a_metadata_column_bigquery_refuses_stops_the_run_before_any_data(tiny_export, tmp_path,
                                                                           capsys):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "a", "text": "one text", "user-name": "x"}) + "\n")
    out = str(tmp_path / "out")
    code = main(["--input", str(corpus), "--model", tiny_export, "--output", out,
                 "--metadata_fields", "user-name", "--store", BQ,
                 "--temp_location", "gs://bucket/tmp"])
    assert code == 2
    assert "column 'user-name' is not a BigQuery column name" in capsys.readouterr().err
    assert not os.path.exists(os.path.join(out, "manifest.json"))
