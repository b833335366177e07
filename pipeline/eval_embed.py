"""Models for `beam-embed eval`: a preset or folder -> an EncoderSpec checked against its encoder
kind, and texts -> vectors per pooling column, batched like the job (short texts together)."""

from __future__ import annotations

import dataclasses

import numpy as np

from models.presets import ModelSpec, resolve
from pipeline.embed import EncoderSpec

DEFAULT_BATCH = 64


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One model to evaluate: as the user named it, resolved, with the poolings asked for."""

    label: str
    model: ModelSpec
    encoder: EncoderSpec

    def columns(self) -> dict[str, str]:
        """pooling spec -> column, in the order given."""
        from models.encoders import encoder_class
        from models.pooling import parse_poolings

        registry = encoder_class(self.model.kind).pooling_registry()
        return {p.spec: p.column for p in parse_poolings(list(self.encoder.poolings), *registry)}


def candidate(label: str, poolings: tuple[str, ...] = (),
              max_seq_length: int | None = None) -> Candidate:
    """Resolves `label` (a preset or an export folder) and checks the pooling names against its
    encoder kind; loads nothing yet. No poolings given: the model's recommended one. Vectors
    are not normalized: cosine similarity does not need it."""
    model = resolve(label)
    encoder = EncoderSpec(kind=model.kind, encoder=model.encoder, preprocessor=model.preprocessor,
                          max_seq_length=max_seq_length or model.max_seq_length or 512,
                          poolings=tuple(poolings) or model.pooling or ("cls",),
                          normalize=False, long_text="truncate")
    found = Candidate(label, model, encoder)
    found.columns()  # unknown pooling names fail here, before any model loads
    return found


def embed_texts(embedder, texts: list[str],
                batch_size: int = DEFAULT_BATCH) -> dict[str, np.ndarray]:
    """Vectors for `texts` in their order, each distinct text embedded once; batches are cut from
    the texts sorted by length so each packs to a short sequence."""
    unique = sorted(set(texts), key=lambda t: (len(t), t))
    parts: dict[str, list[np.ndarray]] = {c: [] for c in embedder.columns}
    for start in range(0, len(unique), batch_size):
        vectors = embedder.embed(unique[start:start + batch_size]).vectors
        for column in parts:
            parts[column].append(vectors[column])
    row = {t: i for i, t in enumerate(unique)}
    where = np.fromiter((row[t] for t in texts), np.int64, len(texts))
    return {c: np.concatenate(v)[where] for c, v in parts.items()}
