"""Exports of google-research/bert checkpoints tokenize like its tokenization.py: cased or
uncased as flagged or inferred from vocab.txt, accents stripped exactly when lower-casing."""

from __future__ import annotations

import os
import unicodedata

import pytest
import tensorflow as tf
from tokenizers import Tokenizer, normalizers, pre_tokenizers
from tokenizers.models import WordPiece

from beam_embed.models.export.convert import export_checkpoint
from beam_embed.models.export.google_checkpoint import infer_lower_case
from tests.models.google_reference import write_google_folder

CASED_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]", "The", "the", "Café",
               "café", "cafe", "Über", "über", "uber", "École", "école", "ecole", "naïve", "naive",
               "résumé", "resume", "x", "##x", "σας", "σ", "##α", "##σ", "##ς", "Σ", "##Α", "##Σ",
               "a", "##b", "b", ".", ",", "!", "'", "-", "中", "文", "##s", "s", "İ", "i"]
TEXTS = ["The café Café cafe.", "Über über École école naïve résumé!", "ÉCOLE NAÏVE RÉSUMÉ",
         "ΣΑΣ σας Σας, ΣΑΣ.", "x" * 150, "x" * 201, "中文 the文", "a\ue000b the", "the\u200bcafe",
         "tab\tthe\u3000café\u2028cafe", "İ i", "the's-cafe", "", "  "]


def _google_clean(text: str) -> str:
    """tokenization.py's _clean_text: drops NUL, U+FFFD and Cc/Cf controls (not private-use or
    unassigned characters), turns \\t \\n \\r and Zs into spaces."""
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in "\x00\ufffd" or (ch not in "\t\n\r" and cat in ("Cc", "Cf")):
            continue
        out.append(" " if ch in "\t\n\r" or cat == "Zs" else ch)
    return "".join(out)


def google_reference(vocab_file: str, lower_case: bool):
    """tokenization.py's FullTokenizer, with the tokenizers library doing the splitting and
    WordPiece: clean, Python's str.lower, NFD accent stripping, 200 characters a word."""
    tok = Tokenizer(WordPiece.from_file(vocab_file, unk_token="[UNK]",
                                        max_input_chars_per_word=200))
    tok.normalizer = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=True,
                                                strip_accents=lower_case, lowercase=False)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()

    def encode(text: str) -> list[int]:
        text = _google_clean(text)
        return tok.encode(text.lower() if lower_case else text, add_special_tokens=False).ids

    return encode


@pytest.fixture(scope="module")
def cased_folder(tmp_path_factory):
    src = str(tmp_path_factory.mktemp("cased_L-2_H-8_A-2"))
    write_google_folder(src, vocab=CASED_VOCAB, seed=4)
    return src


@pytest.mark.parametrize("flag", [None, True])
def test_export_tokenizes_like_google_reference(cased_folder, tmp_path, flag):
    """No flag: the vocabulary has upper-case entries, so the export is cased and keeps accents;
    --lower-case: lower-cased with Python's final-sigma rule and accents stripped."""
    meta = export_checkpoint(cased_folder, str(tmp_path / "export"), lower_case=flag)
    lower = bool(flag)
    assert (meta["lower_case"], meta["strip_accents"]) == (lower, lower)
    if flag is None:
        assert meta["lower_case_source"].startswith("inferred from vocab.txt")
    pre = tf.saved_model.load(str(tmp_path / "export" / "preprocessor"))
    ours = pre.tokenize(tf.constant(TEXTS)).merge_dims(1, 2).to_list()
    ref = google_reference(os.path.join(cased_folder, "vocab.txt"), lower)
    for text, got in zip(TEXTS, ours):
        assert got == ref(text), text[:40]
    index = {t: i for i, t in enumerate(CASED_VOCAB)}
    got = dict(zip(TEXTS, ours))
    assert got["x" * 150] == [index["x"]] + [index["##x"]] * 149  # Google allows 200 characters
    assert got["x" * 201] == [index["[UNK]"]]
    assert got["a\ue000b the"] == [index["[UNK]"], index["the"]]  # private use stays in the word
    if lower:  # ΣΑΣ -> σας (word-final ς), as str.lower; HF's tokenizer would give σασ
        assert got["ΣΑΣ σας Σας, ΣΑΣ."][:2] == [index["σας"], index["σας"]]
        assert got["ÉCOLE NAÏVE RÉSUMÉ"] == [index["ecole"], index["naive"], index["resume"]]
    else:
        assert got["The café Café cafe."][:3] == [index["The"], index["café"], index["Café"]]


def test_lower_case_inferred_from_vocabulary():
    uncased = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]", "the", "café", "##s",
               "ℝ", "ß", "中"]  # ℝ is an upper-case letter that lower-casing leaves alone
    assert infer_lower_case(uncased)[0] is True
    lower, why = infer_lower_case(uncased + ["The"])
    assert lower is False and "1 of 13 entries" in why and "'The'" in why
