"""A tiny module with ELMo's signatures and output keys: TF1 SavedModel, empty tag set, random
weights. Its padded positions carry non-zero garbage, so only mask-aware pooling matches."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

WIDTH = 4  # word_emb width; LSTM outputs and elmo are 2 * WIDTH, as in ELMo (512 / 1024)
BUCKETS = 97


def build_tiny_elmo(path: str, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    graph = tf.Graph()
    with graph.as_default():
        v1 = tf.compat.v1
        emb = v1.get_variable("char_cnn", initializer=rng.standard_normal((BUCKETS, WIDTH)).astype(np.float32))
        w1 = v1.get_variable("lstm1", initializer=rng.standard_normal((WIDTH, 2 * WIDTH)).astype(np.float32))
        w2 = v1.get_variable("lstm2", initializer=rng.standard_normal((2 * WIDTH, 2 * WIDTH)).astype(np.float32))
        scalars = v1.get_variable("scalar_mix", initializer=np.float32([0.2, 0.3, 0.5]))

        def core(tokens, lengths):
            mask = tf.sequence_mask(lengths, tf.shape(tokens)[1], dtype=tf.float32)[..., None]
            word_emb = tf.gather(emb, tf.strings.to_hash_bucket_fast(tokens, BUCKETS))
            context = tf.cumsum(word_emb, axis=1)  # left context: makes vectors contextual
            lstm1 = tf.tanh(tf.einsum("btw,wk->btk", context, w1))
            lstm2 = tf.tanh(tf.einsum("btw,wk->btk", lstm1, w2))
            s = tf.nn.softmax(scalars)
            elmo = s[0] * tf.concat([word_emb, word_emb], -1) + s[1] * lstm1 + s[2] * lstm2
            default = tf.reduce_sum(elmo * mask, 1) / tf.reduce_sum(mask, 1)
            return {"word_emb": word_emb, "lstm_outputs1": lstm1, "lstm_outputs2": lstm2,
                    "elmo": elmo, "default": default, "sequence_len": lengths}

        tokens = v1.placeholder(tf.string, [None, None], name="tokens")
        lengths = v1.placeholder(tf.int32, [None], name="sequence_len")
        text = v1.placeholder(tf.string, [None], name="text")
        split = v1.string_split(text, sep=" ")
        dense = v1.sparse_tensor_to_dense(split, default_value="")
        split_lengths = tf.cast(tf.math.bincount(tf.cast(split.indices[:, 0], tf.int32),
                                                 minlength=tf.shape(text)[0]), tf.int32)
        by_tokens = core(tokens, lengths)
        by_text = core(dense, split_lengths)
        sig = v1.saved_model.signature_def_utils.predict_signature_def
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            builder = v1.saved_model.Builder(path)
            builder.add_meta_graph_and_variables(sess, tags=[], signature_def_map={
                "tokens": sig({"tokens": tokens, "sequence_len": lengths}, by_tokens),
                "default": sig({"text": text}, by_text)})
            builder.save()
