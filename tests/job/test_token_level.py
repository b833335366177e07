"""--granularity token: words and pieces with offsets into the original text, and their vectors."""

from __future__ import annotations

import os

import numpy as np
import pyarrow.parquet as pq
import pytest
import tensorflow as tf
import tokenizers

from tests.job_helpers import parquet_rows, run_job, tfrecord_rows, write_lines

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end

TEXTS = ["The man in prison watched the animal from his cell.",
         "Café naïve résumé, über-cool!? (Ångström)",
         "北京大学的研究 and 東京: 10–20% of 2,2-azo-isobutyronitrile..."]


def _direct_pieces(minilm_export, minilm_checkpoint, text, layer=-2):
    """Piece vectors straight from the SavedModels, grouped into words by the reference
    tokenizer's own word ids."""
    ref = tokenizers.Tokenizer.from_file(os.path.join(minilm_checkpoint, "tokenizer.json"))
    ref.no_padding()
    enc_ref = ref.encode(text)
    pre = tf.saved_model.load(os.path.join(minilm_export, "preprocessor"))
    enc = tf.saved_model.load(os.path.join(minilm_export, "encoder"))
    packed = pre.bert_pack_inputs([pre.tokenize(tf.constant([text]))], seq_length=len(enc_ref.ids))
    assert packed["input_word_ids"].numpy()[0].tolist() == enc_ref.ids
    vectors = enc(packed)["encoder_outputs"][layer].numpy()[0]
    return enc_ref, vectors


def test_word_vectors_are_the_mean_of_their_pieces(minilm_export, minilm_checkpoint, tmp_path):
    corpus = write_lines(str(tmp_path / "c.txt"), TEXTS)
    out = str(tmp_path / "out")
    manifest = run_job(out, "--input", corpus, "--model", minilm_export, "--granularity", "token",
                       "--token-layer", "-2")
    assert manifest["granularity"] == "token" and manifest["tokens"]["width"] == 384
    rows, examples = parquet_rows(out), tfrecord_rows(out)
    for i, text in enumerate(TEXTS):
        row = rows[f"{corpus}:{i + 1}"]
        enc_ref, pieces = _direct_pieces(minilm_export, minilm_checkpoint, text)
        word_ids = np.array([-1 if w is None else w for w in enc_ref.word_ids])
        n_words = word_ids.max() + 1
        spans = [(min(s for (s, _), w in zip(enc_ref.offsets, word_ids) if w == k),
                  max(e for (_, e), w in zip(enc_ref.offsets, word_ids) if w == k))
                 for k in range(n_words)]
        assert list(zip(row["token_start"], row["token_end"])) == spans
        assert row["tokens"] == [text[s:e] for s, e in spans]
        expected = np.stack([pieces[word_ids == w].mean(0) for w in range(n_words)])
        np.testing.assert_allclose(np.array(row["vectors"]), expected, atol=1e-5)
        example = examples[row["id"]]
        np.testing.assert_allclose(example["vectors"].reshape(-1, 384), expected, atol=1e-5)


def test_wordpiece_offsets_and_float16(minilm_export, minilm_checkpoint, tmp_path):
    corpus = write_lines(str(tmp_path / "c.txt"), TEXTS)
    out = str(tmp_path / "out")
    run_job(out, "--input", corpus, "--model", minilm_export, "--granularity", "token",
            "--token-unit", "wordpiece", "--token-layer", "-1", "--token-dtype", "float16",
            "--format", "parquet")
    table = pq.read_table(os.path.join(out, "embeddings-00000-of-00001.parquet"))
    assert str(table.schema.field("vectors").type) == "list<item: fixed_size_list<item: halffloat>[384]>"
    rows = parquet_rows(out)
    for i, text in enumerate(TEXTS):
        row = rows[f"{corpus}:{i + 1}"]
        enc_ref, pieces = _direct_pieces(minilm_export, minilm_checkpoint, text, layer=-1)
        assert row["tokens"] == enc_ref.tokens[1:-1]
        assert list(zip(row["token_start"], row["token_end"])) == enc_ref.offsets[1:-1]
        np.testing.assert_allclose(np.array(row["vectors"], np.float32), pieces[1:-1],
                                   atol=2e-3, rtol=2e-3)


def test_elmo_token_vectors_are_the_modules_outputs(tmp_path):
    from tests.elmo_fixture import build_tiny_elmo

    module_path = str(tmp_path / "elmo")
    build_tiny_elmo(module_path, seed=4)
    text = "Ça va? The cell (in prison) — yes."
    corpus = write_lines(str(tmp_path / "c.txt"), [text])
    out = str(tmp_path / "out")
    run_job(out, "--input", corpus, "--encoder", module_path, "--granularity", "token",
            "--token-layer", "lstm_outputs2")
    row = next(iter(parquet_rows(out).values()))
    assert row["tokens"] == ["Ça", "va", "?", "The", "cell", "(", "in", "prison", ")", "—", "yes",
                             "."]
    assert [text[s:e] for s, e in zip(row["token_start"], row["token_end"])] == row["tokens"]
    module = tf.saved_model.load(module_path, tags=[])
    raw = module.signatures["tokens"](tokens=tf.constant([row["tokens"]]),
                                      sequence_len=tf.constant([len(row["tokens"])]))
    np.testing.assert_allclose(np.array(row["vectors"]), raw["lstm_outputs2"].numpy()[0],
                               atol=1e-5)
