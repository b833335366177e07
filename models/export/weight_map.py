"""Checkpoint tensors -> BertWeights: BERT's modules in one table, named either way.

Hugging Face: `embeddings.word_embeddings.weight`, `encoder.layer.3.attention.self.query.weight`
(a Linear: [out, in]), LayerNorm `.weight/.bias` or, in older files, `.gamma/.beta`.
google-research/bert: `bert/embeddings/word_embeddings`,
`bert/encoder/layer_3/attention/self/query/kernel` ([in, out]), LayerNorm `gamma/beta`.
The prefix (`bert.`, `bert/`, none, ...) is whatever precedes the word-embedding table's name.
Every tensor not used (task heads, optimizer slots, buffers) is returned by name, so the export
can list it instead of dropping it silently.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from beam_embed.models.export.bert_encoder import BertLayerWeights, BertWeights
from beam_embed.models.export.checkpoint import CheckpointError, some
from beam_embed.models.export.xlmr_checkpoint import position_offset


@dataclasses.dataclass(frozen=True)
class Naming:
    sep: str
    layer: str  # the path of layer {i}
    suffixes: dict[str, tuple[str, ...]]  # parameter kind -> its spellings, tried in order
    transposed: bool  # dense kernels stored [out, in]

    def names(self, prefix: str, module: str, kind: str, layer: int | None = None) -> list[str]:
        path = module.replace("/", self.sep)
        if layer is not None:
            path = self.layer.format(i=layer) + self.sep + path
        return [prefix + path + (self.sep + s if s else "") for s in self.suffixes[kind]]


HF_NAMES = Naming(".", "encoder.layer.{i}", {
    "table": ("weight",), "kernel": ("weight",), "bias": ("bias",),
    "gamma": ("weight", "gamma"), "beta": ("bias", "beta")}, transposed=True)
GOOGLE_NAMES = Naming("/", "encoder/layer_{i}", {
    "table": ("",), "kernel": ("kernel",), "bias": ("bias",),
    "gamma": ("gamma",), "beta": ("beta",)}, transposed=False)

_WORD_TABLE = "embeddings/word_embeddings"
_QKV = ("attention/self/query", "attention/self/key", "attention/self/value")


@dataclasses.dataclass(frozen=True)
class Tensors:
    """A checkpoint's tensor names, a reader for one tensor, and the naming they follow."""
    names: tuple[str, ...]
    read: Callable[[str], np.ndarray]
    naming: Naming


@dataclasses.dataclass(frozen=True)
class MappedWeights:
    weights: BertWeights
    prefix: str  # what preceded the BERT names ("bert.", "bert/", "")
    unused: tuple[str, ...]  # every tensor name not read, sorted
    has_pooler: bool


def _prefix(tensors: Tensors, where: str) -> str:
    """What precedes the word-embedding table's name: the model's scope in the checkpoint."""
    tail = tensors.naming.names("", _WORD_TABLE, "table")[0]
    found = [n[: -len(tail)] for n in tensors.names
             if n.endswith(tail) and (n == tail or n[: -len(tail)].endswith(tensors.naming.sep))]
    if len(found) == 1:
        return found[0]
    if not found:
        raise CheckpointError(
            f"{where}: no BERT word-embedding table (a tensor named ...{tail}); the checkpoint "
            f"has: {some(tensors.names)}")
    raise CheckpointError(
        f"{where}: several BERT models in one checkpoint, under the prefixes {sorted(found)}; "
        "export one of them from a checkpoint holding only it")


