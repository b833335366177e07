"""A Hugging Face BERT folder read by keras-hub: `BertBackbone.from_preset(folder)` and its
`BertTokenizer`, run as a Keras 3 model on the TensorFlow backend, without `export-model`.

The folder is recognized from its own files (config.json saying `model_type: bert`, beside
model.safetensors), not from a SavedModel. Every layer's output is read through one Keras
model built on the backbone's graph (the backbone itself returns only the last layer), so
`mean@-2` works as for the `bert` kind. keras-hub is an optional dependency
(the `keras-hub` extra). The tokenizer is keras-hub's, stripping accents as
Hugging Face's BertTokenizer does (tokenizer_config.json's strip_accents, else with
lower-casing). keras-hub computes GELU with its tanh approximation whatever `hidden_act` says
(an `export-model` export computes the erf form): vectors agree with the export's to a cosine
above 0.9999. keras-hub's tokenizer gives no word offsets, so there are no token vectors.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading

import numpy as np
import tensorflow as tf

from beam_embed.models.encoder import Encoder, Units
from beam_embed.models.encoders.bert import SPECIAL_TOKENS_PER_TEXT
from beam_embed.models.fixed_shapes import bucket_length
from beam_embed.models.pooling import EncoderOutput
from beam_embed.process.versions import install_command

CONFIG, WEIGHTS, VOCAB = "config.json", "model.safetensors", "vocab.txt"
# The files that decide the vectors: hashed into the fingerprint, in this order.
FINGERPRINTED = (CONFIG, WEIGHTS, VOCAB, "tokenizer_config.json")
_LOADED: dict[str, tuple] = {}  # folder -> (layers model, tokenizer): loaded once per process
_LOCK = threading.Lock()


def _read_config(folder: str) -> dict | None:
    path = os.path.join(folder, CONFIG)
    if not (tf.io.gfile.exists(path) and tf.io.gfile.exists(os.path.join(folder, WEIGHTS))):
        return None
    try:
        with tf.io.gfile.GFile(path) as f:
            config = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return config if isinstance(config, dict) else None


def _keras_hub():
    """keras_hub on Keras 3's TensorFlow backend, or a one-line ValueError saying what to do."""
    if "keras" not in sys.modules:
        os.environ["KERAS_BACKEND"] = "tensorflow"  # read once, when Keras is first imported
    try:
        import keras
        import keras_hub
    except ImportError as e:
        raise ValueError(f"the keras_hub encoder kind needs keras-hub ({e}): "
                         f"{install_command('keras-hub')}") from e
    if keras.backend.backend() != "tensorflow":
        raise ValueError(f"the keras_hub encoder kind runs on Keras' TensorFlow backend, but "
                         f"Keras was loaded with {keras.backend.backend()!r}; unset "
                         "KERAS_BACKEND or set it to tensorflow")
    return keras, keras_hub


def _strip_accents(folder: str) -> bool:
    """Hugging Face's BertTokenizer rule: tokenizer_config.json's strip_accents when set, else
    whether it lower-cases (do_lower_case, true unless said)."""
    path = os.path.join(folder, "tokenizer_config.json")
    config = {}
    if tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path) as f:
            config = json.load(f)
    value = config.get("strip_accents")
    return bool(config.get("do_lower_case", True) if value is None else value)


def load(folder: str):
    """(a Keras model: inputs -> every transformer layer's output, the tokenizer), loaded once
    per process."""
    with _LOCK:
        if folder not in _LOADED:
            keras, keras_hub = _keras_hub()
            backbone = keras_hub.models.BertBackbone.from_preset(folder, dtype="float32")
            tokenizer = keras_hub.models.BertTokenizer.from_preset(
                folder, strip_accents=_strip_accents(folder))
            layers = keras.Model(backbone.input,
                                 [layer.output for layer in backbone.transformer_layers])
            _LOADED[folder] = (layers, tokenizer)
        return _LOADED[folder]


