"""Every input format, and bad input: the job finishes and every record is accounted for."""

from __future__ import annotations

import bz2
import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tensorflow as tf

from tests.job_helpers import dead_letters, parquet_rows, run_job, write_lines

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end


def _example(**fields) -> bytes:
    feats = {k: tf.train.Feature(bytes_list=tf.train.BytesList(value=[v.encode()]))
             for k, v in fields.items()}
    return tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString()


def test_every_format_and_compression(tiny_export, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    write_lines(str(d / "a.txt"), ["the cat", "a dog"])
    with gzip.open(d / "b.jsonl.gz", "wt") as f:
        f.write(json.dumps({"id": "j1", "text": "the mat", "tag": "x"}) + "\n")
    with bz2.open(d / "c.txt.bz2", "wt") as f:
        f.write("the bank\n")
    write_lines(str(d / "d.csv"), ["id,text,tag", 'c1,"the river, big",y'])
    write_lines(str(d / "e.tsv"), ["id\ttext\ttag", "t1\tsmall money\tz"])
    pq.write_table(pa.table({"id": ["p1"], "text": ["run play"], "tag": ["w"]}), d / "f.parquet")
    with tf.io.TFRecordWriter(str(d / "g.tfrecord")) as w:
        w.write(_example(id="r1", text="a cat sat", tag="v"))
    out = str(tmp_path / "out")
    manifest = run_job(out, "--input", str(d / "*"), "--model", tiny_export, "--id_field", "id",
                       "--metadata_fields", "tag")
    rows = parquet_rows(out)
    c = manifest["counts"]
    assert (c["read"], c["embedded"], c["skipped_empty"], c["dead_lettered"]) == (8, 8, 0, 0)
    assert {r["text"] for r in rows.values()} == {
        "the cat", "a dog", "the mat", "the bank", "the river, big", "small money", "run play",
        "a cat sat"}
    assert rows["c1"]["tag"] == "y" and rows["r1"]["tag"] == "v" and rows["p1"]["tag"] == "w"
    assert f"{d}/a.txt:2" in rows  # no id field in plain text: stable path:line ids


def test_bad_input_reconciles_exactly(tiny_export, tmp_path):
    d = tmp_path / "bad"
    d.mkdir()
    (d / "bytes.txt").write_bytes(b"the cat\n\xff\xfe broken\nnul\x00here\n\n   \xc2\xa0 \nthe dog\n")
    (d / "empty.txt").write_bytes(b"")
    (d / "rows.jsonl").write_text('{"text": "a mat"}\n{broken json\n[1, 2]\n{"other": 1}\n'
                                  '{"text": 5}\n{"text": ""}\n')
    (d / "rows.csv").write_text('text,tag\n"ok row",a\nonly-one-field\n"x","y","z"\n')
    (d / "huge.txt").write_text("the " * 600_000 + "\nsmall\n")  # one 2.4 MB line
    (d / "corrupt.txt.gz").write_bytes(b"not gzip at all")
    out = str(tmp_path / "out")
    manifest = run_job(out, "--input", str(d / "*"), "--model", tiny_export,
                       "--allow-incomplete-input")  # the corrupt gzip: accepted, still counted
    c = manifest["counts"]
    dead = dead_letters(out)
    rows = parquet_rows(out)
    assert c["read"] == c["embedded"] + c["skipped_empty"] + c["dead_lettered"]
    assert c["embedded"] == len(rows) == 5  # the cat, the dog, a mat, ok row, small
    # dead: 2 in bytes.txt, 4 in rows.jsonl, 2 in rows.csv, the huge line, the corrupt gzip
    assert c["skipped_empty"] == 3 and c["dead_lettered"] == 10 and c["files_incomplete"] == 1
    assert len(dead) == c["skipped_empty"] + c["dead_lettered"]
    reasons = " | ".join(sorted(x["reason"] for x in dead))
    for expected in ("not UTF-8", "NUL", "malformed JSON", "not an object",
                     "missing text field 'text'", "is int, not a string", "fields, header has",
                     "over --max-text-bytes", "the file is corrupt", "empty text"):
        assert expected in reasons, expected
    assert all(len(x["excerpt"]) <= 200 for x in dead)


def test_sentence_splitting_and_clean_up(tiny_export, tmp_path):
    corpus = write_lines(str(tmp_path / "docs.jsonl"), [
        json.dumps({"id": "doc1", "text": "The cat sat.\u00a0The  dog   ran!  Is it big?"})])
    out = str(tmp_path / "out")
    manifest = run_job(out, "--input", corpus, "--model", tiny_export, "--id_field", "id",
                       "--split", "sentences")
    rows = parquet_rows(out)
    assert [rows[k]["text"] for k in sorted(rows)] == ["The cat sat.", "The dog ran!", "Is it big?"]
    assert sorted(rows) == ["doc1#s0", "doc1#s1", "doc1#s2"]
    assert manifest["counts"]["split_records"] == 3 and manifest["counts"]["read"] == 1
