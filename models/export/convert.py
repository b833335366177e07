"""A BERT-family checkpoint folder (Hugging Face, or google-research/bert) -> TF-Hub-format
SavedModels.

    OUT/encoder/        the TF-Hub BERT encoder contract (bert_encoder.py), float32
    OUT/encoder_bf16/   the same contract with bfloat16 matmuls (and OUT/encoder_fp16/, float16)
    OUT/preprocessor/   the TF-Hub BERT preprocessor contract (bert_preprocessor.py), vocab inside
    OUT/beam_embed.json name, width, layers, max length, recommended pooling, and where it all
                        came from: layout, weights, activation, lower-casing, unused variables

The weights are read with safetensors or tf.train.load_checkpoint and mapped by weight_map.py;
the graphs saved are plain TF. OUT may be any path TensorFlow's filesystems write (local, gs://).
"""

from __future__ import annotations

import json
import logging
import os

import tensorflow as tf

from beam_embed.models.bert_preprocessor import BertPreprocessor
from beam_embed.models.encoder_choices import PRECISIONS
from beam_embed.models.export.bert_encoder import LOW_PRECISIONS, BertEncoder, LowPrecisionEncoder
from beam_embed.models.export.checkpoint import Checkpoint, CheckpointError
from beam_embed.models.export.checkpoint_layout import inspect_checkpoint, open_tensors
from beam_embed.models.export.weight_map import MappedWeights, map_weights
from beam_embed.models.export_format import FORMAT_VERSION, METADATA_FILE, precision_folder

SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[PAD]", "[UNK]")
NO_POOLER = ("the checkpoint has no pooler (pooler/dense): pooled_output and default are zeros; "
             "use cls or mean pooling")


def read_weights(ckpt: Checkpoint) -> MappedWeights:
    """The checkpoint's weights in the encoder's layout, and what was left unused."""
    with open_tensors(ckpt) as tensors:
        return map_weights(tensors, ckpt.config, ckpt.activation, ckpt.weights)


def _special_ids(vocab_file: str) -> dict[str, int]:
    with open(vocab_file, encoding="utf-8") as f:
        index = {line.rstrip("\n"): i for i, line in enumerate(f)}
    missing = [t for t in SPECIAL_TOKENS if t not in index]
    if missing:
        raise CheckpointError(
            f"{vocab_file} lacks the special tokens {missing}; a BERT WordPiece vocab needs "
            f"{list(SPECIAL_TOKENS)}")
    return {t: index[t] for t in SPECIAL_TOKENS}


def metadata(ckpt: Checkpoint, mapped: MappedWeights, name: str | None = None) -> dict:
    cfg, tok = ckpt.config, ckpt.tokenizer
    return {
        "format_version": FORMAT_VERSION,
        "kind": "bert",
        "name": name or ckpt.name,
        "source": os.path.abspath(ckpt.path),
        "layout": ckpt.layout,
        "weights": os.path.abspath(ckpt.weights),
        "weights_chosen_by": ckpt.weights_note or None,
        "width": cfg["hidden_size"],
        "layers": cfg["num_hidden_layers"],
        "heads": cfg["num_attention_heads"],
        "vocab_size": ckpt.vocab_size,
        "max_seq_length": ckpt.max_seq_length,
        "max_position_embeddings": cfg["max_position_embeddings"],
        "lower_case": tok.lower_case,
        "lower_case_source": tok.lower_case_source,
        "strip_accents": tok.strip_accents,
        "tokenizer": tok.flavor,
        "hidden_act": cfg.get("hidden_act", "gelu"),
        "activation": ckpt.activation,
        "activation_note": ckpt.activation_note,
        "precisions": list(PRECISIONS),
        "encoders": {p: "encoder" if p == "fp32" else precision_folder("encoder", p)
                     for p in PRECISIONS},
        "pooling": ckpt.pooling,
        "normalize": ckpt.normalize,
        "has_pooler": mapped.has_pooler,
        "warnings": [] if mapped.has_pooler else [NO_POOLER],
        "unused_variables": list(mapped.unused),
    }


def export_checkpoint(src_dir: str, out_dir: str, name: str | None = None, *,
                      checkpoint: str | None = None, lower_case: bool | None = None) -> dict:
    """Exports `src_dir` to `out_dir`; returns the metadata written beside the SavedModels.
    `checkpoint`: an explicit TF checkpoint prefix (google-research/bert layout); `lower_case`:
    overrides what the folder says or implies."""
    ckpt = inspect_checkpoint(src_dir, checkpoint=checkpoint, lower_case=lower_case)
    tok = ckpt.tokenizer
    special = _special_ids(tok.vocab_file)
    mapped = read_weights(ckpt)
    if not mapped.has_pooler:
        logging.warning("%s: %s", src_dir, NO_POOLER)
    encoder = BertEncoder(mapped.weights)
    preprocessor = BertPreprocessor(
        tok.vocab_file, tok.lower_case, tok.strip_accents, special, tok.flavor)
    preprocessor.concrete_functions()  # trace the 1- and 2-segment packers so they are saved
    tf.io.gfile.makedirs(out_dir)
    encoder_dir = os.path.join(out_dir, "encoder")
    tf.saved_model.save(encoder, encoder_dir, signatures={"serving_default": encoder.serving})
    for precision in LOW_PRECISIONS:
        low = LowPrecisionEncoder(encoder, precision)
        tf.saved_model.save(low, precision_folder(encoder_dir, precision),
                            signatures={"serving_default": low.serving})
    tf.saved_model.save(preprocessor, os.path.join(out_dir, "preprocessor"),
                        signatures={"serving_default": preprocessor.__call__})
    meta = metadata(ckpt, mapped, name)
    with tf.io.gfile.GFile(os.path.join(out_dir, METADATA_FILE), "w") as f:
        json.dump(meta, f, indent=2)
    return meta
