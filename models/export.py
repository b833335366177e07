"""Hugging Face BERT-family checkpoint folder -> TF-Hub-format SavedModels.

    OUT/encoder/        the TF-Hub BERT encoder contract (bert_encoder.py)
    OUT/preprocessor/   the TF-Hub BERT preprocessor contract (bert_preprocessor.py), vocab inside
    OUT/beam_embed.json name, width, layers, max length, recommended pooling

keras-hub reads the checkpoint (its transformers converter maps the names, prefixes and the two
LayerNorm spellings); the graphs saved are plain TF so workers need no keras-hub. OUT may be any
path TensorFlow's filesystems write (local, gs://).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile

import numpy as np
import tensorflow as tf

from models.bert_encoder import PRECISIONS, BertEncoder, BertLayerWeights, BertWeights
from models.bert_preprocessor import BertPreprocessor
from models.checkpoint import Checkpoint, CheckpointError, inspect_checkpoint

METADATA_FILE = "beam_embed.json"
FORMAT_VERSION = 3  # 2: the preprocessor has tokenize_with_offsets; 3: encoder.bf16/.fp16
SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[PAD]", "[UNK]")


@contextlib.contextmanager
def _safetensors_view(ckpt: Checkpoint):
    """Yields a folder keras-hub can read: the checkpoint itself, or a staged safetensors copy of
    a `pytorch_model.bin` checkpoint (keras-hub reads only safetensors)."""
    if ckpt.weights_file != "pytorch_model.bin":
        yield ckpt.path
        return
    try:
        import torch  # only for converting legacy .bin checkpoints; never on workers
    except ImportError as e:
        raise CheckpointError(
            f"{ckpt.path} holds pytorch_model.bin; reading it needs PyTorch "
            "(pip install torch) or a model.safetensors copy of the weights") from e
    from safetensors.numpy import save_file

    state = torch.load(os.path.join(ckpt.path, "pytorch_model.bin"), map_location="cpu",
                       weights_only=True)
    with tempfile.TemporaryDirectory(prefix="beam-embed-stage-") as stage:
        for name in os.listdir(ckpt.path):
            src = os.path.join(ckpt.path, name)
            if os.path.isfile(src) and name != "pytorch_model.bin":
                shutil.copy(src, stage)
        save_file({k: v.float().numpy() for k, v in state.items()},
                  os.path.join(stage, "model.safetensors"))
        yield stage


def _load_backbone(ckpt: Checkpoint):
    import keras_hub  # export-time only

    with _safetensors_view(ckpt) as folder:
        try:
            return keras_hub.models.BertBackbone.from_preset(folder, dtype="float32")
        except (KeyError, ValueError) as e:
            raise CheckpointError(
                f"{ckpt.path}: keras-hub could not map the weights onto a BERT backbone ({e}); "
                "is this a BertModel checkpoint?") from e


def backbone_weights(backbone, config: dict) -> BertWeights:
    """Takes the mapped weights out of a keras-hub BertBackbone, in the encoder's layout."""
    def np_(v):
        return np.asarray(v.numpy() if hasattr(v, "numpy") else v, np.float32)

    width = config["hidden_size"]
    layers = []
    for i in range(config["num_hidden_layers"]):
        block = backbone.get_layer(f"transformer_layer_{i}")
        attn = block._self_attention_layer
        kernels = [np_(d.kernel).reshape(width, width)
                   for d in (attn.query_dense, attn.key_dense, attn.value_dense)]
        biases = [np_(d.bias).reshape(width)
                  for d in (attn.query_dense, attn.key_dense, attn.value_dense)]
        layers.append(BertLayerWeights(
            qkv_kernel=np.concatenate(kernels, axis=1),
            qkv_bias=np.concatenate(biases),
            attn_out_kernel=np_(attn.output_dense.kernel).reshape(width, width),
            attn_out_bias=np_(attn.output_dense.bias),
            attn_norm_gamma=np_(block._self_attention_layer_norm.gamma),
            attn_norm_beta=np_(block._self_attention_layer_norm.beta),
            ffn_in_kernel=np_(block._feedforward_intermediate_dense.kernel),
            ffn_in_bias=np_(block._feedforward_intermediate_dense.bias),
            ffn_out_kernel=np_(block._feedforward_output_dense.kernel),
            ffn_out_bias=np_(block._feedforward_output_dense.bias),
            ffn_norm_gamma=np_(block._feedforward_layer_norm.gamma),
            ffn_norm_beta=np_(block._feedforward_layer_norm.beta),
        ))
    norm = backbone.get_layer("embeddings_layer_norm")
    pooler = backbone.get_layer("pooled_dense")
    return BertWeights(
        word_embeddings=np_(backbone.get_layer("token_embedding").embeddings),
        position_embeddings=np_(backbone.get_layer("position_embedding").position_embeddings),
        type_embeddings=np_(backbone.get_layer("segment_embedding").embeddings),
        embed_norm_gamma=np_(norm.gamma),
        embed_norm_beta=np_(norm.beta),
        layers=tuple(layers),
        pooler_kernel=np_(pooler.kernel),
        pooler_bias=np_(pooler.bias),
        num_heads=config["num_attention_heads"],
        activation=config.get("hidden_act", "gelu"),
        layer_norm_eps=float(config.get("layer_norm_eps", 1e-12)),
    )


