"""A user's own corpus: a field named `id` is the id and the input's other fields of single
values are carried as metadata unless the flags say otherwise, the same for every format with
named fields; every shard has one schema; a field the job reads that the input lacks is refused
up front, from the first records where the format has no schema."""

from __future__ import annotations

import csv
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tensorflow as tf

from beam_embed.pipeline.cli import main as cli
from beam_embed.pipeline.job.formats import FIRST_RECORDS
from tests.job_helpers import parquet_rows, run_job, tfrecord_rows

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end

TOPICS = ("rivers", "money", "cats")


def _records(n: int = 6) -> list[dict]:
    return [{"id": f"doc-{i}", "text": f"sentence {i} about {TOPICS[i % 3]}",
             "category": TOPICS[i % 3], "score": i / 4, "flag": i % 2 == 0,
             "tags": ["a", "b"], "source": "their own"} for i in range(n)]


def _write(fmt: str, path, rows: list[dict]) -> str:
    """The records in one format; lists as lists where the format has them."""
    path = str(path)
    if fmt == "jsonl":
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    elif fmt in ("csv", "tsv"):
        names = [k for k in rows[0] if k != "tags"]
        with open(path, "w", encoding="utf-8", newline="") as f:
            w = csv.DictWriter(f, names, delimiter="," if fmt == "csv" else "\t",
                               extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)
    elif fmt == "parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        with tf.io.TFRecordWriter(path) as w:
            for r in rows:
                w.write(_example(r))
    return path


def _example(row: dict) -> bytes:
    def feature(v):
        if isinstance(v, bool) or isinstance(v, int):
            return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v)]))
        if isinstance(v, float):
            return tf.train.Feature(float_list=tf.train.FloatList(value=[v]))
        values = v if isinstance(v, list) else [v]
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[x.encode() for x in values]))

    return tf.train.Example(features=tf.train.Features(
        feature={k: feature(v) for k, v in row.items()})).SerializeToString()


def _run(capsys, out, *args) -> tuple[dict, str]:
    manifest = run_job(str(out), *args)
    return manifest, capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "tsv", "parquet", "tfrecord"])
def test_the_id_and_the_other_fields_by_default_in_every_format(fmt, tiny_export, tmp_path,
                                                                 capsys):
    rows = _records()
    corpus = _write(fmt, tmp_path / f"corpus.{fmt}", rows)
    manifest, err = _run(capsys, tmp_path / "out", "--input", corpus, "--model", tiny_export)
    # lists are not carried by default, and the input's `source` is kept as meta_source beside
    # the run's own (the file); the order is the input's (an Example's features have none: by
    # name)
    carried = ["category", "flag", "score"] if fmt == "tfrecord" else ["category", "score", "flag"]
    assert manifest["metadata_columns"] == [*carried, "meta_source"]
    out = parquet_rows(str(tmp_path / "out"))
    assert sorted(out) == sorted(r["id"] for r in rows)
    assert {r["category"] for r in out.values()} == set(TOPICS)
    assert {r["source"] for r in out.values()} == {corpus}
    assert {r["meta_source"] for r in out.values()} == {"their own"}
    line = next(x for x in err.splitlines() if "embedding 1 file(s)" in x)
    assert line.endswith(f"; ids from field 'id' (--id_field names another), metadata columns "
                         f"{', '.join(carried)}, source as meta_source (the input's fields; "
                         f"--metadata_fields narrows them, '' drops them)")


