"""Named poolers: pure functions from an encoder's output to one vector per text.

A pooling is written `name` or `name@K` (layer K of the encoder, negative from the end:
`mean@-2` is the second-to-last layer). Several run on one encoder pass; each becomes a column.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping

import numpy as np


@dataclasses.dataclass(frozen=True)
class EncoderOutput:
    """What every encoder returns: token vectors of the requested layers, the mask, and the
    model's own sentence vectors (BERT `pooled_output`, ELMo `default`)."""

    layers: Mapping[int | str, np.ndarray]  # BERT: layer index (negative from the end);
    # ELMo: output name ("elmo", "word_emb", ...) -> [batch, seq, width]
    mask: np.ndarray  # [batch, seq] float32, 1 for real tokens (incl. [CLS]/[SEP])
    pooled: Mapping[str, np.ndarray]  # name -> [batch, width]


def _cls(out: EncoderOutput, layer) -> np.ndarray:
    return out.layers[layer][:, 0]


def _mean(out: EncoderOutput, layer) -> np.ndarray:
    mask = out.mask[..., None]
    total = (out.layers[layer] * mask).sum(axis=1)
    return total / np.maximum(mask.sum(axis=1), 1.0)


def _max(out: EncoderOutput, layer) -> np.ndarray:
    x = np.where(out.mask[..., None] > 0, out.layers[layer], -np.inf)
    return x.max(axis=1)


def _mean_sqrt_len(out: EncoderOutput, layer) -> np.ndarray:
    """sentence-transformers' mean_sqrt_len_tokens: the masked sum over sqrt(token count)."""
    mask = out.mask[..., None]
    total = (out.layers[layer] * mask).sum(axis=1)
    return total / np.sqrt(np.maximum(mask.sum(axis=1), 1.0))


def _weighted_mean(out: EncoderOutput, layer) -> np.ndarray:
    """sentence-transformers' weightedmean_tokens: token i (from 1) weighs i."""
    weights = out.mask * np.arange(1, out.mask.shape[1] + 1, dtype=np.float32)
    total = (out.layers[layer] * weights[..., None]).sum(axis=1)
    return total / np.maximum(weights.sum(axis=1, keepdims=True), 1e-9)


def _last_token(out: EncoderOutput, layer) -> np.ndarray:
    """sentence-transformers' lasttoken: the last real token's vector (rows padded at the end)."""
    seq = out.mask.shape[1]
    last = seq - 1 - np.argmax(out.mask[:, ::-1] > 0, axis=1)
    return out.layers[layer][np.arange(len(last)), last]


def _model_pooled(key: str) -> Callable[[EncoderOutput, int], np.ndarray]:
    def pool(out: EncoderOutput, layer) -> np.ndarray:
        return out.pooled[key]
    return pool


def _output_mean(key: str) -> Callable[[EncoderOutput, int], np.ndarray]:
    def pool(out: EncoderOutput, layer) -> np.ndarray:
        return _mean(out, key)
    return pool


POOLERS: dict[str, Callable[[EncoderOutput, int], np.ndarray]] = {
    "cls": _cls,
    "mean": _mean,
    "max": _max,
    "mean_sqrt_len_tokens": _mean_sqrt_len,
    "weightedmean": _weighted_mean,
    "lasttoken": _last_token,
    "pooled_output": _model_pooled("pooled_output"),
}
LAYERED = frozenset({"cls", "mean", "max", "mean_sqrt_len_tokens", "weightedmean", "lasttoken"})
# ELMo: the module's own `default` (mean of `elmo` over real tokens), and mask-aware means of
# each of its token-level outputs.
ELMO_OUTPUTS = ("elmo", "word_emb", "lstm_outputs1", "lstm_outputs2")
ELMO_POOLERS = {"default": _model_pooled("default"),
                **{name: _output_mean(name) for name in ELMO_OUTPUTS}}
# Text-in embedders: only the module's own vector per text.
TEXT_POOLERS = {"default": _model_pooled("default")}
_SPEC = re.compile(r"^(?P<name>[a-z_0-9]+)(?:@(?P<layer>-?\d+))?$")


@dataclasses.dataclass(frozen=True)
class Pooling:
    spec: str  # as the user wrote it, e.g. "mean@-2"
    name: str
    layer: int | None  # None for the model's own pooled vectors and ELMo's outputs
    fn: Callable = dataclasses.field(compare=False, repr=False, default=None)

    @property
    def column(self) -> str:
        """A column name every downstream tool accepts (BigQuery: letters, digits, _)."""
        if self.layer is None or self.layer == -1:
            return self.name
        sign = "m" if self.layer < 0 else ""
        return f"{self.name}_layer_{sign}{abs(self.layer)}"

    def __call__(self, out: EncoderOutput) -> np.ndarray:
        return self.fn(out, self.layer if self.layer is not None else -1)


def parse_pooling(spec: str, poolers: Mapping = POOLERS, layered=LAYERED) -> Pooling:
    match = _SPEC.match(spec.strip())
    name = match["name"] if match else spec
    if not match or name not in poolers:
        raise ValueError(f"unknown pooling {spec!r}; expected one of {sorted(poolers)}"
                         + (f" (layered: {sorted(layered)}, e.g. mean@-2)" if layered else ""))
    if match["layer"] is not None and name not in layered:
        raise ValueError(f"pooling {spec!r} takes no layer; layers apply to {sorted(layered)}")
    layer = int(match["layer"]) if match["layer"] is not None else (-1 if name in layered else None)
    return Pooling(spec=spec.strip(), name=name, layer=layer, fn=poolers[name])


def parse_poolings(specs: str | list[str], poolers: Mapping = POOLERS,
                   layered=LAYERED) -> tuple[Pooling, ...]:
    items = specs.split(",") if isinstance(specs, str) else list(specs)
    parsed = tuple(parse_pooling(s, poolers, layered) for s in items if s.strip())
    if not parsed:
        raise ValueError(f"no pooling given; expected one or more of {sorted(poolers)}")
    columns = [p.column for p in parsed]
    if len(set(columns)) != len(columns):
        raise ValueError(f"poolings {specs!r} name the same column twice")
    return parsed


def l2_normalize(x: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.maximum(norm, 1e-12)