class _Reader:
    """Reads tensors by module and kind, checks their shapes, remembers what it used."""

    def __init__(self, tensors: Tensors, prefix: str, where: str):
        self._t, self.prefix, self._where = tensors, prefix, where
        self._present = set(tensors.names)
        self.used: set[str] = set()

    def has(self, module: str, kind: str, layer: int | None = None) -> bool:
        names = self._t.naming.names(self.prefix, module, kind, layer)
        return any(n in self._present for n in names)

    def __call__(self, module: str, kind: str, shape: tuple, layer: int | None = None):
        names = self._t.naming.names(self.prefix, module, kind, layer)
        name = next((n for n in names if n in self._present), None)
        if name is None:
            raise CheckpointError(
                f"{self._where}: no tensor {' or '.join(names)}; is this a BERT checkpoint? "
                f"It has: {some(self._t.names)}")
        x = np.asarray(self._t.read(name)).astype(np.float32)
        transposed = kind == "kernel" and self._t.naming.transposed
        stored = shape[::-1] if transposed else shape  # the shape as the checkpoint stores it
        if len(x.shape) != len(stored) or any(e is not None and e != s
                                              for e, s in zip(stored, x.shape)):
            raise CheckpointError(
                f"{self._where}: {name} has shape {list(x.shape)} where the config implies "
                f"{[s if s is not None else '*' for s in stored]}; the config does not belong "
                "to these weights")
        if transposed:
            x = x.T
        self.used.add(name)
        return x

    def dense(self, module: str, n_in: int, n_out: int, layer: int | None = None):
        return (self(module, "kernel", (n_in, n_out), layer),
                self(module, "bias", (n_out,), layer))

    def norm(self, module: str, width: int, layer: int | None = None):
        return self(module, "gamma", (width,), layer), self(module, "beta", (width,), layer)


def map_weights(tensors: Tensors, config: dict, activation: str, where: str) -> MappedWeights:
    """BertWeights from a checkpoint's tensors; `config` uses Hugging Face's key names."""
    width, inner = config["hidden_size"], config["intermediate_size"]
    heads = config["num_attention_heads"]
    if width % heads:
        raise CheckpointError(
            f"{where}: hidden_size {width} is not a multiple of num_attention_heads {heads}")
    read = _Reader(tensors, _prefix(tensors, where), where)
    word = read(_WORD_TABLE, "table", (config["vocab_size"], width))
    # XLM-R's first rows precede its first position (xlmr_checkpoint.py): dropped here
    position = read("embeddings/position_embeddings", "table",
                    (config["max_position_embeddings"], width))[position_offset(config):]
    types = read("embeddings/token_type_embeddings", "table", (None, width))
    embed_norm = read.norm("embeddings/LayerNorm", width)
    layers = []
    for i in range(config["num_hidden_layers"]):
        qkv = [read.dense(module, width, width, i) for module in _QKV]
        attn_out = read.dense("attention/output/dense", width, width, i)
        attn_norm = read.norm("attention/output/LayerNorm", width, i)
        ffn_in = read.dense("intermediate/dense", width, inner, i)
        ffn_out = read.dense("output/dense", inner, width, i)
        ffn_norm = read.norm("output/LayerNorm", width, i)
        layers.append(BertLayerWeights(
            qkv_kernel=np.concatenate([kernel for kernel, _ in qkv], axis=1),
            qkv_bias=np.concatenate([bias for _, bias in qkv]),
            attn_out_kernel=attn_out[0], attn_out_bias=attn_out[1],
            attn_norm_gamma=attn_norm[0], attn_norm_beta=attn_norm[1],
            ffn_in_kernel=ffn_in[0], ffn_in_bias=ffn_in[1],
            ffn_out_kernel=ffn_out[0], ffn_out_bias=ffn_out[1],
            ffn_norm_gamma=ffn_norm[0], ffn_norm_beta=ffn_norm[1]))
    has_pooler = read.has("pooler/dense", "kernel") or read.has("pooler/dense", "bias")
    if has_pooler:
        pooler = read.dense("pooler/dense", width, width)
    else:  # e.g. a masked-LM checkpoint: no pooler was trained, so pooled_output is zeros
        pooler = (np.zeros((width, width), np.float32), np.zeros(width, np.float32))
    weights = BertWeights(
        word_embeddings=word, position_embeddings=position, type_embeddings=types,
        embed_norm_gamma=embed_norm[0], embed_norm_beta=embed_norm[1], layers=tuple(layers),
        pooler_kernel=pooler[0], pooler_bias=pooler[1], num_heads=heads, activation=activation,
        layer_norm_eps=float(config.get("layer_norm_eps", 1e-12)))
    unused = tuple(sorted(set(tensors.names) - read.used))
    return MappedWeights(weights, read.prefix, unused, has_pooler)