def test_a_jsonl_corpus_decided_from_its_first_records(tiny_export, tmp_path, capsys):
    """Fields only later records hold are not carried; a record without a carried field has
    null there; a later list in a carried field is its JSON text; every shard, Parquet and
    TFRecord, holds the same columns."""
    rows = _records(FIRST_RECORDS + 20)
    del rows[3]["category"]
    rows[FIRST_RECORDS + 5]["category"] = ["two", "topics"]
    rows[FIRST_RECORDS + 6]["late"] = "only here"
    corpus = _write("jsonl", tmp_path / "c.jsonl", rows)
    out = tmp_path / "out"
    manifest, _ = _run(capsys, out, "--input", corpus, "--model", tiny_export,
                       "--num_shards", "3", "--max_batch_size", "8")
    assert manifest["metadata_columns"] == ["category", "score", "flag", "meta_source"]
    shards = [pq.read_schema(out / name) for name in manifest["files"]["parquet"]]
    assert len(shards) == 3 and all(s.equals(shards[0]) for s in shards)
    assert "late" not in shards[0].names
    got = parquet_rows(str(out))
    assert got["doc-3"]["category"] is None
    assert json.loads(got[f"doc-{FIRST_RECORDS + 5}"]["category"]) == ["two", "topics"]
    assert got["doc-4"]["score"] == "1.0" and got["doc-4"]["flag"] == "True"
    examples = tfrecord_rows(str(out))
    assert examples["doc-1"]["category"] == "money" and "category" not in examples["doc-3"]


@pytest.mark.parametrize("value, columns", [("", []), ("tags,score", ["tags", "score"])])
def test_metadata_fields_narrows_or_drops_them(value, columns, tiny_export, tmp_path, capsys):
    corpus = _write("jsonl", tmp_path / "c.jsonl", _records())
    manifest, err = _run(capsys, tmp_path / "out", "--input", corpus, "--model", tiny_export,
                         "--metadata_fields", value)
    assert manifest["metadata_columns"] == columns
    if columns:  # a list named explicitly is carried as its JSON text
        assert parquet_rows(str(tmp_path / "out"))["doc-0"]["tags"] == '["a", "b"]'
    assert "--metadata_fields narrows" not in err


def _refused(capsys, out, *args) -> str:
    code = cli(["run", "--output", str(out), "--progress_every", "0", *args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert not out.exists()  # refused before any output folder is made
    (line,) = [x for x in err.splitlines() if x.startswith("beam-embed run: ")]
    return line.removeprefix("beam-embed run: ")


@pytest.mark.parametrize("fmt", ["jsonl", "tfrecord"])
def test_a_text_field_the_first_records_lack_is_refused_up_front(fmt, tiny_export, tmp_path,
                                                                 capsys):
    corpus = _write(fmt, tmp_path / f"c.{fmt}", _records())
    line = _refused(capsys, tmp_path / "out", "--input", corpus, "--model", tiny_export,
                    "--text_field", "body")
    fields = ("id, text, category, score, flag, tags, source" if fmt == "jsonl" else
              "category, flag, id, score, source, tags, text")  # Example features: by name
    assert line == (f"--text_field 'body' is not a field of the first 6 records of {corpus}; "
                    f"their fields: {fields}")


@pytest.mark.parametrize("args, message", [
    (["--id_field", "doc"], "--id_field 'doc' is not a field of the first 6 records of {f}"),
    (["--metadata_fields", "category,lang"],
     "--metadata_fields 'lang' is not a field of the input's first records (the first 6 of "
     "each file); their fields: id, text, category"),
    (["--metadata_fields", "source,category,meta_source"], "--metadata_fields: 'source' and "
     "'meta_source' would both be column 'meta_source' (a field named like one of the run's own "
     "columns, id, text, source, num_tokens, truncated, cls, is kept as meta_<field>); name each "
     "field once, leaving out 'source' or 'meta_source'"),
    (["--metadata_fields", "category,category"],
     "--metadata_fields names 'category' twice; name each field once"),
])
def test_other_fields_the_input_lacks_are_refused_up_front(args, message, tiny_export, tmp_path,
                                                           capsys):
    corpus = _write("jsonl", tmp_path / "c.jsonl", _records())
    line = _refused(capsys, tmp_path / "out", "--input", corpus, "--model", tiny_export,
                    "--pooling", "cls", *args)
    assert line.startswith(message.format(f=corpus))
