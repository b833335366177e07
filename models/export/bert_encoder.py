"""The TF-Hub BERT encoder contract as a plain tf.Module: variables and TF ops, nothing else.

Why not export keras-hub's BertBackbone graph directly: it hard-codes the tanh approximation of
GELU (Hugging Face checkpoints saying `hidden_act: gelu` were trained with the exact erf form;
google-research/bert's "gelu" is the tanh one), it returns only the last layer, and a Keras graph
in the SavedModel ties the export to Keras internals. weight_map.py maps a checkpoint's tensors
onto BertWeights; this module is the forward pass that is saved.
It loads with `tf.saved_model.load` / `hub.load` and needs only TensorFlow.

Fused functions (`encoder.fp32(inputs)`, and `LowPrecisionEncoder`s for bf16 and fp16, saved as
their own SavedModels): the same contract and outputs (float32), from one graph written for the
CPU kernels, with its matmuls in float32, bfloat16 or float16 (accumulating in float32; LayerNorm and the residual stream stay
float32). The graph is written for oneDNN on CPU (measured with ONEDNN_VERBOSE=1 on a 2-core AMX
machine, TF 2.21):
- the low-precision matmul weights are graph constants, not variables: only then does oneDNN's
  fused MatMul+BiasAdd cache them pre-packed and run the AMX brgemm kernel (from a variable it
  takes a plain `gemm:jit` kernel, ~4x slower). `fp32` reads its variables (constants measured
  no faster on Eigen, and would store a second float32 copy of the model in the SavedModel);
- bias and GELU are written as `bias_add` + `0.5*x*(1+erf(x/sqrt 2))`, the pattern TF's remapper
  fuses into that matmul as a oneDNN post-op (tf.nn.gelu's erfc form runs unfused, in bf16 Eigen:
  slower than the matmul itself);
- LayerNorm is written in the pattern the remapper turns into `_MklLayerNorm` (2-D input,
  positive axis, constant gamma/beta). That fused kernel ignores the graph's epsilon and uses
  1e-3, so the input is scaled by c = sqrt(1e-3 / eps) first and the graph's epsilon is
  eps * c^2: LayerNorm(c*x, eps*c^2) == LayerNorm(x, eps) exactly, whichever epsilon is used.
Without oneDNN (GPU, TF_ENABLE_ONEDNN_OPTS=0, and CPUs without AVX-512/AMX, where TensorFlow turns
oneDNN off by default and runs Eigen) the same graph runs unfused and gives the same numbers. On
such a CPU (AVX2 only) bf16 has no hardware and runs at the fp32 graph's speed; `fp32` is the fast
exact path there: Eigen still fuses the bias into the matmul (`_FusedMatMul`), and the 2-D
layout avoids the einsum graph's 3-D broadcasts and unstacks (MiniLM at the job's group shapes,
6 interleaved rounds: 6% less CPU time than `__call__`, range 5-7%; outputs within 6e-6; a tiny
8x8 call 35% faster). XLA (`jit_compile`) was measured
~4.5x slower than this graph on an AMX CPU (its CPU backend does not reach AMX), so nothing here
is compiled with it.
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
# Low-precision variants of the encoder: name -> compute dtype of the matmuls.
LOW_PRECISIONS = {"bf16": tf.bfloat16, "fp16": tf.float16}
_FUSED_NORM_EPSILON = 1e-3  # what oneDNN's fused LayerNorm uses, whatever the graph says
_ERF_GELU = {"gelu"}  # written as 0.5*x*(1+erf(x/sqrt 2)) so oneDNN fuses it into the matmul
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
        return self._outputs(outputs)

    def _outputs(self, outputs: list) -> dict:
        """The contract's outputs from every layer's [batch, seq, width] float32 output."""
        last = outputs[-1]
        pooled = tf.tanh(tf.matmul(last[:, 0], self.pooler_kernel) + self.pooler_bias)
        return {
            "pooled_output": pooled,
            "default": pooled,
            "sequence_output": last,
            "encoder_outputs": outputs,
        }

    @tf.function(input_signature=[_INPUT_SPEC])
    def fp32(self, inputs):
        """`__call__` in the fused layout, float32 throughout: the same numbers to float32
        rounding, fewer and cheaper ops (the fast exact path on CPUs without AMX)."""
        return self._fused(inputs, tf.float32)

    def _const(self, var: tf.Variable, dtype) -> tf.Tensor:
        """The variable's value as a constant of the traced graph (see the module docstring)."""
        with tf.init_scope():
            value = tf.cast(var, dtype).numpy()
        return tf.constant(value)

    def _fused_norm(self, x, gamma, beta):
        """LayerNorm over the last axis of a 2-D float32 tensor, in the op pattern that oneDNN
        fuses; exact for any epsilon (see the module docstring)."""
        scale = math.sqrt(_FUSED_NORM_EPSILON / self._eps)
        x = x * scale
        gamma, beta = self._const(gamma, tf.float32), self._const(beta, tf.float32)
        mean = tf.reduce_mean(x, 1, keepdims=True)
        var = tf.reduce_mean(tf.math.squared_difference(x, mean), 1, keepdims=True)
        inv = tf.math.rsqrt(var + self._eps * scale * scale) * gamma
        return x * inv + (beta - inv * mean)

    def _weight(self, var: tf.Variable, dtype) -> tf.Tensor:
        """A matmul weight in `dtype`: the variable in float32, a constant below (see above)."""
        return var if dtype == tf.float32 else self._const(var, dtype)

    def _dense(self, x, kernel, bias, dtype):
        return tf.nn.bias_add(tf.matmul(x, self._weight(kernel, dtype)), self._weight(bias, dtype))

    def _activation_fn(self, x):
        if self._activation in _ERF_GELU:
            return 0.5 * x * (1.0 + tf.math.erf(x * (1.0 / math.sqrt(2.0))))
        return ACTIVATIONS[self._activation](x)

    def _fused_transformer(self, x, bias, layer: _Layer, dtype, batch, seq):
        """One layer on x [batch * seq, width] float32; matmuls in `dtype`."""
        width = x.shape[-1]
        heads = self._num_heads
        head_dim = width // heads
        qkv = self._dense(tf.cast(x, dtype), layer.qkv_kernel, layer.qkv_bias, dtype)
        qkv = tf.transpose(tf.reshape(qkv, [batch, seq, 3, heads, head_dim]), [2, 0, 3, 1, 4])
        q, k, v = qkv[0], qkv[1], qkv[2]  # [batch, heads, seq, head_dim]
        scores = tf.matmul(q, k, transpose_b=True) * tf.cast(1.0 / math.sqrt(head_dim), dtype)
        probs = tf.nn.softmax(scores + bias, axis=-1)  # oneDNN: float32 inside, rounded once
        context = tf.matmul(probs, v)
        context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [-1, width])
        attn = self._dense(context, layer.attn_out_kernel, layer.attn_out_bias, dtype)
        x = self._fused_norm(x + tf.cast(attn, tf.float32), layer.attn_norm_gamma,
                             layer.attn_norm_beta)
        hidden = self._activation_fn(
            self._dense(tf.cast(x, dtype), layer.ffn_in_kernel, layer.ffn_in_bias, dtype))
        out = self._dense(hidden, layer.ffn_out_kernel, layer.ffn_out_bias, dtype)
        return self._fused_norm(x + tf.cast(out, tf.float32), layer.ffn_norm_gamma,
                                layer.ffn_norm_beta)

    def _fused(self, inputs, dtype):
        ids = inputs["input_word_ids"]
        mask = tf.cast(inputs["input_mask"], tf.float32)
        batch, seq = tf.shape(ids)[0], tf.shape(ids)[1]
        width = self.word_embeddings.shape[-1]
        x = (tf.gather(self.word_embeddings, ids)
             + self.position_embeddings[tf.newaxis, :seq]
             + tf.gather(self.type_embeddings, inputs["input_type_ids"]))
        x = self._fused_norm(tf.reshape(x, [-1, width]), self.embed_norm_gamma,
                             self.embed_norm_beta)
        # -3e4 (not -1e9) fits float16; exp() of it is 0 in every dtype
        bias = tf.cast((1.0 - mask)[:, tf.newaxis, tf.newaxis, :] * -3e4, dtype)
        outputs = []
        for layer in self.layers:
            x = self._fused_transformer(x, bias, layer, dtype, batch, seq)
            outputs.append(tf.reshape(x, [batch, seq, width]))
        return self._outputs(outputs)

    @tf.function(input_signature=[_INPUT_SPEC])
    def serving(self, inputs):
        """The `serving_default` signature: the same outputs, layers as flat keys."""
        return flat_outputs(self(inputs))


