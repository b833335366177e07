"""google-research/bert checkpoint folders for tests: the random weights that
tests.bert_reference.write_checkpoint makes, saved under Google's variable names and layouts."""

from __future__ import annotations

import json
import os
import tempfile

import numpy as np
import tensorflow as tf

from tests.bert_reference import write_checkpoint

DENSE = ("attention/self/query", "attention/self/key", "attention/self/value",
         "attention/output/dense", "intermediate/dense", "output/dense")
NORMS = ("attention/output/LayerNorm", "output/LayerNorm")


def google_variables(w: dict[str, np.ndarray], layers: int) -> dict[str, np.ndarray]:
    """Hugging Face-named weights -> google-research/bert's names; kernels are [in, out]."""
    g = {
        "bert/embeddings/word_embeddings": w["embeddings.word_embeddings.weight"],
        "bert/embeddings/position_embeddings": w["embeddings.position_embeddings.weight"],
        "bert/embeddings/token_type_embeddings": w["embeddings.token_type_embeddings.weight"],
        "bert/embeddings/LayerNorm/gamma": w["embeddings.LayerNorm.weight"],
        "bert/embeddings/LayerNorm/beta": w["embeddings.LayerNorm.bias"],
        "bert/pooler/dense/kernel": w["pooler.dense.weight"].T,
        "bert/pooler/dense/bias": w["pooler.dense.bias"],
    }
    for i in range(layers):
        for part in DENSE:
            hf = f"encoder.layer.{i}.{part.replace('/', '.')}"
            g[f"bert/encoder/layer_{i}/{part}/kernel"] = w[hf + ".weight"].T
            g[f"bert/encoder/layer_{i}/{part}/bias"] = w[hf + ".bias"]
        for part in NORMS:
            hf = f"encoder.layer.{i}.{part.replace('/', '.')}"
            g[f"bert/encoder/layer_{i}/{part}/gamma"] = w[hf + ".weight"]
            g[f"bert/encoder/layer_{i}/{part}/beta"] = w[hf + ".bias"]
    return g


def save_variables(prefix: str, variables: dict) -> None:
    """A TF1-style name-based checkpoint (prefix.index + prefix.data-00000-of-00001)."""
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=list(variables),
                      shape_and_slices=[""] * len(variables),
                      tensors=[tf.constant(v) for v in variables.values()])


def write_google_folder(folder: str, *, vocab=None, hidden_act="gelu", seed=0, layers=2,
                        checkpoint="bert_model.ckpt", extra=None) -> dict[str, np.ndarray]:
    """bert_config.json, vocab.txt and a TF checkpoint; returns the weights by HF name."""
    with tempfile.TemporaryDirectory() as hf_folder:
        weights = write_checkpoint(hf_folder, vocab=vocab, seed=seed, layers=layers, prefix="")
        with open(os.path.join(hf_folder, "config.json")) as f:
            config = json.load(f)
        os.makedirs(folder, exist_ok=True)
        os.replace(os.path.join(hf_folder, "vocab.txt"), os.path.join(folder, "vocab.txt"))
    keys = ("hidden_size", "intermediate_size", "max_position_embeddings", "num_attention_heads",
            "num_hidden_layers", "type_vocab_size", "vocab_size")
    bert_config = {k: config[k] for k in keys} | {
        "hidden_act": hidden_act, "attention_probs_dropout_prob": 0.1,
        "hidden_dropout_prob": 0.1, "initializer_range": 0.02}
    with open(os.path.join(folder, "bert_config.json"), "w") as f:
        json.dump(bert_config, f)
    save_variables(os.path.join(folder, checkpoint),
                   google_variables(weights, layers) | (extra or {}))
    return weights


def fine_tune_extras(variables: dict[str, np.ndarray], width=8) -> dict[str, np.ndarray]:
    """What run_classifier.py's Estimator saves beside the model: a task head, the pre-training
    heads, global_step and Adam's two slots for every trainable variable."""
    rng = np.random.default_rng(99)
    head = {"output_weights": rng.standard_normal((2, width)).astype(np.float32),
            "output_bias": np.zeros(2, np.float32)}
    extra = head | {
        "cls/predictions/output_bias": np.zeros(30, np.float32),
        "cls/seq_relationship/output_weights": np.zeros((2, width), np.float32),
        "global_step": np.array(12, np.int64),
    }
    for name, value in (variables | head).items():
        extra[f"{name}/adam_m"] = np.zeros_like(value)
        extra[f"{name}/adam_v"] = np.ones_like(value)
    return extra
