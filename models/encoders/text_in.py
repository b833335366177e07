"""Text-in embedders: TF2 SavedModels that take a batch of strings and return one float vector
per string (Universal Sentence Encoder v4, nnlm-en-dim128/2, Wiki-words).

The model is called on the texts themselves: its own tokenization is inside it. The units this
encoder reports are the text's whitespace-separated words, each kept with the whitespace after
it, so that joining a text's units gives back exactly the text the model sees; they are what
`num_tokens` counts. With no --max-seq-length (the default) a text is never truncated; with one,
the model sees the text up to that many words (truncated and flagged, or in windows with
--long-text chunk). One vector per text: the pooling is `default`, there are no layers and no
token vectors.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from beam_embed.models.encoder import Encoder, Units, Words
from beam_embed.models.encoders.detect import call_functions, callable_description
from beam_embed.models.hub_loader import load_once
from beam_embed.models.pooling import EncoderOutput

_SPACES = r"[\s\p{Z}]+"
# When a signature returns several float [batch, D] tensors, the one TF-Hub's text embedders name
_PREFERRED_OUTPUTS = ("default", "outputs", "output_0")


def _strings(spec) -> bool:
    return getattr(spec, "dtype", None) == tf.string and spec.shape.rank == 1


def _vector_key(outputs):
    """Where the [batch, D] float vectors are in a function's outputs: () for the outputs
    themselves, (key,) for an entry of a dict; None when there is no such output."""
    if hasattr(outputs, "dtype"):
        return () if outputs.dtype.is_floating and outputs.shape.rank == 2 else None
    if not isinstance(outputs, dict):
        return None
    keys = [k for k, v in outputs.items() if _vector_key(v) == ()]
    preferred = [k for k in _PREFERRED_OUTPUTS if k in keys]
    return (keys[0],) if len(keys) == 1 else (preferred[0],) if preferred else None


def text_call(loaded) -> Callable[[tf.Tensor], tf.Tensor] | None:
    """strings [batch] -> vectors [batch, D], through the object's own call when it takes one
    string tensor, else its serving_default signature; None when it has neither."""
    for fn in call_functions(loaded):
        args, kwargs = fn.structured_input_signature
        key = _vector_key(fn.structured_outputs)
        if not kwargs and len(args) == 1 and _strings(args[0]) and key is not None:
            return lambda s: _pick(loaded(s), key)
    signature = getattr(loaded, "signatures", {}).get("serving_default")
    if signature is not None:
        args, kwargs = signature.structured_input_signature
        key = _vector_key(signature.structured_outputs)
        if not args and len(kwargs) == 1 and _strings(next(iter(kwargs.values()))) and \
                key is not None:
            name = next(iter(kwargs))
            return lambda s: _pick(signature(**{name: s}), key)
    return None


def _pick(outputs, key: tuple):
    return outputs[key[0]] if key else outputs


def units_with_offsets(texts: list[str]):
    """(units [batch, words] strings, word begin, word end): each unit is a word with the
    whitespace after it (the first also with any before it), so the units join to the text;
    begin/end are the byte span of the word itself."""
    strings = tf.constant(texts, dtype=tf.string)
    _, begin, end = tf_text.regex_split_with_offsets(strings, _SPACES)
    splits = begin.row_splits.numpy()
    starts = begin.flat_values.numpy().copy()
    stops = np.append(starts[1:], 0)
    filled = splits[1:] > splits[:-1]
    starts[splits[:-1][filled]] = 0
    stops[splits[1:][filled] - 1] = tf.strings.length(strings).numpy()[filled]
    rows = tf.gather(strings, begin.value_rowids())
    units = tf.strings.substr(rows, starts, stops - starts)
    return tf.RaggedTensor.from_row_splits(units, splits), begin, end


class HubTextEncoder(Encoder):
    kind = "text_in"
    special_tokens = 0

    def __init__(self, handle: str, max_seq_length: int | None = None):
        loaded = load_once(handle)
        self._call = text_call(loaded)
        if self._call is None:
            raise ValueError(f"{handle!r} is not a text-in embedder: it is "
                             f"{callable_description(loaded)} and has no serving_default "
                             "signature taking one string tensor [batch] to float [batch, D]")
        self.max_seq_length = max_seq_length
        self.num_layers = 0
        probe = self._vectors(tf.constant(["probe", "a second probe"]))
        if probe.ndim != 2 or probe.shape[0] != 2:
            raise ValueError(f"{handle!r} returned shape {list(probe.shape)} for 2 texts; a "
                             "text-in embedder returns [batch, D]")
        self.width = int(probe.shape[1])

    @classmethod
    def from_spec(cls, spec) -> HubTextEncoder:
        return cls(spec.encoder, spec.max_seq_length)

    @classmethod
    def recognize(cls, handle: str, found) -> dict | None:
        if not any(g.tf2 for g in found.graphs):
            return None
        return {} if text_call(load_once(handle)) is not None else None

    def _vectors(self, strings: tf.Tensor) -> np.ndarray:
        return np.asarray(self._call(strings), np.float32)

    def tokenize(self, texts: list[str]) -> Units:
        return Units.of(units_with_offsets(texts)[0])

    def tokenize_with_offsets(self, texts: list[str]) -> Words:
        return Words.of(*units_with_offsets(texts))

    def encode(self, units: Units, layers=(), shape=None) -> EncoderOutput:
        """The model on the texts its units spell (the whole text, or its first words)."""
        lengths = units.lengths
        mask = np.arange(lengths.max() if len(lengths) else 0)[None, :] < lengths[:, None]
        vectors = self._vectors(tf.constant([b"".join(row) for row in units.rows()], tf.string))
        return EncoderOutput(layers={}, mask=mask.astype(np.float32), pooled={"default": vectors})
