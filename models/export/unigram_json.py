"""An XLM-RoBERTa `tokenizer.json` (a folder saved without `sentencepiece.bpe.model`) rebuilt
into the SentencePiece model it was converted from, so the export runs SentencePiece in its graph
as it does for the model file.

transformers' converter writes: a Unigram model over fairseq's ids (`<s>`, `<pad>`, `</s>`,
`<unk>`, the SentencePiece pieces from the model's id 3 on with their scores, `<mask>`); the
model's precompiled normaliser (`Precompiled`), then ` {2,}` -> " " (`Replace`); a `Metaspace`
pre-tokeniser ("▁" prepended, spaces escaped). Those are exactly a SentencePiece unigram model
with that character map and its default whitespace handling, which is what is written. Anything
else is refused by name: exporting it would tokenize differently. One difference stays, as
between transformers' own slow and fast XLM-R tokenizers: a text that ends in whitespace gets no
final lone "▁" piece here (SentencePiece drops trailing whitespace; the fast tokenizer keeps a
"▁" for it).
"""

from __future__ import annotations

import base64
import binascii
import os

from beam_embed.models.export.checkpoint import CheckpointError, load_json
from beam_embed.models.export.sentencepiece_model import (
    FAIRSEQ_SPECIALS,
    MASK,
    NORMAL,
    SP_SPECIALS,
    WORD_START,
    Piece,
    write_unigram_model,
)
from beam_embed.models.export.tokenizer_json import TOKENIZER_JSON

_COLLAPSE = {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}


def _refuse(path: str, what: str) -> CheckpointError:
    return CheckpointError(
        f"{path}: {what}, which the SentencePiece model the export runs does not reproduce; "
        "put the model's sentencepiece.bpe.model beside config.json")


def _charsmap(normalizer, path: str) -> bytes:
    parts = normalizer.get("normalizers") if isinstance(normalizer, dict) and \
        normalizer.get("type") == "Sequence" else [normalizer]
    kinds = [p.get("type") if isinstance(p, dict) else None for p in parts or []]
    if not kinds or kinds[0] != "Precompiled" or parts[1:] not in ([], [_COLLAPSE]):
        raise _refuse(path, f"its normalizer is {kinds or normalizer!r} (expected Precompiled, "
                            "then a Replace of ' {2,}' with ' ')")
    try:
        return base64.b64decode(parts[0].get("precompiled_charsmap") or "", validate=True)
    except (binascii.Error, TypeError) as e:
        raise _refuse(path, f"its precompiled_charsmap is not base64 ({e})") from e


def _check_metaspace(pre, path: str) -> None:
    ok = (isinstance(pre, dict) and pre.get("type") == "Metaspace"
          and pre.get("replacement", WORD_START) == WORD_START
          and pre.get("split", True) is True
          and pre.get("prepend_scheme", "always" if pre.get("add_prefix_space", True)
                      else "never") == "always")
    if not ok:
        raise _refuse(path, f"its pre_tokenizer is {pre!r} (expected Metaspace with '▁' "
                            "prepended always)")


def sentencepiece_from_tokenizer_json(folder: str) -> bytes:
    """The SentencePiece model (ModelProto bytes) `folder`'s tokenizer.json was converted
    from."""
    path = os.path.join(folder, TOKENIZER_JSON)
    found = load_json(path)
    model = found.get("model") if isinstance(found, dict) else None
    if not isinstance(model, dict) or model.get("type") != "Unigram":
        kind = model.get("type") if isinstance(model, dict) else None
        raise _refuse(path, f"its model is {kind!r} (expected Unigram)")
    if model.get("byte_fallback"):
        raise _refuse(path, "its Unigram model falls back to bytes")
    vocab = model.get("vocab")
    if not isinstance(vocab, list) or not all(
            isinstance(v, list) and len(v) == 2 and isinstance(v[0], str)
            and isinstance(v[1], (int, float)) for v in vocab):
        raise _refuse(path, "its vocab is not a list of [piece, score]")
    pieces = [v[0] for v in vocab]
    if tuple(pieces[:4]) != FAIRSEQ_SPECIALS or pieces[-1:] != [MASK] or model.get("unk_id") != 3:
        raise _refuse(path, f"its vocab starts {pieces[:4]} and ends {pieces[-1:]} with unk_id "
                            f"{model.get('unk_id')!r} (expected XLM-R's {list(FAIRSEQ_SPECIALS)}"
                            f", <mask> last, unk_id 3)")
    charsmap = _charsmap(found.get("normalizer"), path)
    _check_metaspace(found.get("pre_tokenizer"), path)
    specials = [Piece(p, 0.0, t) for t, p in SP_SPECIALS]
    return write_unigram_model(
        specials + [Piece(p, float(s), NORMAL) for p, s in vocab[4:-1]], charsmap)
