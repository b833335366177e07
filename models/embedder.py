"""Texts -> one vector per pooling, with truncation or chunking of long texts.

Shared by the Beam job's ModelHandler and the in-process commands (eval, search): the encoder
runs once per batch and every pooling reads from that one pass.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from models.pooling import EncoderOutput, Pooling, l2_normalize

LONG_TEXT_MODES = ("truncate", "chunk")


@dataclasses.dataclass(frozen=True)
class Embedded:
    vectors: dict[str, np.ndarray]  # column -> [batch, width] float32
    num_tokens: np.ndarray  # [batch] int32, real tokens incl. specials, before truncation
    truncated: np.ndarray  # [batch] bool


def _windows(row: np.ndarray, size: int, stride: int) -> list[np.ndarray]:
    starts = range(0, max(len(row) - size, 0) + stride, stride)
    return [row[s:s + size] for s in starts if s == 0 or s + size - stride < len(row)]


class Embedder:
    def __init__(self, encoder, poolings: tuple[Pooling, ...], normalize: bool = False,
                 long_text: str = "truncate", chunk_overlap: int = 32):
        if long_text not in LONG_TEXT_MODES:
            raise ValueError(f"unknown long-text mode {long_text!r}; expected one of "
                             f"{list(LONG_TEXT_MODES)}")
        for p in poolings:
            if p.layer is not None and not -encoder.num_layers <= p.layer < encoder.num_layers:
                raise ValueError(
                    f"pooling {p.spec!r} asks for layer {p.layer}, but the model has "
                    f"{encoder.num_layers} layers (valid: {-encoder.num_layers}..{encoder.num_layers - 1})")
        self.encoder = encoder
        self.poolings = poolings
        self.normalize = normalize
        self.long_text = long_text
        self._layers = tuple(sorted({p.layer if p.layer < 0 else p.layer - encoder.num_layers
                                     for p in poolings if p.layer is not None}))
        self._specials = encoder.special_tokens  # BERT: [CLS] and [SEP]; ELMo: none
        self._room = encoder.max_seq_length - self._specials
        self._stride = max(self._room - min(chunk_overlap, self._room // 4), 1)

    @property
    def columns(self) -> list[str]:
        return [p.column for p in self.poolings]

    def _pool(self, out: EncoderOutput) -> dict[str, np.ndarray]:
        return {p.column: np.asarray(p(out), np.float32) for p in self.poolings}

    def _encode(self, rows: tf.RaggedTensor) -> dict[str, np.ndarray]:
        layers = {}
        out = self.encoder.encode(rows, self._layers)
        for p in self.poolings:  # pooling names negative layers; the encoder may key either way
            if p.layer is not None and p.layer >= 0:
                layers[p.layer] = out.layers[p.layer - self.encoder.num_layers]
        out = dataclasses.replace(out, layers={**out.layers, **layers})
        return self._pool(out)

    def embed(self, texts: list[str]) -> Embedded:
        pieces = self.encoder.tokenize(texts)
        lengths = pieces.row_lengths().numpy()
        num_tokens = (lengths + self._specials).astype(np.int32)
        truncated = lengths > self._room
        if self.long_text == "chunk" and truncated.any():
            vectors = self._embed_chunked(pieces, truncated)
            truncated = np.zeros_like(truncated)
        else:
            vectors = self._encode(pieces[:, :self._room])
        if self.normalize:
            vectors = {k: l2_normalize(v) for k, v in vectors.items()}
        return Embedded(vectors=vectors, num_tokens=num_tokens, truncated=truncated)

    def _embed_chunked(self, pieces: tf.RaggedTensor, long_rows: np.ndarray) -> dict:
        """Long rows become overlapping windows; their vectors are averaged, weighted by the
        number of tokens in each window."""
        rows, owner, weight = [], [], []
        for i, row in enumerate(pieces.numpy()):
            parts = _windows(row, self._room, self._stride) if long_rows[i] else [row]
            rows += parts
            owner += [i] * len(parts)
            weight += [len(p) + self._specials for p in parts]
        windows = self._encode(tf.RaggedTensor.from_row_lengths(
            np.concatenate(rows), [len(r) for r in rows]))
        owner, weight = np.asarray(owner), np.asarray(weight, np.float64)
        combined = {}
        for column, v in windows.items():
            total = np.zeros((len(long_rows), v.shape[1]), np.float64)
            np.add.at(total, owner, v * weight[:, None])
            norm = np.bincount(owner, weights=weight, minlength=len(long_rows))
            combined[column] = (total / norm[:, None]).astype(np.float32)
        return combined