def _special_ids(vocab_file: str) -> dict[str, int]:
    with open(vocab_file, encoding="utf-8") as f:
        index = {line.rstrip("\n"): i for i, line in enumerate(f)}
    missing = [t for t in SPECIAL_TOKENS if t not in index]
    if missing:
        raise CheckpointError(
            f"{vocab_file} lacks the special tokens {missing}; a BERT WordPiece vocab needs "
            f"{list(SPECIAL_TOKENS)}")
    return {t: index[t] for t in SPECIAL_TOKENS}


def metadata(ckpt: Checkpoint, name: str | None = None) -> dict:
    cfg = ckpt.config
    return {
        "format_version": FORMAT_VERSION,
        "kind": "bert",
        "name": name or ckpt.name,
        "source": os.path.abspath(ckpt.path),
        "width": cfg["hidden_size"],
        "layers": cfg["num_hidden_layers"],
        "heads": cfg["num_attention_heads"],
        "vocab_size": ckpt.vocab_size,
        "max_seq_length": ckpt.max_seq_length,
        "max_position_embeddings": cfg["max_position_embeddings"],
        "lower_case": ckpt.tokenizer.lower_case,
        "strip_accents": ckpt.tokenizer.strip_accents,
        "hidden_act": cfg.get("hidden_act", "gelu"),
        "precisions": list(PRECISIONS),
        "pooling": ckpt.pooling,
        "normalize": ckpt.normalize,
    }


def export_checkpoint(src_dir: str, out_dir: str, name: str | None = None) -> dict:
    """Exports `src_dir` to `out_dir`; returns the metadata written beside the SavedModels."""
    ckpt = inspect_checkpoint(src_dir)
    special = _special_ids(ckpt.tokenizer.vocab_file)
    backbone = _load_backbone(ckpt)
    encoder = BertEncoder(backbone_weights(backbone, ckpt.config))
    del backbone
    preprocessor = BertPreprocessor(
        ckpt.tokenizer.vocab_file, ckpt.tokenizer.lower_case, ckpt.tokenizer.strip_accents,
        special)
    preprocessor.concrete_functions()  # trace the 1- and 2-segment packers so they are saved
    tf.io.gfile.makedirs(out_dir)
    tf.saved_model.save(encoder, os.path.join(out_dir, "encoder"),
                        signatures={"serving_default": encoder.serving})
    tf.saved_model.save(preprocessor, os.path.join(out_dir, "preprocessor"),
                        signatures={"serving_default": preprocessor.__call__})
    meta = metadata(ckpt, name)
    with tf.io.gfile.GFile(os.path.join(out_dir, METADATA_FILE), "w") as f:
        json.dump(meta, f, indent=2)
    return meta
