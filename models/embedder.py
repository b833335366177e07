"""Texts -> one vector per pooling, with truncation or chunking of long texts.

Shared by the Beam job's ModelHandler and the in-process commands (eval, search): the encoder
runs once per batch and every pooling reads from that one pass.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import tensorflow as tf

from beam_embed.models.encoder import Units
from beam_embed.models.encoder_choices import LONG_TEXT_MODES
from beam_embed.models.pooling import EncoderOutput, Pooling, l2_normalize


def configure_threads(intra_op: int = 0, inter_op: int = 0) -> bool:
    """Sizes this process's TensorFlow thread pools (0 keeps TF's default: one thread per core).

    Several Beam worker processes on one machine should split the cores between them (each
    process's oneDNN matmuls use its intra-op pool); one process uses them all. TensorFlow fixes
    the pools when it runs its first op, so this must come before the model loads; afterwards it
    changes nothing and returns False when the pools differ from the request."""
    threading = tf.config.threading
    wanted = {"intra": intra_op, "inter": inter_op}
    current = {"intra": threading.get_intra_op_parallelism_threads(),
               "inter": threading.get_inter_op_parallelism_threads()}
    if all(not n or current[k] == n for k, n in wanted.items()):
        return True
    try:
        if intra_op:
            threading.set_intra_op_parallelism_threads(intra_op)
        if inter_op:
            threading.set_inter_op_parallelism_threads(inter_op)
        return True
    except RuntimeError as e:  # the runtime is already up: keep its pools
        logging.getLogger(__name__).info(
            "TensorFlow thread pools already fixed (%s); asked intra=%s inter=%s", e, intra_op,
            inter_op)
        return False


@dataclasses.dataclass(frozen=True)
class Embedded:
    vectors: dict[str, np.ndarray]  # column -> [batch, width] float32
    num_tokens: np.ndarray  # [batch] int32, real tokens incl. specials, before truncation
    truncated: np.ndarray  # [batch] bool


def _windows(row: np.ndarray, size: int, stride: int) -> list[np.ndarray]:
    starts = range(0, max(len(row) - size, 0) + stride, stride)
    return [row[s:s + size] for s in starts if s == 0 or s + size - stride < len(row)]


def encoder_lanes() -> int:
    """Encoder calls worth running at once in this process: 2 when TensorFlow's inter-op pool
    (which runs a call's ops) has 2+ threads, else 1 (they would only queue). Two independent
    calls keep both cores of a small machine busy through the ops that parallelize poorly (small
    ones, softmax, the Python between calls): measured +30% over one call at a time on 2 cores.
    More lanes would cut batches into smaller, less efficient matmuls."""
    inter = tf.config.threading.get_inter_op_parallelism_threads() or os.cpu_count() or 1
    return 2 if inter >= 2 else 1


class Embedder:
    def __init__(self, encoder, poolings: tuple[Pooling, ...], normalize: bool = False,
                 long_text: str = "truncate", chunk_overlap: int = 32,
                 truncate_dim: int | None = None, prompt: str = "",
                 prompt_in_pooling: bool = True):
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
        self.truncate_dim = truncate_dim
        self.prompt = prompt  # prepended to each text, as sentence-transformers' encode() does
        self.long_text = long_text
        self._layers = tuple(sorted({p.layer if p.layer < 0 else p.layer - encoder.num_layers
                                     for p in poolings if p.layer is not None}))
        self._specials = encoder.special_tokens  # BERT: [CLS] and [SEP]; ELMo: none
        # sentence-transformers' Pooling with include_prompt false leaves out the first
        # `_unpooled` positions: [CLS] and the prompt's tokens, as the prompt alone tokenizes
        self._unpooled = (0 if prompt_in_pooling or not prompt else
                          int(encoder.tokenize([prompt]).lengths[0]) + min(self._specials, 1))
        # units a text may have; None: no limit (text-in embedders read the whole text)
        self._room = (None if encoder.max_seq_length is None
                      else encoder.max_seq_length - self._specials)
        self._stride = (None if self._room is None
                        else max(self._room - min(chunk_overlap, self._room // 4), 1))
        self._lanes = encoder_lanes() if encoder.plans and encoder.parallel_calls else 1
        self._executor = None

    @property
    def columns(self) -> list[str]:
        return [p.column for p in self.poolings]

    def _pool(self, out: EncoderOutput) -> dict[str, np.ndarray]:
        """Each pooling's vectors, through the model's head when it has one (a window of a
        chunked text is a text to it: the head is not linear, so it runs before averaging)."""
        head = self.encoder.head or (lambda x: x)
        return {p.column: np.asarray(head(np.asarray(p(out), np.float32)), np.float32)
                for p in self.poolings}

    def _encode(self, rows: Units) -> dict[str, np.ndarray]:
        """Pooled vectors of `rows`, in encoder calls grouped by the encoder's plan (BERT: rows of
        similar exact length, each group packed to its own length) when it has one."""
        if not self.encoder.plans:
            return self._encode_group(rows)
        lengths = rows.lengths
        groups = self.encoder.plan(lengths, self._lanes)  # [(row indices, shape to run them in)]
        if len(groups) == 1:
            return self._encode_group(rows, groups[0][1])
        groups.sort(key=lambda g: -g[1][0] * g[1][1])  # costliest first: lanes finish together
        parts = [(rows.take(index), shape) for index, shape in groups]
        if self._lanes > 1:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self._lanes, thread_name_prefix="encoder")
            results = list(self._executor.map(lambda p: self._encode_group(*p), parts))
        else:
            results = [self._encode_group(*part) for part in parts]
        pooled = {}
        for (index, _), result in zip(groups, results):
            for column, v in result.items():
                if column not in pooled:
                    pooled[column] = np.empty((len(lengths), v.shape[1]), np.float32)
                pooled[column][index] = v
        return pooled

    def _encode_group(self, rows: Units, shape=None) -> dict[str, np.ndarray]:
        layers = {}
        out = (self.encoder.encode(rows, self._layers) if shape is None else
               self.encoder.encode(rows, self._layers, shape))
        for p in self.poolings:  # pooling names negative layers; the encoder may key either way
            if p.layer is not None and p.layer >= 0:
                layers[p.layer] = out.layers[p.layer - self.encoder.num_layers]
        out = dataclasses.replace(out, layers={**out.layers, **layers})
        if self._unpooled:
            mask = np.array(out.mask, np.float32)
            mask[:, :self._unpooled] = 0
            out = dataclasses.replace(out, mask=mask)
        return self._pool(out)

    def embed(self, texts: list[str]) -> Embedded:
        if self.prompt:  # its tokens count in num_tokens and in the model's length, as there
            texts = [self.prompt + t for t in texts]
        pieces = self.encoder.tokenize(texts)
        lengths = pieces.lengths
        num_tokens = (lengths + self._specials).astype(np.int32)
        truncated = (lengths > self._room if self._room is not None
                     else np.zeros(len(lengths), bool))
        if self.long_text == "chunk" and truncated.any():
            vectors = self._embed_chunked(pieces, truncated)
            truncated = np.zeros_like(truncated)
        else:
            vectors = self._encode(pieces if self._room is None else pieces.truncated(self._room))
        if self.truncate_dim is not None:
            vectors = {k: self._truncated(k, v) for k, v in vectors.items()}
        if self.normalize:  # after truncation: the first K dimensions, unit length again
            vectors = {k: l2_normalize(v) for k, v in vectors.items()}
        return Embedded(vectors=vectors, num_tokens=num_tokens, truncated=truncated)

    def _truncated(self, column: str, v: np.ndarray) -> np.ndarray:
        """Matryoshka truncation: the first `truncate_dim` dimensions, refused above the width
        (the launcher's probe meets this before any data is read)."""
        if self.truncate_dim > v.shape[1]:
            raise ValueError(f"--truncate_dim {self.truncate_dim} is above the width of pooling "
                             f"{column!r} ({v.shape[1]}); expected 1..{v.shape[1]}")
        return np.ascontiguousarray(v[:, :self.truncate_dim])

    def _embed_chunked(self, pieces: Units, long_rows: np.ndarray) -> dict:
        """Long rows become overlapping windows; their vectors are averaged, weighted by the
        number of tokens in each window."""
        rows, owner, weight = [], [], []
        for i, row in enumerate(pieces.rows()):
            parts = _windows(row, self._room, self._stride) if long_rows[i] else [row]
            rows += parts
            owner += [i] * len(parts)
            weight += [len(p) + self._specials for p in parts]
        windows = self._encode(Units.from_rows(rows))
        owner, weight = np.asarray(owner), np.asarray(weight, np.float64)
        combined = {}
        for column, v in windows.items():
            total = np.zeros((len(long_rows), v.shape[1]), np.float64)
            np.add.at(total, owner, v * weight[:, None])
            norm = np.bincount(owner, weights=weight, minlength=len(long_rows))
            combined[column] = (total / norm[:, None]).astype(np.float32)
        return combined
