"""`beam-embed similarity` against a direct computation with the exported MiniLM."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from beam_embed.pipeline.inspect.similarity import main

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end

SENTENCE = "The man in prison watched the animal from his cell. The cell was small."


def test_word_in_context_matrix_matches_direct_computation(minilm_export, capsys):
    code = main([SENTENCE, "--words", "cell", "prison", "animal", "unicorn", "--model",
                 minilm_export, "--layer", "-2", "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)["all-MiniLM-L6-v2"]
    assert report["words"] == ["cell#1", "cell#2", "prison", "animal"]
    assert any("'unicorn' does not occur" in n for n in report["notes"])

    pre = tf.saved_model.load(os.path.join(minilm_export, "preprocessor"))
    enc = tf.saved_model.load(os.path.join(minilm_export, "encoder"))
    tokens = pre.tokenize(tf.constant([SENTENCE]))
    packed = pre.bert_pack_inputs([tokens], seq_length=64)
    layer = enc(packed)["encoder_outputs"][-2].numpy()[0]
    words = tokens.to_list()[0]
    position, vectors = 1, []
    for piece_ids in words:  # the mean of each word's pieces, [CLS] at position 0
        vectors.append(layer[position:position + len(piece_ids)].mean(0))
        position += len(piece_ids)
    text_words = ["the", "man", "in", "prison", "watched", "the", "animal", "from", "his", "cell",
                  ".", "the", "cell", "was", "small", "."]
    pick = [9, 12, 3, 6]
    chosen = np.stack([vectors[i] for i in pick])
    assert [text_words[i] for i in pick] == ["cell", "cell", "prison", "animal"]
    unit = chosen / np.linalg.norm(chosen, axis=1, keepdims=True)
    np.testing.assert_allclose(report["similarity"], unit @ unit.T, atol=1e-5)


def test_two_models_side_by_side(minilm_export, tiny_export, capsys):
    assert main(["the cat sat on the mat", "--words", "cat", "mat", "--model", minilm_export,
                 "--model", tiny_export]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert "all-MiniLM-L6-v2" in first and "tiny-bert" in first


def test_words_with_control_characters_are_shown_not_obeyed(tiny_export, capsys):
    word = "cat\x1b[2J"
    assert main([f"the {word} sat on the mat", "--words", word, "mat",
                "--model", tiny_export]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "cat\\x1b[2J" in out
