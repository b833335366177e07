"""The exported preprocessor tokenizes exactly like the checkpoint's reference tokenizer."""

from __future__ import annotations

import os

import pytest
import tensorflow as tf
import tokenizers

from beam_embed.models.bert_preprocessor import BertPreprocessor

HARD = [
    "This is an example sentence", "Café naïve résumé Ångström déjà-vu", "北京大学 東京 한국어 中文",
    "emoji 😀👍🏽 ok 🇫🇷", "see https://example.com/a?b=c&d=e#frag and www.x.org",
    "10–20% of 3.14e-5 and 1,000,000 (±2)", "2,2-azo-isobutyronitrile", "", "   \t\n ",
    "x" * 300 + " word" * 10, "é" * 80 + " " + "a" * 101 + " " + "a" * 100,
    "NUL\x00byte ctrl\x07 here\ufffd", "ﬁne ligature ＦＵＬＬ width Ｏｎｅ",
    "İstanbul ß straße ΣΑΣ ΌΣΟΣ ς", "a\u00a0b\u200bc", "tab\there\r\nnew \u2028 line \u3000 ideo",
    "Ǆ ǅ ǆ ﬀ Ⅻ ① ㎏", "\U000e0001tag \ue000pua", "don't stop-believin' O'Neil's", "long " * 600,
]


def _preprocessor(vocab_file, lower_case):
    with open(vocab_file, encoding="utf-8") as f:
        index = {line.rstrip("\n"): i for i, line in enumerate(f)}
    special = {t: index[t] for t in ("[CLS]", "[SEP]", "[PAD]")}
    return BertPreprocessor(vocab_file, lower_case, lower_case, special)


def _ours(pre, texts):
    return pre.tokenize(tf.constant(texts)).merge_dims(1, 2).to_list()


def test_uncased_export_matches_tokenizer_json(minilm_export, minilm_checkpoint):
    ref = tokenizers.Tokenizer.from_file(os.path.join(minilm_checkpoint, "tokenizer.json"))
    ref.no_padding()
    ref.no_truncation()
    pre = tf.saved_model.load(os.path.join(minilm_export, "preprocessor"))
    expected = [ref.encode(t, add_special_tokens=False).ids for t in HARD]
    for text, got, want in zip(HARD, _ours(pre, HARD), expected):
        assert got == want, f"tokenization differs for {text[:60]!r}"


@pytest.mark.parametrize("lower_case", [False, True])
def test_cased_and_uncased_settings_match_wordpiece_reference(minilm_checkpoint, lower_case):
    vocab = os.path.join(minilm_checkpoint, "vocab.txt")
    ref = tokenizers.BertWordPieceTokenizer(vocab, lowercase=lower_case, strip_accents=lower_case)
    pre = _preprocessor(vocab, lower_case)
    texts = HARD + ["SciBERT Cased Text: BRCA1 and TP53", "ÉCOLE Über"]
    for text, got in zip(texts, _ours(pre, texts)):
        assert got == ref.encode(text, add_special_tokens=False).ids, text[:60]


def test_special_token_strings_in_text_stay_plain_text(minilm_checkpoint):
    """Documented difference: corpus text cannot inject [SEP]/[CLS] into the packed input."""
    vocab = os.path.join(minilm_checkpoint, "vocab.txt")
    pre = _preprocessor(vocab, True)
    ids = _ours(pre, ["before [SEP] after"])[0]
    assert 102 not in ids and len(ids) > 3
