"""The TF-Hub BERT preprocessor contract for an XLM-RoBERTa export: SentencePiece in the graph.

tensorflow-text's SentencepieceTokenizer runs the model file's own bytes (its normaliser, its
pieces, its unigram or BPE model), so the pieces are SentencePiece's own; the graph then applies
fairseq's id offset (id + 1; the model's `<unk>` becomes 3). Words, for `tokenize` and the word
offsets, are the runs of pieces from one that starts with "▁" to the next. Packing follows
XLM-R: `<s> A </s>` for one text, `<s> A </s></s> B </s>` for two, padded with `<pad>`; there are
no token types (all zero: XLM-R has one type embedding, added to every token).
The vocabulary travels as `assets/vocab.txt` (one piece per id), as a BERT export's does, so the
`tokens` output shows the pieces.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from beam_embed.models.bert_preprocessor import DEFAULT_SEQ_LENGTH
from beam_embed.models.export.sentencepiece_model import FAIRSEQ_OFFSET, WORD_START

BOS, PAD, EOS, UNK = 0, 1, 2, 3  # fairseq's specials
_RAGGED_TOKENS = tf.RaggedTensorSpec([None, None, None], tf.int32, ragged_rank=2)


class XlmrPreprocessor(tf.Module):
    """Saved as the `preprocessor/` SavedModel of an XLM-RoBERTa export."""

    def __init__(self, model_proto: bytes, vocab_file: str, vocab: list[str]):
        super().__init__(name="xlmr_preprocessor")
        self._sp = tf_text.SentencepieceTokenizer(model=model_proto, out_type=tf.int32)
        self._vocab_asset = tf.saved_model.Asset(vocab_file)
        self.vocab_file = self._vocab_asset
        starts = np.array([p.startswith(WORD_START) for p in vocab], bool)
        self._starts_word = tf.Variable(starts, trainable=False, name="starts_word")
        self.cls_id = tf.Variable(BOS, dtype=tf.int32, trainable=False)
        self.sep_id = tf.Variable(EOS, dtype=tf.int32, trainable=False)
        self.pad_id = tf.Variable(PAD, dtype=tf.int32, trainable=False)

    def _words(self, strings):
        """Fairseq ids grouped into words [batch, words, pieces], and each piece's byte span."""
        ids, begin, end = self._sp.tokenize_with_offsets(strings)
        ids = ids.with_flat_values(tf.where(ids.flat_values == 0, UNK,
                                            ids.flat_values + FAIRSEQ_OFFSET))
        first = tf.range(tf.size(ids.flat_values, out_type=tf.int64)) == tf.gather(
            ids.row_splits, ids.value_rowids())
        starts = tf.gather(self._starts_word, ids.flat_values) | first
        word_starts = tf.where(starts)[:, 0]
        words = tf.RaggedTensor.from_row_starts(ids.flat_values, word_starts)
        per_text = tf.reduce_sum(tf.cast(ids.with_flat_values(starts), tf.int64), axis=1)
        return tf.RaggedTensor.from_row_lengths(words, per_text), begin, end, starts

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize(self, strings):
        return self._words(strings)[0]

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize_with_offsets(self, strings):
        """Pieces [batch, words, pieces] with each word's byte span in the original text (its
        leading whitespace, which SentencePiece gives to the word's "▁", left out), and each
        piece's own span."""
        pieces, begin, end, starts = self._words(strings)
        word_starts = tf.where(starts)[:, 0]
        last = tf.concat([word_starts[1:], [tf.size(starts, out_type=tf.int64)]], 0) - 1
        word_begin = tf.gather(begin.flat_values, word_starts)
        word_end = tf.gather(end.flat_values, last)
        text = tf.gather(strings, pieces.value_rowids())
        span = tf.strings.substr(text, word_begin, word_end - word_begin)
        lead = tf.strings.length(span) - tf.strings.length(
            tf.strings.regex_replace(span, r"^[\s\p{Z}]+", ""))
        shape = pieces.row_splits
        return {"pieces": pieces,
                "word_begin": tf.RaggedTensor.from_row_splits(word_begin + tf.cast(lead, tf.int64),
                                                              shape),
                "word_end": tf.RaggedTensor.from_row_splits(word_end, shape),
                "piece_begin": begin, "piece_end": end}

    @tf.function
    def bert_pack_inputs(self, segments, seq_length=DEFAULT_SEQ_LENGTH):
        seq_length = tf.cast(seq_length, tf.int32)
        flat = [s.merge_dims(-2, -1) if s.ragged_rank == 2 else s for s in segments]
        # XLM-R's pair: <s> A </s></s> B </s>; each later segment opens with its own </s>
        extra = len(flat) - 1
        trimmer = tf_text.RoundRobinTrimmer(max_seq_length=seq_length - len(flat) - 1 - extra)
        trimmed = trimmer.trim(flat)
        trimmed = [trimmed[0]] + [
            tf.concat([tf.fill([t.nrows(), 1], self.sep_id), t], axis=1) for t in trimmed[1:]]
        ids, _ = tf_text.combine_segments(
            trimmed, start_of_sequence_id=self.cls_id, end_of_segment_id=self.sep_id)
        word_ids, mask = tf_text.pad_model_inputs(ids, seq_length, pad_value=self.pad_id)
        return {
            "input_word_ids": tf.cast(word_ids, tf.int32),
            "input_mask": tf.cast(mask, tf.int32),
            "input_type_ids": tf.zeros_like(tf.cast(word_ids, tf.int32)),
        }

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def __call__(self, strings):
        return self.bert_pack_inputs([self.tokenize(strings)], DEFAULT_SEQ_LENGTH)

    def concrete_functions(self) -> list:
        """The traces saved with the module: one and two segments, any seq_length."""
        length = tf.TensorSpec([], tf.int32)
        return [
            self.bert_pack_inputs.get_concrete_function([_RAGGED_TOKENS], length),
            self.bert_pack_inputs.get_concrete_function([_RAGGED_TOKENS] * 2, length),
        ]
