"""Inspect a local Hugging Face BERT-family checkpoint folder before anything is converted.

Everything that can be wrong with the folder is found here and reported in one line naming the
problem and the fix, so the exporter itself can assume a well-formed checkpoint.
"""

from __future__ import annotations

import dataclasses
import json
import os

SUPPORTED_MODEL_TYPES = ("bert",)
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


class CheckpointError(ValueError):
    """A checkpoint folder that cannot be exported; the message says what to do."""


@dataclasses.dataclass(frozen=True)
class TokenizerSettings:
    vocab_file: str
    lower_case: bool
    strip_accents: bool
    tokenize_chinese_chars: bool
    model_max_length: int | None


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    path: str
    name: str
    config: dict
    weights_file: str
    tokenizer: TokenizerSettings
    vocab_size: int
    pooling: str  # the model's recommended pooling, e.g. "mean" or "cls"
    normalize: bool
    max_seq_length: int  # what the model was trained/tuned for (sentence-transformers' setting)


def _load_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path} is not valid JSON ({e}); re-download the checkpoint") from e


def _count_vocab(vocab_file: str) -> int:
    with open(vocab_file, encoding="utf-8") as f:
        return sum(1 for _ in f)


def _sentence_transformers_pooling(path: str) -> tuple[str, bool, int | None]:
    """Reads sentence-transformers' modules.json and 1_Pooling/config.json when present."""
    pooling, normalize, max_len = "cls", False, None
    modules_file = os.path.join(path, "modules.json")
    pooling_file = os.path.join(path, "1_Pooling", "config.json")
    if os.path.exists(modules_file):
        modules = _load_json(modules_file)
        normalize = any("Normalize" in m.get("type", "") for m in modules)
        pooling = "mean"  # sentence-transformers' own default when no pooling config says else
    if os.path.exists(pooling_file):
        cfg = _load_json(pooling_file)
        if cfg.get("pooling_mode_cls_token"):
            pooling = "cls"
        elif cfg.get("pooling_mode_mean_tokens"):
            pooling = "mean"
        elif cfg.get("pooling_mode_max_tokens"):
            pooling = "max"
    st_file = os.path.join(path, "sentence_bert_config.json")
    if os.path.exists(st_file):
        max_len = _load_json(st_file).get("max_seq_length")
    return pooling, normalize, max_len


def _weights_file(path: str) -> str:
    for name in WEIGHT_FILES:
        if os.path.exists(os.path.join(path, name)):
            return name
    raise CheckpointError(
        f"no weights in {path}: expected one of {list(WEIGHT_FILES)}; "
        "download the checkpoint's weight file into that folder"
    )


def inspect_checkpoint(path: str) -> Checkpoint:
    """Validates a checkpoint folder and returns what the exporter needs to know about it."""
    if not os.path.isdir(path):
        raise CheckpointError(f"checkpoint folder {path!r} does not exist or is not a folder")
    config_file = os.path.join(path, "config.json")
    if not os.path.exists(config_file):
        raise CheckpointError(
            f"{path} has no config.json; point export-model at the folder holding the "
            "Hugging Face checkpoint (config.json, weights, vocab.txt)"
        )
    config = _load_json(config_file)
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise CheckpointError(
            f"{path}: model_type {model_type!r} is not a BERT-family architecture; "
            f"expected one of {list(SUPPORTED_MODEL_TYPES)}"
        )
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise CheckpointError(
            f"{path}: position_embedding_type {config['position_embedding_type']!r} is not "
            "supported; expected 'absolute'"
        )
    weights = _weights_file(path)
    vocab_file = os.path.join(path, "vocab.txt")
    if not os.path.exists(vocab_file):
        raise CheckpointError(
            f"{path} has no vocab.txt; the WordPiece vocabulary must sit beside config.json"
        )
    vocab_size = _count_vocab(vocab_file)
    if vocab_size != config["vocab_size"]:
        raise CheckpointError(
            f"{path}: vocab.txt has {vocab_size} entries but config.json's vocab_size is "
            f"{config['vocab_size']}; the vocabulary does not belong to these weights"
        )
    tok_cfg_file = os.path.join(path, "tokenizer_config.json")
    tok_cfg = _load_json(tok_cfg_file) if os.path.exists(tok_cfg_file) else {}
    lower = bool(tok_cfg.get("do_lower_case", True))
    strip = tok_cfg.get("strip_accents")
    model_max = tok_cfg.get("model_max_length")
    if not isinstance(model_max, int) or model_max > 100_000:  # HF writes 1e30 for "unset"
        model_max = None
    tokenizer = TokenizerSettings(
        vocab_file=vocab_file,
        lower_case=lower,
        strip_accents=lower if strip is None else bool(strip),
        tokenize_chinese_chars=bool(tok_cfg.get("tokenize_chinese_chars", True)),
        model_max_length=model_max,
    )
    pooling, normalize, st_max = _sentence_transformers_pooling(path)
    max_positions = int(config["max_position_embeddings"])
    max_len = min(x for x in (st_max, model_max, max_positions) if x)
    name = config.get("_name_or_path") or os.path.basename(os.path.normpath(path))
    return Checkpoint(
        path=path,
        name=os.path.basename(str(name).rstrip("/")) or "bert",
        config=config,
        weights_file=weights,
        tokenizer=tokenizer,
        vocab_size=vocab_size,
        pooling=pooling,
        normalize=normalize,
        max_seq_length=max_len,
    )
