"""The whole job on the DirectRunner: every written vector equals a direct computation."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from tests.bert_reference import tiny_poolings
from tests.job_helpers import parquet_rows, run_job, tfrecord_rows, write_lines

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end

TEXTS = ["the cat sat on the mat .", "a dog", "the river bank was big and small",
         "money is money , the bank is big !", "play", "the small dog sat on a big mat ?"]


COLUMNS = {"cls": "cls", "pooled_output": "pooled_output", "mean": "mean",
           "mean@-2": "mean_layer_m2", "max@0": "max_layer_0"}


def _reference(weights, texts, max_len=64):
    """The tiny model's poolings by hand (numpy BERT), keyed by output column."""
    ref, lengths = tiny_poolings(weights, texts, max_len)
    return {COLUMNS[spec]: v for spec, v in ref.items()}, lengths


def _unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


@pytest.mark.parametrize("normalize", [False, True])
def test_every_pooling_matches_numpy(tiny_export, tiny_checkpoint, tmp_path, normalize):
    corpus = write_lines(str(tmp_path / "corpus.txt"), TEXTS)
    out = str(tmp_path / "out")
    manifest = run_job(out, "--input", corpus, "--model", tiny_export,
                       "--pooling", "cls,pooled_output,mean,mean@-2,max@0",
                       "--normalize" if normalize else "--no-normalize", "--batch_tokens", "64")
    ref, lengths = _reference(tiny_checkpoint[1], TEXTS)
    rows, examples = parquet_rows(out), tfrecord_rows(out)
    assert len(rows) == len(examples) == len(TEXTS)
    assert [p["column"] for p in manifest["poolings"]] == list(ref)
    for i, text in enumerate(TEXTS):
        rid = f"{corpus}:{i + 1}"
        assert rows[rid]["text"] == text and rows[rid]["num_tokens"] == lengths[i]
        assert rows[rid]["truncated"] is False
        for column, want in ref.items():
            want = _unit(want[i]) if normalize else want[i]
            np.testing.assert_allclose(rows[rid][column], want, atol=1e-5, err_msg=column)
            np.testing.assert_array_equal(examples[rid][column], np.float32(rows[rid][column]))


def test_truncation_is_flagged_and_chunking_averages_windows(tiny_export, tiny_checkpoint,
                                                             tmp_path):
    long_text = " ".join(["the cat sat on the mat ."] * 3)  # 21 words
    corpus = write_lines(str(tmp_path / "long.txt"), [long_text, "a dog"])
    weights = tiny_checkpoint[1]
    trunc = run_job(str(tmp_path / "t"), "--input", corpus, "--model", tiny_export,
                    "--pooling", "mean", "--max_seq_length", "10")
    rows = parquet_rows(str(tmp_path / "t"))
    row = rows[f"{corpus}:1"]
    assert row["truncated"] is True and row["num_tokens"] == 23
    assert trunc["counts"]["embedded"] == 2 and trunc["counts"]["truncated"] == 1
    np.testing.assert_allclose(row["mean"], _reference(weights, [long_text], 10)[0]["mean"][0],
                               atol=1e-5)

    run_job(str(tmp_path / "c"), "--input", corpus, "--model", tiny_export, "--pooling", "mean",
            "--max_seq_length", "10", "--long_text", "chunk")
    chunked = parquet_rows(str(tmp_path / "c"))[f"{corpus}:1"]
    words = long_text.split()
    room, stride = 8, 6  # 10 - [CLS]/[SEP]; overlap min(32, room // 4) = 2
    windows, start = [], 0
    while True:
        windows.append(" ".join(words[start:start + room]))
        if start + room >= len(words):
            break
        start += stride
    vecs, lengths = _reference(weights, windows, 10)
    expected = (vecs["mean"] * np.array(lengths)[:, None]).sum(0) / sum(lengths)
    assert chunked["truncated"] is False
    np.testing.assert_allclose(chunked["mean"], expected, atol=1e-5)


def test_minilm_job_matches_direct_tf_at_fixed_padding(minilm_export, tmp_path):
    """Per-batch packing (short shapes) gives the vectors of the plain pad-to-128 path."""
    texts = ["A man is playing a guitar.", "Stocks fell sharply on Monday after the report.",
             "Proteins fold into three-dimensional structures within milliseconds.", "Hi",
             "The quick brown fox jumps over the lazy dog, again and again and again."]
    corpus = str(tmp_path / "c.jsonl")
    write_lines(corpus, [json.dumps({"doc": f"d{i}", "body": t, "lang": "en"})
                         for i, t in enumerate(texts)])
    out = str(tmp_path / "out")
    run_job(out, "--input", corpus, "--model", minilm_export, "--text_field", "body",
            "--id_field", "doc", "--metadata_fields", "lang", "--pooling", "mean,cls",
            "--normalize")
    pre = tf.saved_model.load(os.path.join(minilm_export, "preprocessor"))
    enc = tf.saved_model.load(os.path.join(minilm_export, "encoder"))
    packed = pre(tf.constant(texts))
    seq = enc(packed)["sequence_output"].numpy()
    mask = packed["input_mask"].numpy()[..., None]
    mean = _unit((seq * mask).sum(1) / mask.sum(1))
    cls = _unit(seq[:, 0])
    rows = parquet_rows(out)
    for i in range(len(texts)):
        row = rows[f"d{i}"]
        assert row["lang"] == "en" and row["text"] == texts[i]
        np.testing.assert_allclose(row["mean"], mean[i], atol=1e-5)
        np.testing.assert_allclose(row["cls"], cls[i], atol=1e-5)


def test_multi_process_direct_runner_writes_the_same_vectors(tiny_export, tmp_path):
    corpus = write_lines(str(tmp_path / "corpus.txt"), TEXTS * 5)
    args = ["--input", corpus, "--model", tiny_export, "--pooling", "mean,cls"]
    run_job(str(tmp_path / "one"), *args)
    manifest = run_job(str(tmp_path / "two"), *args, "--direct_num_workers=2",
                       "--direct_running_mode=multi_processing", "--num_shards", "3")
    one, two = parquet_rows(str(tmp_path / "one")), parquet_rows(str(tmp_path / "two"))
    assert len(manifest["files"]["parquet"]) == 3 and len(two) == len(TEXTS) * 5
    assert manifest["files"]["parquet"][0] == "embeddings-00000-of-00003.parquet"
    assert one.keys() == two.keys()
    # Three shards batch the texts differently from one, and the encoder's float32 rounding
    # depends on the batch shape: equal to float32 precision, not bit for bit.
    for rid in one:
        np.testing.assert_allclose(two[rid]["mean"], one[rid]["mean"], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(two[rid]["cls"], one[rid]["cls"], rtol=1e-5, atol=1e-5)
