"""The TF-Hub BERT preprocessor contract, in-graph with tensorflow-text, for an exported checkpoint.

`tokenize(strings)` -> int32 ragged [batch, words, pieces]; `bert_pack_inputs(segments,
seq_length)` -> the encoder's input dict; `__call__(strings)` packs to 128, like
`bert_en_uncased_preprocess/3`.

Normalization follows Hugging Face's BertTokenizer (the reference users compare against), which
differs from tensorflow-text's own `lower_case=True` path (NFKC case folding): HF drops control /
format characters, maps every Unicode space to " ", lower-cases without folding (so "ß" and
ligatures stay), strips accents after NFD, and marks words over 100 characters as [UNK].
One deliberate difference: special-token strings written in the text ("[SEP]") are plain text
here, so corpus text cannot inject control tokens.

google-research/bert's tokenization.py (the flavor of its checkpoints' exports) differs from HF
in three places, kept in FLAVORS: it lower-cases with Python's str.lower (a word-final Σ becomes
ς), drops only Cc/Cf control characters (private-use and unassigned ones stay, inside words),
and marks words over 200 characters as [UNK].
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_text.python.ops.bert_tokenizer import (
    _KEEP_DELIM_NO_WHITESPACE_PATTERN,
    BasicTokenizer,
)

# The tokenizer flavors, named after the checkpoint layouts that follow them (export-model's
# layouts, models/export/checkpoint.py, use the same names): defined here because the TF1 Hub
# BERT kind builds a GOOGLE preprocessor at run time, which must not depend on the exporter.
HUGGING_FACE = "huggingface"
GOOGLE = "google-research/bert"


@dataclasses.dataclass(frozen=True)
class Flavor:
    max_chars_per_word: int  # longer words are [UNK]
    final_sigma: bool  # lower-cases a word-final Σ to ς, as Python's str.lower does
    dropped: str  # the characters removed before anything else


FLAVORS = {
    HUGGING_FACE: Flavor(100, final_sigma=False, dropped=r"[\p{C}\x{FFFD}]"),
    GOOGLE: Flavor(200, final_sigma=True, dropped=r"[\p{Cc}\p{Cf}\x{FFFD}]"),
}
DEFAULT_SEQ_LENGTH = 128
_RAGGED_TOKENS = tf.RaggedTensorSpec([None, None, None], tf.int32, ragged_rank=2)
# Word splitting on the original text (so offsets point into it): every Unicode space, control
# and format character separates words; punctuation and CJK ideographs are words of their own.
_DROP = r"[\s\p{Z}\p{C}\x{FFFD}]+"


def normalize_text(text: tf.Tensor, lower_case: bool, strip_accents: bool,
                   flavor: str = HUGGING_FACE) -> tf.Tensor:
    """Hugging Face BertNormalizer semantics on a string tensor (or Google's: see FLAVORS)."""
    text = tf.strings.regex_replace(text, r"[\t\n\r\p{Z}]", " ")
    text = tf.strings.regex_replace(text, FLAVORS[flavor].dropped, "")
    if lower_case:
        # tf.strings.lower applies the final-sigma rule; HF lowers character by character.
        if not FLAVORS[flavor].final_sigma:
            text = tf.strings.regex_replace(text, "Σ", "σ")
        text = tf.strings.lower(text, encoding="utf-8")
    if strip_accents:
        text = tf_text.normalize_utf8(text, "NFD")
        text = tf.strings.regex_replace(text, r"\p{Mn}", "")
    return text


class BertPreprocessor(tf.Module):
    """Saved as the `preprocessor/` SavedModel of an export; the vocab travels as an asset."""

    def __init__(self, vocab_file: str, lower_case: bool, strip_accents: bool,
                 special_ids: dict[str, int], flavor: str = HUGGING_FACE):
        super().__init__(name="bert_preprocessor")
        self._vocab_asset = tf.saved_model.Asset(vocab_file)
        init = tf.lookup.TextFileInitializer(
            self._vocab_asset, tf.string, tf.lookup.TextFileIndex.WHOLE_LINE,
            tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER)
        # Anonymous: a named table's shared_name is built from the Asset's repr, which holds a
        # memory address, so each export's graph bytes (and its fingerprint) would differ; an
        # anonymous table also cannot be shared by mistake between two models in one process.
        self._table = tf.lookup.StaticHashTable(init, default_value=-1,
                                                experimental_is_anonymous=True)
        self._lower_case = lower_case
        self._strip_accents = strip_accents
        self._flavor = flavor
        self._max_chars = FLAVORS[flavor].max_chars_per_word
        self._basic = BasicTokenizer(lower_case=False, normalization_form=None)
        self._wordpiece = tf_text.WordpieceTokenizer(
            self._table, token_out_type=tf.int64, unknown_token="[UNK]",
            max_bytes_per_word=4 * self._max_chars)
        self.cls_id = tf.Variable(special_ids["[CLS]"], dtype=tf.int32, trainable=False)
        self.sep_id = tf.Variable(special_ids["[SEP]"], dtype=tf.int32, trainable=False)
        self.pad_id = tf.Variable(special_ids["[PAD]"], dtype=tf.int32, trainable=False)
        self.vocab_file = self._vocab_asset

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize(self, strings):
        text = normalize_text(strings, self._lower_case, self._strip_accents, self._flavor)
        words = self._basic.tokenize(text)
        too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > self._max_chars
        words = words.with_flat_values(tf.where(too_long, "[UNK]", words.flat_values))
        pieces = self._wordpiece.tokenize(words)
        return tf.cast(pieces, tf.int32)

    def _wordpieces(self, words: tf.RaggedTensor):
        normalized = normalize_text(words.flat_values, self._lower_case, self._strip_accents,
                                    self._flavor)
        too_long = tf.strings.length(normalized, unit="UTF8_CHAR") > self._max_chars
        normalized = tf.where(too_long, "[UNK]", normalized)
        return self._wordpiece.tokenize_with_offsets(words.with_flat_values(normalized))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize_with_offsets(self, strings):
        """Pieces [batch, words, pieces] with byte offsets: each word's span in the original
        text, and each piece's span inside the normalized word. Words are split on the original
        text, so a control character inside a word splits it here (HF joins its halves)."""
        words, begin, end = tf_text.regex_split_with_offsets(
            strings, f"{_DROP}|{_KEEP_DELIM_NO_WHITESPACE_PATTERN}",
            _KEEP_DELIM_NO_WHITESPACE_PATTERN)
        pieces, piece_begin, piece_end = self._wordpieces(words)
        return {"pieces": tf.cast(pieces, tf.int32), "word_begin": begin, "word_end": end,
                "piece_begin": piece_begin, "piece_end": piece_end}

    @tf.function
    def bert_pack_inputs(self, segments, seq_length=DEFAULT_SEQ_LENGTH):
        seq_length = tf.cast(seq_length, tf.int32)
        flat = [s.merge_dims(-2, -1) if s.ragged_rank == 2 else s for s in segments]
        trimmer = tf_text.RoundRobinTrimmer(max_seq_length=seq_length - len(flat) - 1)
        trimmed = trimmer.trim(flat)
        ids, type_ids = tf_text.combine_segments(
            trimmed, start_of_sequence_id=self.cls_id, end_of_segment_id=self.sep_id)
        word_ids, mask = tf_text.pad_model_inputs(ids, seq_length, pad_value=self.pad_id)
        type_ids, _ = tf_text.pad_model_inputs(type_ids, seq_length, pad_value=0)
        return {
            "input_word_ids": tf.cast(word_ids, tf.int32),
            "input_mask": tf.cast(mask, tf.int32),
            "input_type_ids": tf.cast(type_ids, tf.int32),
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