def flat_outputs(out: dict) -> dict:
    flat = {k: out[k] for k in ("pooled_output", "default", "sequence_output")}
    flat.update({f"encoder_outputs_{i}": t for i, t in enumerate(out["encoder_outputs"])})
    return flat


class LowPrecisionEncoder(tf.Module):
    """The encoder contract with `precision` matmuls, saved as its own SavedModel beside
    `encoder/` (`encoder_bf16/`, `encoder_fp16/`): loading a SavedModel parses every function's
    graph, and each low-precision graph carries the model's matmul weights as constants, so one
    folder holding all three took ~0.8 s to load where one precision's folder takes ~0.4 s
    (MiniLM, 2 cores). Only the variables the graph still reads (embeddings, pooler) are saved
    with it; the `BertEncoder` it traces is not tracked (its variables and functions stay in
    `encoder/`)."""

    def __init__(self, encoder: BertEncoder, precision: str):
        super().__init__(name=f"bert_encoder_{precision}")
        self._dtype = LOW_PRECISIONS[precision]
        self._source = self._no_dependency(encoder)
        for name in ("word_embeddings", "position_embeddings", "type_embeddings",
                     "pooler_kernel", "pooler_bias"):
            setattr(self, name, getattr(encoder, name))

    @tf.function(input_signature=[_INPUT_SPEC])
    def __call__(self, inputs):
        return self._source._fused(inputs, self._dtype)

    @tf.function(input_signature=[_INPUT_SPEC])
    def serving(self, inputs):
        return flat_outputs(self(inputs))
