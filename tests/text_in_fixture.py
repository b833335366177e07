"""A tiny text-in embedder: a TF2 SavedModel taking strings [batch] and returning [batch, D]
floats, as Universal Sentence Encoder v4 and nnlm-en-dim128 do, and its numpy twin.

Its vector reads every character of the string it is given, in order (a position-weighted mean
of per-character embeddings, then a tanh projection), so it equals the numpy twin only when the
model saw exactly the original text: whitespace, punctuation and all.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

BUCKETS = 257
WIDTH = 6


def text_weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"emb": rng.standard_normal((BUCKETS, 8)).astype(np.float32),
            "proj": rng.standard_normal((8, WIDTH)).astype(np.float32)}


def reference(weights, texts: list[str]) -> np.ndarray:
    """The module's vectors in float64 numpy."""
    out = []
    for text in texts:
        codes = np.array([ord(c) for c in text], np.int64)
        scale = 1.0 + np.arange(len(codes)) % 5
        rows = weights["emb"].astype(np.float64)[codes % BUCKETS] * scale[:, None]
        out.append(np.tanh(rows.sum(0) / max(len(codes), 1) @ weights["proj"]))
    return np.array(out)


class _TextModule(tf.Module):
    def __init__(self, weights):
        super().__init__()
        self.emb = tf.Variable(weights["emb"])
        self.proj = tf.Variable(weights["proj"])

    def vectors(self, texts):
        codes = tf.strings.unicode_decode(texts, "UTF-8")
        position = tf.ragged.range(codes.row_lengths()).flat_values
        scale = 1.0 + tf.cast(position % 5, tf.float32)
        rows = tf.gather(self.emb, codes.flat_values % BUCKETS) * scale[:, None]
        total = tf.math.unsorted_segment_sum(rows, codes.value_rowids(), codes.nrows())
        count = tf.maximum(tf.cast(codes.row_lengths(), tf.float32), 1.0)[:, None]
        return tf.tanh(tf.matmul(total / count, self.proj))


class _Callable(_TextModule):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def __call__(self, texts):
        return self.vectors(texts)


class _SignatureOnly(_TextModule):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")])
    def serve(self, sentences):
        return {"outputs": self.vectors(sentences),
                "lengths": tf.strings.length(sentences)}


def build_text_in(path: str, weights, callable_module: bool = True) -> None:
    """`callable_module`: `m(strings)` plus serving_default (USE v4's layout); else only a
    serving_default signature returning a dict with other outputs beside the vectors."""
    if callable_module:
        module = _Callable(weights)
        signature = module.__call__.get_concrete_function()
    else:
        module = _SignatureOnly(weights)
        signature = module.serve.get_concrete_function()
    tf.saved_model.save(module, path, signatures={"serving_default": signature})
