"""What `export-model` knows about a source checkpoint, whichever layout it came in.

Two layouts are recognized (checkpoint_layout.py): a Hugging Face folder (hf_checkpoint.py) and a
google-research/bert TF checkpoint folder (google_checkpoint.py). Everything that can be wrong
with the folder is found when it is inspected and reported in one line naming the problem and
the fix, so the exporter itself can assume a well-formed checkpoint.
"""

from __future__ import annotations

import dataclasses
import json
import os

# The layouts, named after the tokenizer flavors they follow (GOOGLE re-exported for them).
from beam_embed.models.bert_preprocessor import GOOGLE as GOOGLE
from beam_embed.models.bert_preprocessor import HUGGING_FACE

MAX_NAMES_SHOWN = 12  # folder listings and variable names quoted in error messages
REQUIRED_CONFIG = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                   "intermediate_size", "max_position_embeddings")


class CheckpointError(ValueError):
    """A checkpoint folder that cannot be exported; the message says what to do."""


@dataclasses.dataclass(frozen=True)
class TokenizerSettings:
    vocab_file: str
    lower_case: bool
    strip_accents: bool
    tokenize_chinese_chars: bool
    model_max_length: int | None
    lower_case_source: str = "tokenizer_config.json"  # how lower_case was decided
    flavor: str = HUGGING_FACE  # whose tokenizer to follow (bert_preprocessor.FLAVORS)
    # the vocabulary by id when `vocab_file` is not a vocab.txt (tokenizer.json): the export
    # writes it as one
    vocab_entries: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    path: str
    name: str
    layout: str  # HUGGING_FACE or GOOGLE
    config: dict  # BERT hyper-parameters under Hugging Face's config.json names
    weights: str  # the weights file, or the TF checkpoint prefix, that is read
    activation: str  # beam_embed.models.export.bert_encoder.ACTIVATIONS key the config's hidden_act means
    activation_note: str  # why that activation
    tokenizer: TokenizerSettings
    vocab_size: int
    pooling: str  # the model's recommended pooling, e.g. "mean" or "cls"
    normalize: bool
    max_seq_length: int  # what the model was trained/tuned for
    weights_note: str = ""  # how the weights were chosen, when there was a choice
    dense: tuple = ()  # sentence-transformers Dense layers after pooling (st_modules.Dense)
    include_prompt: bool = True  # sentence-transformers' Pooling include_prompt
    modules: tuple[str, ...] = ()  # sentence-transformers module types, in order
    prompts: tuple[tuple[str, str], ...] = ()  # sentence-transformers' prompts, name -> text
    default_prompt_name: str | None = None  # the one its encode() applies when given none


def load_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path} is not valid JSON ({e}); re-download the checkpoint") from e


def load_config(path: str, config_name: str) -> dict:
    """The model config, with every hyper-parameter the export needs."""
    config = load_json(os.path.join(path, config_name))
    missing = [k for k in REQUIRED_CONFIG if not isinstance(config.get(k), int)]
    if missing:
        raise CheckpointError(
            f"{path}: {config_name} lacks integer {missing}; a BERT config needs "
            f"{list(REQUIRED_CONFIG)}")
    return config


def read_vocab(vocab_file: str) -> list[str]:
    with open(vocab_file, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def check_vocab(path: str, config: dict, config_name: str) -> tuple[str, list[str]]:
    """The folder's vocab.txt and its entries, checked against the config's vocab_size."""
    vocab_file = os.path.join(path, "vocab.txt")
    if not os.path.exists(vocab_file):
        raise CheckpointError(
            f"{path} has no vocab.txt; the WordPiece vocabulary must sit beside {config_name}")
    vocab = read_vocab(vocab_file)
    if len(vocab) != config["vocab_size"]:
        raise CheckpointError(
            f"{path}: vocab.txt has {len(vocab)} entries but {config_name}'s vocab_size is "
            f"{config['vocab_size']}; the vocabulary does not belong to these weights")
    return vocab_file, vocab


def activation_of(path: str, config_name: str, hidden_act, meanings: dict[str, str]) -> str:
    """Our activation for the config's hidden_act, under the layout's own meaning of the name."""
    if hidden_act not in meanings:
        raise CheckpointError(
            f"{path}: {config_name}'s hidden_act {hidden_act!r} is not supported; expected one "
            f"of {sorted(meanings)}")
    return meanings[hidden_act]


def some(names, limit: int = MAX_NAMES_SHOWN) -> str:
    """A short, one-line rendering of a possibly long list of names."""
    names = sorted(names)
    shown = ", ".join(names[:limit]) or "nothing"
    return shown + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")
