"""An independent numpy BERT forward pass and random Hugging Face checkpoint folders for tests."""

from __future__ import annotations

import json
import os
from math import erf, sqrt

import numpy as np
from safetensors.numpy import save_file

TINY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "cat", "dog", "sat",
              "on", "mat", "bank", "river", "money", "is", "was", "big", "small", "##s", "##ing",
              "run", "play", ".", ",", "!", "?", "é", "café", "x"]
_erf = np.vectorize(erf)


def write_checkpoint(folder: str, *, layers=2, width=8, heads=2, intermediate=16, vocab=None,
                     hidden_act="gelu", lower_case=True, seed=0, prefix="bert.",
                     max_positions=64) -> dict[str, np.ndarray]:
    """A random BertModel checkpoint in Hugging Face's layout; returns its weights."""
    vocab = vocab or TINY_VOCAB
    rng = np.random.default_rng(seed)
    os.makedirs(folder, exist_ok=True)

    def r(*shape, scale=0.5):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    w = {
        "embeddings.word_embeddings.weight": r(len(vocab), width),
        "embeddings.position_embeddings.weight": r(max_positions, width),
        "embeddings.token_type_embeddings.weight": r(2, width),
        "embeddings.LayerNorm.weight": 1 + r(width, scale=0.1),
        "embeddings.LayerNorm.bias": r(width, scale=0.1),
        "pooler.dense.weight": r(width, width),
        "pooler.dense.bias": r(width, scale=0.1),
    }
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for name in ("attention.self.query", "attention.self.key", "attention.self.value",
                     "attention.output.dense"):
            w[p + name + ".weight"] = r(width, width)
            w[p + name + ".bias"] = r(width, scale=0.1)
        w[p + "intermediate.dense.weight"] = r(intermediate, width)
        w[p + "intermediate.dense.bias"] = r(intermediate, scale=0.1)
        w[p + "output.dense.weight"] = r(width, intermediate)
        w[p + "output.dense.bias"] = r(width, scale=0.1)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[p + ln + ".weight"] = 1 + r(width, scale=0.1)
            w[p + ln + ".bias"] = r(width, scale=0.1)
    save_file({prefix + k: v for k, v in w.items()}, os.path.join(folder, "model.safetensors"))
    config = {"architectures": ["BertModel"], "model_type": "bert", "vocab_size": len(vocab),
              "hidden_size": width, "num_hidden_layers": layers, "num_attention_heads": heads,
              "intermediate_size": intermediate, "hidden_act": hidden_act,
              "max_position_embeddings": max_positions, "type_vocab_size": 2,
              "layer_norm_eps": 1e-12}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": lower_case, "tokenizer_class": "BertTokenizer"}, f)
    with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    return w


def _ln(x, g, b, eps=1e-12):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def _activation(x, act):
    x = x.astype(np.float64)
    if act == "gelu":
        return 0.5 * x * (1 + _erf(x / sqrt(2)))
    if act == "relu":
        return np.maximum(x, 0.0)
    return 0.5 * x * (1 + np.tanh(sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def forward(w, ids, mask, type_ids, layers, heads, hidden_act="gelu"):
    """BERT in float64 numpy, straight from the Hugging Face weight names."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    seq = ids.shape[1]
    x = (w["embeddings.word_embeddings.weight"][ids]
         + w["embeddings.position_embeddings.weight"][:seq][None]
         + w["embeddings.token_type_embeddings.weight"][type_ids])
    x = _ln(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    bias = (1.0 - mask[:, None, None, :]) * -1e9
    outs = []
    for i in range(layers):
        p = f"encoder.layer.{i}."

        def lin(h, name):
            return h @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        b, s, width = x.shape
        d = width // heads

        def split(h):
            return h.reshape(b, s, heads, d).transpose(0, 2, 1, 3)

        q, k, v = (split(lin(x, f"attention.self.{n}")) for n in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d) + bias
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b, s, width)
        x = _ln(x + lin(ctx, "attention.output.dense"),
                w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"])
        h = _activation(lin(x, "intermediate.dense"), hidden_act)
        x = _ln(x + lin(h, "output.dense"),
                w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        outs.append(x)
    pooled = np.tanh(x[:, 0] @ w["pooler.dense.weight"].T + w["pooler.dense.bias"])
    return outs, pooled


def tiny_poolings(weights, texts: list[str], max_len: int = 64, hidden_act: str = "gelu"):
    """Every pooling of a tiny checkpoint (2 layers, 2 heads) for texts of whitespace-separated
    TINY_VOCAB words, by hand: [CLS] words [SEP] through the float64 numpy BERT. Returns
    ({pooling spec: [texts, width]}, token counts)."""
    index = {w: i for i, w in enumerate(TINY_VOCAB)}
    return poolings_of_ids(weights, [[index.get(w, 1) for w in t.split()] for t in texts],
                           max_len, hidden_act)


def poolings_of_ids(weights, pieces: list[list[int]], max_len: int = 64,
                    hidden_act: str = "gelu"):
    """Every pooling of a tiny checkpoint (2 layers, 2 heads) for rows of WordPiece ids (no
    [CLS]/[SEP]; rows longer than max_len - 2 are cut). Returns ({pooling spec: [rows,
    width]}, token counts as packed)."""
    rows = [[2] + list(p)[: max_len - 2] + [3] for p in pieces]
    seq = max(map(len, rows))
    ids = np.array([r + [0] * (seq - len(r)) for r in rows], np.int32)
    mask = (ids != 0).astype(np.float64)
    layers, pooled = forward(weights, ids, mask, np.zeros_like(ids), layers=2, heads=2,
                             hidden_act=hidden_act)

    def mean(x):
        return (x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)

    return {"cls": layers[-1][:, 0], "pooled_output": pooled, "mean": mean(layers[-1]),
            "mean@-2": mean(layers[-2]),
            "max@0": np.where(mask[..., None] > 0, layers[0], -np.inf).max(1)}, [len(r) for r in rows]
