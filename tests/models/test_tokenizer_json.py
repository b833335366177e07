"""export-model reads a folder that carries tokenizer.json and no vocab.txt (what current
transformers / sentence-transformers save): the WordPiece vocabulary and the normaliser's
lower-casing and accent stripping, checked against the `tokenizers` library's own encoding of
the same file; what the preprocessor cannot reproduce is refused by name."""

from __future__ import annotations

import json
import os

import pytest
import tensorflow as tf
from tokenizers import Tokenizer
from tokenizers.implementations import BertWordPieceTokenizer

from beam_embed.models.export.checkpoint import CheckpointError
from beam_embed.models.export.convert import export_checkpoint
from tests.bert_reference import TINY_VOCAB, write_checkpoint

TEXTS = ["The cats sat.", "Café CAFÉ café!", "a Dog, x é", "x" * 120, "猫 the  Bank\tis big"]
VOCAB = TINY_VOCAB + ["Café", "Dog", "Bank", "猫", "cafe", "CAFE", "The"]


def _folder(tmp_path, name: str, **settings) -> str:
    """A tiny checkpoint whose tokenizer is only a tokenizer.json the tokenizers library wrote."""
    folder = str(tmp_path / name)
    write_checkpoint(folder, vocab=VOCAB)
    os.remove(os.path.join(folder, "vocab.txt"))
    os.remove(os.path.join(folder, "tokenizer_config.json"))
    tokenizer = BertWordPieceTokenizer({t: i for i, t in enumerate(VOCAB)}, **settings)
    tokenizer.save(os.path.join(folder, "tokenizer.json"))
    return folder


def _pieces(export: str, texts: list[str]) -> list[list[int]]:
    pre = tf.saved_model.load(os.path.join(export, "preprocessor"))
    return [[p for word in row for p in word] for row in pre.tokenize(tf.constant(texts)).to_list()]


@pytest.mark.parametrize("settings", [{"lowercase": True},
                                      {"lowercase": False, "strip_accents": True},
                                      {"lowercase": False}],
                         ids=["uncased", "cased-stripped", "cased"])
def test_the_vocabulary_and_normaliser_come_from_tokenizer_json(tmp_path, settings):
    folder = _folder(tmp_path, "ckpt", **settings)
    export = str(tmp_path / "export")
    meta = export_checkpoint(folder, export)
    reference = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    expected = [reference.encode(t, add_special_tokens=False).ids for t in TEXTS]
    assert _pieces(export, TEXTS) == expected
    assert meta["lower_case"] == settings["lowercase"]
    assert meta["strip_accents"] == settings.get("strip_accents", settings["lowercase"])
    assert meta["vocabulary_from"] == "tokenizer.json"
    with open(os.path.join(export, "preprocessor", "assets", "vocab.txt"), encoding="utf-8") as f:
        assert f.read().splitlines() == VOCAB
    assert len({tuple(e) for e in expected}) == len(TEXTS)  # the texts tell the settings apart


def _edited(tmp_path, edit) -> str:
    folder = _folder(tmp_path, "edited")
    path = os.path.join(folder, "tokenizer.json")
    with open(path, encoding="utf-8") as f:
        found = json.load(f)
    edit(found)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(found, f)
    return folder


@pytest.mark.parametrize("edit, message", [
    (lambda t: t["model"].update(type="BPE"), "its model is 'BPE'"),
    (lambda t: t.update(normalizer={"type": "NFKC"}), "its normalizer is 'NFKC'"),
    (lambda t: t.update(pre_tokenizer={"type": "Metaspace"}), "its pre_tokenizer is 'Metaspace'"),
    (lambda t: t["model"].update(continuing_subword_prefix="@@"),
     "continuing_subword_prefix '@@' (expected '##')"),
    (lambda t: t["normalizer"].update(handle_chinese_chars=False), "handle_chinese_chars false"),
    (lambda t: t["model"]["vocab"].pop("The"), "has 36 vocabulary entries but config.json's "
                                             "vocab_size is 37"),
])
def test_what_the_preprocessor_cannot_reproduce_is_refused(tmp_path, edit, message):
    folder = _edited(tmp_path, edit)
    with pytest.raises(CheckpointError, match="tokenizer.json") as e:
        export_checkpoint(folder, str(tmp_path / "never"))
    assert message in str(e.value)
    assert not os.path.exists(tmp_path / "never")