class KerasHubBertEncoder(Encoder):
    kind = "keras_hub"
    special_tokens = SPECIAL_TOKENS_PER_TEXT

    def __init__(self, folder: str, max_seq_length: int = 512):
        model, tokenizer = load(folder)
        self.max_seq_length = max_seq_length
        self._cls = int(tokenizer.cls_token_id)
        self._sep = int(tokenizer.sep_token_id)
        self._pad = int(tokenizer.pad_token_id)
        # in a graph: called eagerly, keras-hub hands back Python lists
        self._tokenize = tf.function(tokenizer.tokenize,
                                     input_signature=[tf.TensorSpec([None], tf.string)])
        spec = tf.TensorSpec([None, None], tf.int32)

        @tf.function(input_signature=[spec, spec])
        def forward(ids, mask):
            return model({"token_ids": ids, "segment_ids": tf.zeros_like(ids),
                          "padding_mask": mask}, training=False)

        self._forward = forward
        self.num_layers = len(model.outputs)
        self.width = int(model.outputs[-1].shape[-1])

    @classmethod
    def from_spec(cls, spec) -> KerasHubBertEncoder:
        return cls(spec.encoder, spec.max_seq_length)

    @classmethod
    def recognize(cls, handle: str, found) -> dict | None:
        config = _read_config(found.folder)
        if config is None or config.get("model_type") != "bert":
            return None
        _keras_hub()  # a folder of this kind without keras-hub installed: say what to install
        return {}

    @classmethod
    def fingerprint(cls, encoder: str, preprocessor: str | None = None) -> str:
        """sha256 over the folder's config, weights and vocabulary (no SavedModel to hash)."""
        digest = hashlib.sha256()
        for name in FINGERPRINTED:
            path = os.path.join(encoder, name)
            if tf.io.gfile.exists(path):
                with tf.io.gfile.GFile(path, "rb") as f:
                    while chunk := f.read(1 << 24):
                        digest.update(chunk)
        return digest.hexdigest()[:16]

    @classmethod
    def earlier_fingerprints(cls, encoder: str, preprocessor: str | None = None
                             ) -> tuple[str, ...]:
        return ()  # its fingerprint always covered its files

    @classmethod
    def max_positions(cls, spec) -> int | None:
        config = _read_config(spec.encoder) or {}
        positions = config.get("max_position_embeddings")
        return int(positions) if isinstance(positions, int) else None

    def tokenize(self, texts: list[str]) -> Units:
        """WordPiece ids per text, without [CLS]/[SEP]."""
        return Units.of(self._tokenize(tf.constant(texts, dtype=tf.string)))

    def tokenize_with_offsets(self, texts: list[str]):
        raise ValueError("keras_hub encoders give no word offsets; --granularity token needs "
                         "an export (`beam-embed export-model`)")

    def encode(self, pieces: Units, layers: tuple[int, ...],
               shape: tuple[int, int] | None = None) -> EncoderOutput:
        """[CLS] pieces [SEP], padded to the batch's (bucketed) longest length."""
        lengths = pieces.lengths
        longest = int(lengths.max()) if len(lengths) else 0
        seq = bucket_length(longest + SPECIAL_TOKENS_PER_TEXT, self.max_seq_length)
        kept = np.minimum(lengths, seq - SPECIAL_TOKENS_PER_TEXT)
        rows = len(lengths)
        ids = np.full((rows, seq), self._pad, np.int32)
        ids[:, 0] = self._cls
        ids[:, 1:-1] = pieces.padded(seq - SPECIAL_TOKENS_PER_TEXT, self._pad)
        ids[np.arange(rows), kept + 1] = self._sep
        mask = (np.arange(seq)[None, :] < (kept + SPECIAL_TOKENS_PER_TEXT)[:, None])
        outputs = self._forward(tf.constant(ids), tf.constant(mask.astype(np.int32)))
        return EncoderOutput(layers={k: outputs[k].numpy() for k in layers},
                             mask=mask.astype(np.float32), pooled={})
