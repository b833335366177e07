"""Models for `beam-embed eval`: a preset or folder -> an EncoderSpec checked against its encoder
kind, and texts -> vectors per pooling column, batched like the job (short texts together)."""

from __future__ import annotations

import dataclasses

import numpy as np

from beam_embed.models.spec import EncoderSpec, encoder_spec


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One model to evaluate: as the user named it, resolved, with the poolings asked for."""

    label: str
    encoder: EncoderSpec

    def columns(self) -> dict[str, str]:
        """pooling spec -> column, in the order given."""
        return {p.spec: p.column for p in self.encoder.parsed_poolings()}


def candidate(label: str, poolings: tuple[str, ...] = (),
              max_seq_length: int | None = None) -> Candidate:
    """Resolves `label` (a preset or an export folder) and checks the pooling names against its
    encoder kind; loads nothing yet. No poolings given: the model's recommended one. Vectors
    are not normalized: cosine similarity does not need it."""
    return Candidate(label, encoder_spec(label, poolings=tuple(poolings),
                                         max_seq_length=max_seq_length, normalize=False))


def embed_texts(embedder, texts: list[str],
                batch_size: int) -> dict[str, np.ndarray]:
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
