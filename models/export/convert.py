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

import io
import json
import logging
import os
import subprocess
import sys
import tempfile

import numpy as np
import tensorflow as tf

from beam_embed.models.bert_preprocessor import BertPreprocessor
from beam_embed.models.encoder_choices import PRECISIONS
from beam_embed.models.export.bert_encoder import LOW_PRECISIONS, BertEncoder, LowPrecisionEncoder
from beam_embed.models.export.checkpoint import Checkpoint, CheckpointError
from beam_embed.models.export.checkpoint_layout import inspect_checkpoint, open_tensors
from beam_embed.models.export.tokenizer_json import write_vocab
from beam_embed.models.export.weight_map import MappedWeights, map_weights
from beam_embed.models.export.xlmr_checkpoint import SENTENCEPIECE, model_proto, position_offset
from beam_embed.models.export.xlmr_preprocessor import XlmrPreprocessor
from beam_embed.models.export_format import (
    DENSE,
    FORMAT_VERSION,
    METADATA_FILE,
    precision_folder,
)

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
        "max_position_embeddings": cfg["max_position_embeddings"] - position_offset(cfg),
        "architecture": cfg.get("model_type", "bert"),
        "lower_case": tok.lower_case,
        "lower_case_source": tok.lower_case_source,
        "strip_accents": tok.strip_accents,
        "tokenizer": tok.flavor,
        "vocabulary_from": os.path.basename(tok.vocab_file),
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
        "modules": list(ckpt.modules),
        "include_prompt": ckpt.include_prompt,
        "prompts": dict(ckpt.prompts),  # runs apply them (models/prompts.py)
        "default_prompt_name": ckpt.default_prompt_name,
        "dense": [{"weight": f"{DENSE}/{i}_weight.npy",
                   "bias": None if d.bias is None else f"{DENSE}/{i}_bias.npy",
                   "activation": d.activation, "in_features": int(d.weight.shape[1]),
                   "out_features": int(d.weight.shape[0])} for i, d in enumerate(ckpt.dense)],
        "output_width": int(ckpt.dense[-1].weight.shape[0]) if ckpt.dense else cfg["hidden_size"],
    }


def _save_array(array: np.ndarray, path: str) -> None:
    """One array as .npy (whose bytes, unlike .npz's zip, hold no time stamp)."""
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array, np.float32), allow_pickle=False)
    with tf.io.gfile.GFile(path, "wb") as f:
        f.write(buffer.getvalue())


def export_checkpoint(src_dir: str, out_dir: str, name: str | None = None, *,
                      checkpoint: str | None = None, lower_case: bool | None = None) -> dict:
    """Exports `src_dir` to `out_dir`; returns the metadata written beside the SavedModels.
    `checkpoint`: an explicit TF checkpoint prefix (google-research/bert layout); `lower_case`:
    overrides what the folder says or implies.

    The folder is checked here (a CheckpointError names what is wrong), then exported in a
    fresh Python process: TensorFlow names each traced function with a number counted per
    process, so an export made after other tracing in the same process would write other
    graph bytes (and another model fingerprint) for the same model."""
    inspect_checkpoint(src_dir, checkpoint=checkpoint, lower_case=lower_case)
    with tempfile.TemporaryDirectory(prefix="beam-embed-export-") as tmp:
        result = os.path.join(tmp, "result.json")
        args = {"src_dir": src_dir, "out_dir": out_dir, "name": name, "checkpoint": checkpoint,
                "lower_case": lower_case, "result": result}
        done = subprocess.run([sys.executable, "-m", "beam_embed.models.export.fresh_process",
                               json.dumps(args)], capture_output=True, text=True,
                              env={"TF_CPP_MIN_LOG_LEVEL": "2", **os.environ})
        try:
            with open(result, encoding="utf-8") as f:
                outcome = json.load(f)
        except (OSError, ValueError):
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"exporting {src_dir} failed in its process (exit "
                               f"{done.returncode}): {tail}") from None
    if "error" in outcome:
        raise (CheckpointError if outcome["error"] == "CheckpointError" else RuntimeError)(
            outcome["message"])
    meta = outcome["metadata"]
    for warning in meta["warnings"]:
        logging.warning("%s: %s", src_dir, warning)
    return meta


def export_here(src_dir: str, out_dir: str, name: str | None = None, *,
                checkpoint: str | None = None, lower_case: bool | None = None) -> dict:
    """export_checkpoint's work, in this process (fresh_process.py runs it)."""
    ckpt = inspect_checkpoint(src_dir, checkpoint=checkpoint, lower_case=lower_case)
    with tempfile.TemporaryDirectory(prefix="beam-embed-vocab-") as tmp:
        vocab_file = (write_vocab(list(ckpt.tokenizer.vocab_entries), tmp)
                      if ckpt.tokenizer.vocab_entries else ckpt.tokenizer.vocab_file)
        return _export(ckpt, vocab_file, out_dir, name)


def _export(ckpt: Checkpoint, vocab_file: str, out_dir: str, name: str | None) -> dict:
    tok = ckpt.tokenizer
    mapped = read_weights(ckpt)
    encoder = BertEncoder(mapped.weights)
    if tok.flavor == SENTENCEPIECE:
        _, proto = model_proto(os.path.dirname(tok.vocab_file))
        preprocessor = XlmrPreprocessor(proto, vocab_file, list(tok.vocab_entries))
    else:
        preprocessor = BertPreprocessor(vocab_file, tok.lower_case, tok.strip_accents,
                                        _special_ids(vocab_file), tok.flavor)
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
    if ckpt.dense:
        tf.io.gfile.makedirs(os.path.join(out_dir, DENSE))
    for dense, saved in zip(ckpt.dense, meta["dense"]):
        _save_array(dense.weight, os.path.join(out_dir, saved["weight"]))
        if dense.bias is not None:
            _save_array(dense.bias, os.path.join(out_dir, saved["bias"]))
    with tf.io.gfile.GFile(os.path.join(out_dir, METADATA_FILE), "w") as f:
        json.dump(meta, f, indent=2)
    return meta
