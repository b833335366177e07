"""A tiny TF1 Hub BERT module: google-research/bert's graph (tanh GELU, -10000 attention mask)
built with tf.compat.v1 from a random Hugging Face-layout checkpoint, saved as a SavedModel with
an empty tag set (and a `train` one, as TF-Hub's modules have), signatures `tokens` and
`tokenization_info`, and its vocabulary as an asset. The vocabulary is written in a build
folder that is deleted afterwards, so `tokenization_info` names a path that no longer exists,
as a downloaded module's does."""

from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np
import tensorflow as tf

GELU = "gelu_tanh"  # google-research/bert's gelu; pass to tests.bert_reference.forward


def _layer_norm(x, gamma, beta):
    mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
    return (x - mean) * tf.math.rsqrt(var + 1e-12) * gamma + beta


def _gelu(x):
    return 0.5 * x * (1.0 + tf.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * tf.pow(x, 3))))


def _graph(w, ids, mask, segments, layers: int, heads: int):
    """google-research/bert's modeling.py forward pass; variables under its names."""
    v1 = tf.compat.v1

    def var(name, value):
        return v1.get_variable(name, initializer=np.asarray(value, np.float32))

    def dense(x, name, hf):
        return tf.matmul(x, var(f"{name}/kernel", w[f"{hf}.weight"].T)) + var(
            f"{name}/bias", w[f"{hf}.bias"])

    def norm(x, name, hf):
        return _layer_norm(x, var(f"{name}/gamma", w[f"{hf}.weight"]),
                           var(f"{name}/beta", w[f"{hf}.bias"]))

    seq = tf.shape(ids)[1]
    positions = var("bert/embeddings/position_embeddings",
                    w["embeddings.position_embeddings.weight"])
    x = (tf.gather(var("bert/embeddings/word_embeddings", w["embeddings.word_embeddings.weight"]),
                   ids)
         + tf.slice(positions, [0, 0], [seq, -1])[None]
         + tf.gather(var("bert/embeddings/token_type_embeddings",
                         w["embeddings.token_type_embeddings.weight"]), segments))
    x = norm(x, "bert/embeddings/LayerNorm", "embeddings.LayerNorm")
    adder = (1.0 - tf.cast(mask, tf.float32))[:, None, None, :] * -10000.0
    width = x.shape[-1]
    size = width // heads
    batch = tf.shape(ids)[0]

    def split(h):
        return tf.transpose(tf.reshape(h, [batch, seq, heads, size]), [0, 2, 1, 3])

    for i in range(layers):
        n, hf = f"bert/encoder/layer_{i}", f"encoder.layer.{i}"
        q, k, v = (split(dense(x, f"{n}/attention/self/{p}", f"{hf}.attention.self.{p}"))
                   for p in ("query", "key", "value"))
        probs = tf.nn.softmax(tf.matmul(q, k, transpose_b=True) / np.sqrt(size) + adder)
        context = tf.reshape(tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3]),
                             [batch, seq, width])
        x = norm(x + dense(context, f"{n}/attention/output/dense",
                           f"{hf}.attention.output.dense"),
                 f"{n}/attention/output/LayerNorm", f"{hf}.attention.output.LayerNorm")
        h = _gelu(dense(x, f"{n}/intermediate/dense", f"{hf}.intermediate.dense"))
        x = norm(x + dense(h, f"{n}/output/dense", f"{hf}.output.dense"),
                 f"{n}/output/LayerNorm", f"{hf}.output.LayerNorm")
    pooled = tf.tanh(dense(x[:, 0], "bert/pooler/dense", "pooler.dense"))
    return x, pooled


def build_tf1_bert(path: str, weights: dict, vocab: list[str], lower_case: bool,
                   layers: int = 2, heads: int = 2) -> None:
    v1 = tf.compat.v1
    build = tempfile.mkdtemp(prefix="tf1-bert-build-")
    vocab_file = os.path.join(build, "vocab.txt")
    with open(vocab_file, "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    graph = tf.Graph()
    with graph.as_default():
        ids, mask, segments = (v1.placeholder(tf.int32, [None, None], name=n)
                               for n in ("input_ids", "input_mask", "segment_ids"))
        sequence, pooled = _graph(weights, ids, mask, segments, layers, heads)
        asset = tf.constant(vocab_file, name="vocab_file")
        v1.add_to_collection(v1.GraphKeys.ASSET_FILEPATHS, asset)
        info = v1.saved_model.utils.build_tensor_info
        signatures = {
            "tokens": v1.saved_model.signature_def_utils.predict_signature_def(
                {"input_ids": ids, "input_mask": mask, "segment_ids": segments},
                {"sequence_output": sequence, "pooled_output": pooled}),
            "tokenization_info": v1.saved_model.signature_def_utils.build_signature_def(
                {}, {"vocab_file": info(asset), "do_lower_case": info(tf.constant(lower_case))},
                "tensorflow/serving/predict")}
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            builder = v1.saved_model.Builder(path)
            builder.add_meta_graph_and_variables(
                sess, tags=[], signature_def_map=signatures,
                assets_collection=v1.get_collection(v1.GraphKeys.ASSET_FILEPATHS))
            builder.add_meta_graph(["train"], signature_def_map=signatures)
            builder.save()
    shutil.rmtree(build)
