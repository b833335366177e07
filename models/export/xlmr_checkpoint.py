"""What an XLM-RoBERTa Hugging Face folder adds to a BERT one: its SentencePiece tokenizer and
its positions.

The weights have BERT's names and layout (hf_checkpoint.py reads them); the differences are the
tokenizer (a SentencePiece model with fairseq's ids: sentencepiece_model.py; from tokenizer.json
when the folder has no model file: unigram_json.py) and the position
table, whose first `padding_idx + 1` rows are never used (XLM-R counts positions from
`padding_idx + 1`): the export drops them, so its positions count from 0 as BERT's do.
"""

from __future__ import annotations

import os

from beam_embed.models.export.checkpoint import CheckpointError, TokenizerSettings
from beam_embed.models.export.sentencepiece_model import (
    SENTENCEPIECE_MODEL,
    read_pieces,
    xlmr_vocabulary,
)
from beam_embed.models.export.tokenizer_json import TOKENIZER_JSON
from beam_embed.models.export.unigram_json import sentencepiece_from_tokenizer_json

XLM_ROBERTA = "xlm-roberta"
SENTENCEPIECE = "sentencepiece"  # the tokenizer flavor of an XLM-R export
NORMALISER_NOTE = "the SentencePiece model's own normaliser (no lower-casing, no accent stripping)"


def position_offset(config: dict) -> int:
    """How many rows of the position table come before the first position used."""
    if config.get("model_type") != XLM_ROBERTA:
        return 0
    return int(config.get("pad_token_id", 1)) + 1


def model_proto(path: str) -> tuple[str, bytes]:
    """(the file it came from, the SentencePiece model's bytes): `sentencepiece.bpe.model`, else
    the one `tokenizer.json`'s Unigram model was converted from."""
    model_file = os.path.join(path, SENTENCEPIECE_MODEL)
    if os.path.exists(model_file):
        with open(model_file, "rb") as f:
            return model_file, f.read()
    if os.path.exists(os.path.join(path, TOKENIZER_JSON)):
        return os.path.join(path, TOKENIZER_JSON), sentencepiece_from_tokenizer_json(path)
    raise CheckpointError(
        f"{path} has neither {SENTENCEPIECE_MODEL} nor {TOKENIZER_JSON}; an XLM-RoBERTa export "
        f"runs the model's SentencePiece tokenizer: download {SENTENCEPIECE_MODEL} from the "
        "model's repository into that folder")


def xlmr_tokenizer(path: str, config: dict, model_max: int | None) -> TokenizerSettings:
    """The folder's SentencePiece model as the export's tokenizer, checked against the config."""
    source, proto = model_proto(path)
    vocab = xlmr_vocabulary(read_pieces(proto, source), source)
    if len(vocab) != config["vocab_size"]:
        raise CheckpointError(
            f"{path}: {os.path.basename(source)} gives {len(vocab)} XLM-R ids (its pieces, "
            f"fairseq's specials and <mask>) but config.json's vocab_size is "
            f"{config['vocab_size']}; the tokenizer does not belong to these weights")
    return TokenizerSettings(
        vocab_file=source, lower_case=False, strip_accents=False,
        tokenize_chinese_chars=False, model_max_length=model_max,
        lower_case_source=NORMALISER_NOTE, flavor=SENTENCEPIECE, vocab_entries=tuple(vocab))
