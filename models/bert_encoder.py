"""The TF-Hub BERT encoder contract as a plain tf.Module: variables and TF ops, nothing else.

Why not export keras-hub's BertBackbone graph directly: it hard-codes the tanh approximation of
GELU (checkpoints saying `hidden_act: gelu` were trained with the exact erf form), it returns only
the last layer, and a Keras graph in the SavedModel ties the export to Keras internals. keras-hub
reads and maps the checkpoint (see export.py); this module is the forward pass that is saved.
It loads with `tf.saved_model.load` / `hub.load` and needs only TensorFlow.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import tensorflow as tf

ACTIVATIONS = {
    "gelu": lambda x: tf.nn.gelu(x, approximate=False),
    "gelu_new": lambda x: tf.nn.gelu(x, approximate=True),
    "gelu_pytorch_tanh": lambda x: tf.nn.gelu(x, approximate=True),
    "relu": tf.nn.relu,
}
_INPUT_SPEC = {
    "input_word_ids": tf.TensorSpec([None, None], tf.int32, name="input_word_ids"),
    "input_mask": tf.TensorSpec([None, None], tf.int32, name="input_mask"),
    "input_type_ids": tf.TensorSpec([None, None], tf.int32, name="input_type_ids"),
}


@dataclasses.dataclass(frozen=True)
class BertLayerWeights:
    qkv_kernel: np.ndarray  # [width, 3 * width]: query, key, value side by side
    qkv_bias: np.ndarray
    attn_out_kernel: np.ndarray
    attn_out_bias: np.ndarray
    attn_norm_gamma: np.ndarray
    attn_norm_beta: np.ndarray
    ffn_in_kernel: np.ndarray
    ffn_in_bias: np.ndarray
    ffn_out_kernel: np.ndarray
    ffn_out_bias: np.ndarray
    ffn_norm_gamma: np.ndarray
    ffn_norm_beta: np.ndarray


@dataclasses.dataclass(frozen=True)
class BertWeights:
    word_embeddings: np.ndarray
    position_embeddings: np.ndarray
    type_embeddings: np.ndarray
    embed_norm_gamma: np.ndarray
    embed_norm_beta: np.ndarray
    layers: tuple[BertLayerWeights, ...]
    pooler_kernel: np.ndarray
    pooler_bias: np.ndarray
    num_heads: int
    activation: str
    layer_norm_eps: float


def _var(x: np.ndarray, name: str) -> tf.Variable:
    return tf.Variable(np.asarray(x, np.float32), trainable=False, name=name)


class _Layer(tf.Module):
    def __init__(self, w: BertLayerWeights, index: int):
        super().__init__(name=f"transformer_layer_{index}")
        for field in dataclasses.fields(w):
            setattr(self, field.name, _var(getattr(w, field.name), field.name))


class BertEncoder(tf.Module):
    """Saved as the `encoder/` SavedModel of an export."""

    def __init__(self, w: BertWeights):
        super().__init__(name="bert_encoder")
        if w.activation not in ACTIVATIONS:
            raise ValueError(
                f"unknown hidden_act {w.activation!r}; expected one of {sorted(ACTIVATIONS)}")
        self.word_embeddings = _var(w.word_embeddings, "word_embeddings")
        self.position_embeddings = _var(w.position_embeddings, "position_embeddings")
        self.type_embeddings = _var(w.type_embeddings, "type_embeddings")
        self.embed_norm_gamma = _var(w.embed_norm_gamma, "embed_norm_gamma")
        self.embed_norm_beta = _var(w.embed_norm_beta, "embed_norm_beta")
        self.layers = [_Layer(layer, i) for i, layer in enumerate(w.layers)]
        self.pooler_kernel = _var(w.pooler_kernel, "pooler_kernel")
        self.pooler_bias = _var(w.pooler_bias, "pooler_bias")
        self._num_heads = w.num_heads
        self._activation = w.activation
        self._eps = w.layer_norm_eps

    def _norm(self, x, gamma, beta):
        mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
        return (x - mean) * tf.math.rsqrt(var + self._eps) * gamma + beta

    def _transformer(self, x, bias, layer: _Layer):
        batch, seq, width = tf.shape(x)[0], tf.shape(x)[1], x.shape[-1]
        heads = self._num_heads
        head_dim = width // heads
        qkv = tf.einsum("bsw,wk->bsk", x, layer.qkv_kernel) + layer.qkv_bias
        qkv = tf.reshape(qkv, [batch, seq, 3, heads, head_dim])
        q, k, v = tf.unstack(qkv, axis=2)
        scores = tf.einsum("bqhd,bkhd->bhqk", q, k) * (1.0 / math.sqrt(head_dim)) + bias
        probs = tf.nn.softmax(scores, axis=-1)
        context = tf.reshape(tf.einsum("bhqk,bkhd->bqhd", probs, v), [batch, seq, width])
        attn = tf.einsum("bsw,wk->bsk", context, layer.attn_out_kernel) + layer.attn_out_bias
        x = self._norm(x + attn, layer.attn_norm_gamma, layer.attn_norm_beta)
        hidden = tf.einsum("bsw,wk->bsk", x, layer.ffn_in_kernel) + layer.ffn_in_bias
        hidden = ACTIVATIONS[self._activation](hidden)
        out = tf.einsum("bsk,kw->bsw", hidden, layer.ffn_out_kernel) + layer.ffn_out_bias
        return self._norm(x + out, layer.ffn_norm_gamma, layer.ffn_norm_beta)

    @tf.function(input_signature=[_INPUT_SPEC])
    def __call__(self, inputs):
        ids = inputs["input_word_ids"]
        mask = tf.cast(inputs["input_mask"], tf.float32)
        seq = tf.shape(ids)[1]
        x = (tf.gather(self.word_embeddings, ids)
             + self.position_embeddings[tf.newaxis, :seq]
             + tf.gather(self.type_embeddings, inputs["input_type_ids"]))
        x = self._norm(x, self.embed_norm_gamma, self.embed_norm_beta)
        bias = (1.0 - mask)[:, tf.newaxis, tf.newaxis, :] * -1e9  # [batch, 1, 1, key]
        outputs = []
        for layer in self.layers:
            x = self._transformer(x, bias, layer)
            outputs.append(x)
        pooled = tf.tanh(tf.matmul(x[:, 0], self.pooler_kernel) + self.pooler_bias)
        return {
            "pooled_output": pooled,
            "default": pooled,
            "sequence_output": x,
            "encoder_outputs": outputs,
        }

    @tf.function(input_signature=[_INPUT_SPEC])
    def serving(self, inputs):
        """The `serving_default` signature: the same outputs, layers as flat keys."""
        out = self(inputs)
        flat = {k: out[k] for k in ("pooled_output", "default", "sequence_output")}
        flat.update({f"encoder_outputs_{i}": t for i, t in enumerate(out["encoder_outputs"])})
        return flat
