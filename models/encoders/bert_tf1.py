"""A TF1 Hub BERT module (`google/bert_uncased_L-12_H-768_A-12/1` and its cased and
multilingual siblings): the original TF-Hub BERTs, loaded with an empty tag set.

The module has a `tokens` signature (int32 `input_ids`, `input_mask`, `segment_ids` [batch, seq]
-> `pooled_output` [batch, H], `sequence_output` [batch, seq, H]) and a `tokenization_info`
signature (`vocab_file`, `do_lower_case`). The preprocessor is built in memory from the module's
own vocabulary asset and `do_lower_case`, tokenizing as google-research/bert's tokenization.py
(the module's own tokenizer; models/bert_preprocessor.py's GOOGLE flavor: lower-casing also
strips accents), so packing, batch planning and pooling are the TF2 BERT encoder's. Only the
last layer is exposed, and the graph computes in fp32.
"""

from __future__ import annotations

import os

import tensorflow as tf

from beam_embed.models.bert_preprocessor import GOOGLE, BertPreprocessor
from beam_embed.models.encoder import WordPieces
from beam_embed.models.encoders.bert import HubBertEncoder
from beam_embed.models.hub_loader import load_once, resolve_handle

SIGNATURES = ("tokens", "tokenization_info")
SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[PAD]")


def load_module(handle: str):
    module = load_once(handle, tags=[])
    missing = [s for s in SIGNATURES if s not in module.signatures]
    if missing:
        raise ValueError(f"{handle!r} is not a TF1 Hub BERT module: it lacks the signatures "
                         f"{missing}; expected {list(SIGNATURES)}")
    return module


def positions(module) -> int | None:
    """The rows of the module's position embedding table: the longest input it takes."""
    table = [v for v in module.variables
             if v.name.split(":")[0].endswith("position_embeddings") and len(v.shape) == 2]
    return int(table[0].shape[0]) if len(table) == 1 else None


def vocab_path(handle: str, reported: str) -> str:
    """The vocabulary inside the module folder: `tokenization_info` reports the path the asset
    had when the module was built, which may be another machine's."""
    inside = os.path.join(resolve_handle(handle), "assets", os.path.basename(reported))
    for path in (inside, reported):
        if tf.io.gfile.exists(path):
            return path
    raise ValueError(f"the vocabulary of TF1 Hub BERT module {handle!r} is missing: "
                     f"tokenization_info names {reported!r}, and {inside!r} does not exist")


def preprocessor(handle: str, module) -> BertPreprocessor:
    info = module.signatures["tokenization_info"]()
    path = vocab_path(handle, info["vocab_file"].numpy().decode())
    lower_case = bool(info["do_lower_case"].numpy())
    with tf.io.gfile.GFile(path) as f:
        index = {line.rstrip("\n"): i for i, line in enumerate(f)}
    missing = [t for t in SPECIAL_TOKENS if t not in index]
    if missing:
        raise ValueError(f"the vocabulary {path!r} of {handle!r} lacks {missing}")
    return BertPreprocessor(path, lower_case, lower_case, {t: index[t] for t in SPECIAL_TOKENS},
                            flavor=GOOGLE)


class HubBertTf1Encoder(HubBertEncoder):
    kind = "bert_tf1"
    warms_up = False  # one TF1 module, loaded by its own rules (tags, signatures)

    def __init__(self, handle: str, max_seq_length: int = 512):
        module = load_module(handle)
        longest = positions(module)
        if longest is not None and max_seq_length > longest:
            raise ValueError(f"--max-seq-length {max_seq_length} is longer than the "
                             f"{longest} positions of TF1 Hub BERT module {handle!r}; give "
                             f"--max-seq-length {longest} or less")
        tokens = module.signatures["tokens"]

        def forward(packed: dict) -> dict:
            out = tokens(input_ids=tf.constant(packed["input_word_ids"]),
                         input_mask=tf.constant(packed["input_mask"]),
                         segment_ids=tf.constant(packed["input_type_ids"]))
            return {"sequence_output": out["sequence_output"],
                    "pooled_output": out["pooled_output"],
                    "encoder_outputs": [out["sequence_output"]]}

        self.precision = "fp32"
        self._setup(preprocessor(handle, module), forward, max_seq_length)

    @classmethod
    def from_spec(cls, spec) -> HubBertTf1Encoder:
        return cls(spec.encoder, spec.max_seq_length)

    @classmethod
    def recognize(cls, handle: str, found) -> dict | None:
        graph = found.graph(())
        if graph is None or not all(s in graph.signatures for s in SIGNATURES):
            return None
        longest = positions(load_module(handle))
        return {} if longest is None else {"max_seq_length": longest}

    @classmethod
    def wordpieces(cls, spec) -> WordPieces:
        pre = preprocessor(spec.encoder, load_module(spec.encoder))
        with tf.io.gfile.GFile(pre.vocab_file.asset_path.numpy().decode()) as f:
            vocab = tuple(line.rstrip("\n") for line in f)
        return WordPieces(vocab, pre)
