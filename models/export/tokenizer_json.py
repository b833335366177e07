"""A Hugging Face `tokenizer.json` (what current transformers and sentence-transformers save,
often without a vocab.txt): its WordPiece vocabulary and its normaliser's settings.

Only what the exported preprocessor reproduces is accepted: a WordPiece model with the `##`
continuation prefix and [UNK], after BERT's normaliser and pre-tokeniser. Anything else (another
model type, another normaliser) is refused by name: exporting it would tokenize differently.
"""

from __future__ import annotations

import dataclasses
import os

from beam_embed.models.export.checkpoint import CheckpointError, load_json

TOKENIZER_JSON = "tokenizer.json"
NORMALIZERS = ("BertNormalizer",)
PRE_TOKENIZERS = ("BertPreTokenizer",)
MAX_CHARS_PER_WORD = 100  # what the Hugging Face flavor of the preprocessor marks as [UNK]


@dataclasses.dataclass(frozen=True)
class TokenizerJson:
    vocab: list[str]  # by id
    lower_case: bool
    strip_accents: bool | None  # None: as lower_case (BertNormalizer's default)


def _kind(part, what: str, path: str, expected: tuple[str, ...]) -> str:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind not in expected:
        raise CheckpointError(
            f"{path}: its {what} is {kind!r}, which the exported BERT preprocessor does not "
            f"reproduce; expected one of {list(expected)} (or a vocab.txt beside config.json)")
    return kind


def _vocab(model: dict, path: str) -> list[str]:
    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or not vocab:
        raise CheckpointError(f"{path}: its WordPiece model has no vocab; re-download it")
    by_id = sorted(vocab.items(), key=lambda item: item[1])
    if [i for _, i in by_id] != list(range(len(by_id))):
        raise CheckpointError(f"{path}: its vocab's ids are not 0..{len(by_id) - 1} without gaps; "
                              "re-download it")
    lines = [t for t, _ in by_id]
    bad = [t for t in lines if "\n" in t or "\r" in t]
    if bad:
        raise CheckpointError(f"{path}: vocab entries {bad[:3]!r} hold a line break, which a "
                              "WordPiece vocabulary file cannot")
    return lines


def read_tokenizer_json(folder: str) -> TokenizerJson:
    """The WordPiece vocabulary and normaliser settings of `folder`'s tokenizer.json."""
    path = os.path.join(folder, TOKENIZER_JSON)
    found = load_json(path)
    model = found.get("model") if isinstance(found, dict) else None
    _kind(model, "model", path, ("WordPiece",))
    settings = {"continuing_subword_prefix": "##", "unk_token": "[UNK]",
                "max_input_chars_per_word": MAX_CHARS_PER_WORD}
    wrong = [f"{k} {model.get(k)!r} (expected {v!r})" for k, v in settings.items()
             if model.get(k, v) != v]
    if wrong:
        raise CheckpointError(f"{path}: its WordPiece model has {'; '.join(wrong)}, which the "
                              "exported BERT preprocessor does not reproduce")
    normalizer = found.get("normalizer")
    _kind(normalizer, "normalizer", path, NORMALIZERS)
    _kind(found.get("pre_tokenizer"), "pre_tokenizer", path, PRE_TOKENIZERS)
    for key in ("clean_text", "handle_chinese_chars"):
        if normalizer.get(key, True) is not True:
            raise CheckpointError(f"{path}: its normalizer has {key} false, which the exported "
                                  "BERT preprocessor does not reproduce (it always does it)")
    lower = bool(normalizer.get("lowercase", True))
    strip = normalizer.get("strip_accents")
    return TokenizerJson(
        vocab=_vocab(model, path), lower_case=lower,
        strip_accents=None if strip is None else bool(strip))


def write_vocab(vocab: list[str], folder: str) -> str:
    """`vocab` as `folder`/vocab.txt (the preprocessor saves its vocabulary as that asset)."""
    path = os.path.join(folder, "vocab.txt")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(vocab) + "\n")
    return path
