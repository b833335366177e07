"""A TF-Hub ELMo module (`google/elmo/3`: TF1 Hub format, loaded with `tags=[]`).

By default texts are split into words *and punctuation* (tensorflow-text's regex splitter:
every punctuation or symbol character is a token of its own, "cell." -> "cell", ".") and fed to the `tokens` signature with
`sequence_len`; `signature="default"` keeps the module's own split on spaces, where punctuation
sticks to words. Outputs: `word_emb`, `lstm_outputs1`, `lstm_outputs2`, `elmo` per token and
`default` (the module's mean of `elmo` over real tokens).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from beam_embed.models.encoder import Encoder, Units, Words
from beam_embed.models.encoders import ELMO_SIGNATURES as SIGNATURES
from beam_embed.models.fixed_shapes import bucket_length
from beam_embed.models.hub_loader import HandleError, is_remote, load_once
from beam_embed.models.pooling import ELMO_OUTPUTS, EncoderOutput

_PUNCTUATION = r"[\p{P}\p{S}]"
_WORD_DELIMS = r"[\s\p{Z}\p{C}]+|" + _PUNCTUATION


class HubElmoEncoder(Encoder):
    kind = "elmo"
    special_tokens = 0

    def __init__(self, handle: str, max_seq_length: int = 512, signature: str = "tokens"):
        if signature not in SIGNATURES:
            raise ValueError(f"unknown ELMo signature {signature!r}; expected one of "
                             f"{list(SIGNATURES)}")
        try:
            module = load_once(handle, tags=[])
        except HandleError as e:
            if is_remote(handle) or not tf.io.gfile.isdir(handle):
                raise
            raise ValueError(f"{handle!r} is not an ELMo module (a TF1 Hub module loads with "
                             f"an empty tag set; this one does not); for a BERT encoder pass "
                             f"--preprocessor too") from e
        missing = [s for s in SIGNATURES if s not in module.signatures]
        if missing:
            raise ValueError(f"{handle!r} is not an ELMo module: it lacks the signatures "
                             f"{missing}; expected {list(SIGNATURES)}")
        self._module = module
        self._signature = signature
        self.max_seq_length = max_seq_length
        probe = self._run(Units(np.array([b"probe", b"."], object), np.array([2])), 2)
        self.num_layers = len(ELMO_OUTPUTS)
        self.width = int(probe["elmo"].shape[-1])

    @classmethod
    def from_spec(cls, spec) -> HubElmoEncoder:
        options = dict(spec.options)
        return cls(spec.encoder, spec.max_seq_length, options.get("signature", "tokens"))

    @classmethod
    def recognize(cls, handle: str, found) -> dict | None:
        graph = found.graph(())
        if graph is None or not all(s in graph.signatures for s in SIGNATURES):
            return None
        return {} if "sequence_len" in graph.signatures["tokens"].inputs else None

    def tokenize(self, texts: list[str]) -> Units:
        """Words per text (bytes)."""
        return self.tokenize_with_offsets(texts).units

    def tokenize_with_offsets(self, texts: list[str]) -> Words:
        if self._signature == "default":  # the module's own split: on single spaces
            return _space_words(texts)
        strings = tf.constant(texts, dtype=tf.string)
        return Words.of(*tf_text.regex_split_with_offsets(strings, _WORD_DELIMS, _PUNCTUATION))

    def _run(self, words: Units, seq_length: int) -> dict:
        if self._signature == "default":
            text = [b" ".join(row) for row in words.rows()]
            return self._module.signatures["default"](tf.constant(text, tf.string))
        tokens = tf.constant(words.padded(seq_length, b""), tf.string)
        lengths = tf.constant(words.lengths, tf.int32)
        return self._module.signatures["tokens"](tokens=tokens, sequence_len=lengths)

    def encode(self, words: Units, layers=()) -> EncoderOutput:
        lengths = words.lengths
        longest = int(lengths.max()) if len(lengths) else 0
        out = self._run(words, bucket_length(max(longest, 1), max(self.max_seq_length, longest)))
        seq = int(out["elmo"].shape[1])
        mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.float32)
        return EncoderOutput(layers={name: out[name].numpy() for name in ELMO_OUTPUTS},
                             mask=mask, pooled={"default": out["default"].numpy()})


def _space_words(texts: list[str]) -> Words:
    """Each text split on single spaces (empty words dropped), with each word's byte span."""
    words, begin, counts = [], [], []
    for text in texts:
        pos, before = 0, len(words)
        for word in text.encode("utf-8").split(b" "):
            if word:
                words.append(word)
                begin.append(pos)
            pos += len(word) + 1
        counts.append(len(words) - before)
    values = np.array(words, object)
    starts = np.array(begin, np.int64)
    units = Units(values, np.array(counts, np.int64))
    return Words(units, units.lengths, starts, starts + np.array([len(w) for w in words], np.int64))
