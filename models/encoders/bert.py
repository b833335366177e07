"""A TF-Hub BERT encoder + preprocessor pair behind one small interface.

Works for TF-Hub's own models (`bert_en_uncased_L-12_H-768_A-12/4` with
`bert_en_uncased_preprocess/3`) and for `export-model` output alike: only the contract in
`../shared/DESIGN.md` is used. Loaded once; every batch goes through the same loaded graphs.
"""

from __future__ import annotations

import bisect

import numpy as np
import tensorflow as tf

from models.hub_loader import load_handle
from models.pooling import LAYERED, POOLERS, EncoderOutput

# Batches are packed to their own longest length, rounded up to one of these shapes (few shapes:
# few retraces, little padding).
SEQ_BUCKETS = (8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
SPECIAL_TOKENS_PER_TEXT = 2  # [CLS] ... [SEP]


def bucket_length(longest: int, max_seq_length: int) -> int:
    i = bisect.bisect_left(SEQ_BUCKETS, longest)
    return min(SEQ_BUCKETS[i] if i < len(SEQ_BUCKETS) else longest, max_seq_length)


class HubBertEncoder:
    kind = "bert"
    special_tokens = SPECIAL_TOKENS_PER_TEXT

    def __init__(self, encoder: str, preprocessor: str, max_seq_length: int = 512):
        self._preprocessor = load_handle(preprocessor)
        self._encoder = load_handle(encoder)
        self.max_seq_length = max_seq_length
        self._vocab = None
        probe = self._run(tf.ragged.constant([[1, 2]], dtype=tf.int32), 4)
        self.num_layers = len(probe["encoder_outputs"])
        self.width = int(probe["sequence_output"].shape[-1])

    @classmethod
    def from_spec(cls, spec) -> "HubBertEncoder":
        return cls(spec.encoder, spec.preprocessor, spec.max_seq_length)

    @staticmethod
    def pooling_registry():
        return POOLERS, LAYERED

    def tokenize(self, texts: list[str]) -> tf.RaggedTensor:
        """WordPiece ids per text, [batch, pieces], without [CLS]/[SEP]."""
        tokens = self._preprocessor.tokenize(tf.constant(texts, dtype=tf.string))
        return tokens.merge_dims(-2, -1) if tokens.ragged_rank == 2 else tokens

    def tokenize_with_offsets(self, texts: list[str]):
        """Pieces [batch, words, pieces] with each word's byte span in the original text."""
        if not hasattr(self._preprocessor, "tokenize_with_offsets"):
            raise ValueError("this preprocessor has no tokenize_with_offsets; token-level output "
                             "needs an export made by `beam-embed export-model`")
        out = self._preprocessor.tokenize_with_offsets(tf.constant(texts, dtype=tf.string))
        return out["pieces"], out["word_begin"], out["word_end"]

    def vocabulary(self) -> list[str]:
        """id -> piece string, from the vocab file saved inside the preprocessor."""
        if self._vocab is None:
            path = self._preprocessor.vocab_file.asset_path.numpy().decode()
            with tf.io.gfile.GFile(path) as f:
                self._vocab = [line.rstrip("\n") for line in f]
        return self._vocab

    def _run(self, pieces: tf.RaggedTensor, seq_length: int) -> dict:
        # The contract's packer takes tokenize()'s [batch, words, pieces]: one "word" per row.
        words = tf.RaggedTensor.from_row_splits(
            pieces, tf.range(pieces.nrows(out_type=tf.int64) + 1))
        packed = self._preprocessor.bert_pack_inputs([words], seq_length=tf.constant(seq_length))
        return {**self._encoder(packed), "input_mask": packed["input_mask"]}

    def encode(self, pieces: tf.RaggedTensor, layers: tuple[int, ...]) -> EncoderOutput:
        """Runs the encoder on already-tokenized, already-short-enough rows."""
        longest = int(tf.reduce_max(pieces.row_lengths())) if pieces.nrows() else 0
        seq_length = bucket_length(longest + SPECIAL_TOKENS_PER_TEXT, self.max_seq_length)
        out = self._run(pieces, seq_length)
        all_layers = out["encoder_outputs"]
        return EncoderOutput(
            layers={k: all_layers[k].numpy() for k in layers},
            mask=out["input_mask"].numpy().astype(np.float32),
            pooled={"pooled_output": out["pooled_output"].numpy()},
        )
