"""`beam-embed tokens`: pieces against Hugging Face `tokenizers`, vocabulary numbers by sets."""

from __future__ import annotations

import json
import os

import pytest
from tokenizers import BertWordPieceTokenizer

from beam_embed.pipeline.cli import main as cli
from tests.bert_reference import TINY_VOCAB

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end

TEXT = "The BRCA1 p.V600E mutation, in 1999: cats sat!"


def _vocab(export: str) -> list[str]:
    with open(os.path.join(export, "preprocessor", "assets", "vocab.txt"), encoding="utf-8") as f:
        return f.read().splitlines()


def test_side_by_side_pieces_and_vocabulary_numbers(tiny_export, minilm_export,
                                                    minilm_checkpoint, capsys):
    assert cli(["tokens", TEXT, "a dog", "--model", tiny_export, "--model", minilm_export,
                "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    first = report["texts"][0]
    hf = BertWordPieceTokenizer(os.path.join(minilm_checkpoint, "vocab.txt"), lowercase=True)
    want = hf.encode(TEXT, add_special_tokens=False)
    got = first["words"][minilm_export]
    assert [p for word in got for p in word] == want.tokens
    assert len(got) == len(set(want.word_ids))
    spans = {}  # word -> (first offset, last offset) in the text, from Hugging Face
    for word, (start, end) in zip(want.word_ids, want.offsets):
        spans[word] = (spans.get(word, (start, end))[0], end)
    assert first["labels"] == [TEXT[a:b] for a, b in spans.values()]  # words as written
    assert first["words"][tiny_export][-3:] == [["cat", "##s"], ["sat"], ["!"]]
    stats = first["stats"][tiny_export]
    assert stats["unknown"] == sum(p == "[UNK]" for w in first["words"][tiny_export] for p in w)
    assert stats["pieces_per_word"] == pytest.approx(stats["pieces"] / stats["words"])
    assert report["texts"][1]["words"][minilm_export] == [["a"], ["dog"]]

    tiny, minilm = set(TINY_VOCAB), set(_vocab(minilm_export))
    models = report["vocabulary"]["models"]
    assert models[minilm_export]["size"] == len(minilm) == 30522
    assert models[minilm_export]["with_digits"] == pytest.approx(
        sum(any(c.isdigit() for c in t) for t in minilm) / len(minilm))
    assert models[tiny_export]["continuations"] == pytest.approx(2 / len(tiny))
    (overlap,) = report["vocabulary"]["overlap"]
    assert overlap["models"] == [tiny_export, minilm_export]
    assert overlap["shared"] == len(tiny & minilm)
    assert overlap["share_of_second"] == pytest.approx(len(tiny & minilm) / len(minilm))


def test_table_output_shows_the_words_as_written(tiny_export, capsys):
    assert cli(["tokens", "The cats sat!", "--model", tiny_export]) == 0
    out = capsys.readouterr().out
    assert out.startswith("text: The cats sat!\nword  " + tiny_export)
    rows = out.split("\n\n")[0].splitlines()[3:]
    assert [r.split()[0] for r in rows] == ["The", "cats", "sat", "!"]
    assert rows[1].split()[1:] == ["cat", "##s"]
    assert "vocabulary" in out and "overlap" not in out


def test_bad_models_fail_with_clear_errors(capsys):
    assert cli(["tokens", "x", "--model", "no-such-model"]) == 2
    assert "unknown model 'no-such-model'; expected a preset" in capsys.readouterr().err
    assert cli(["tokens", "x", "--model", "elmo"]) == 2
    assert "model 'elmo' (elmo): elmo encoders have no WordPiece vocabulary" in \
        capsys.readouterr().err


def test_control_characters_in_the_text_are_shown_not_obeyed(tiny_export, capsys):
    # ESC starts a terminal's colour and window-title sequences; U+202E reverses the line.
    text = "cats \x1b]0;owned\x07sat \u202eand\x1b[31m ran"
    assert cli(["tokens", text, "--model", tiny_export]) == 0
    out = capsys.readouterr().out
    assert not any(c in out for c in "\x1b\x07\u202e")
    assert "text: cats \\x1b]0;owned\\x07sat \\u202eand\\x1b[31m ran" in out
    assert cli(["tokens", text, "--model", tiny_export, "--json"]) == 0
    out = capsys.readouterr().out
    assert "\u202e" not in out and json.loads(out)["texts"][0]["text"] == text
