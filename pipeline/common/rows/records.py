"""The small frozen values that flow between the job's stages."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the input formats' registry, read for --help, loads none
    import numpy as np

EXCERPT_CHARS = 200
EMPTY = "empty"  # an empty text: counted apart (skipped_empty), never embedded
INCOMPLETE = "incomplete"  # a file that breaks off: one dead letter for the rest of the file
# --split chunks: a chunk's place in its document travels in its meta under this key, so every
# step that carries a record's meta (--dedupe's copies, --reuse) carries it too. No input field
# is named so (it starts with a NUL); the output formats write it as typed columns (schema.py).
CHUNK_KEY = "\x00chunk"


@dataclasses.dataclass(frozen=True)
class ChunkPlace:
    """Where a chunk row's text lies: its document's id, its number there (from 0) and its
    character span in the document's text as read."""

    parent_id: str
    index: int
    start: int
    end: int

    def to_meta(self) -> tuple[str, str]:
        return CHUNK_KEY, f"{self.index} {self.start} {self.end} {self.parent_id}"

    @classmethod
    def of(cls, meta) -> ChunkPlace | None:
        """The place a record's meta holds; None for a record that is not a chunk."""
        for key, value in meta:
            if key == CHUNK_KEY:
                index, start, end, parent = value.split(" ", 3)
                return cls(parent, int(index), int(start), int(end))
        return None


@dataclasses.dataclass(frozen=True)
class Record:
    id: str
    text: str
    source: str
    meta: tuple[tuple[str, str], ...] = ()

    def rows(self) -> Iterator[Record]:
        """The input records this one stands for, each to get its own output row: itself."""
        yield self

    def row_count(self) -> int:
        return 1


@dataclasses.dataclass(frozen=True)
class DistinctText(Record):
    """A text encoded once for every record that holds it (--dedupe, --reuse): the first such
    record, and of the others only what their rows need besides the text, (id, source, meta)
    each in `copies`, so a text held by a million records is held once."""

    copies: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = ()

    def first(self) -> Record:
        return Record(self.id, self.text, self.source, self.meta)

    def rows(self) -> Iterator[Record]:
        yield self.first()
        for rid, source, meta in self.copies:
            yield Record(rid, self.text, source, meta)

    def row_count(self) -> int:
        return 1 + len(self.copies)


@dataclasses.dataclass(frozen=True)
class DeadLetter:
    """A record (a Python API element) that was not embedded: a line of a run's errors files.

    `id`: the record's id (an API element's as given; None for a plain text); `source`: its file
    (None for an API element); `reason`: why, in words ("empty text", "text is N bytes, over
    --max-text-bytes=M", "encoder failed: ..."); `excerpt`: the start of its text; `kind`:
    "empty", "incomplete" (the rest of a file that broke off) or "error". `to_json()`: the
    errors file's JSON object."""

    id: str
    source: str
    reason: str
    excerpt: str
    kind: str = "error"  # "error", EMPTY or INCOMPLETE

    @classmethod
    def of(cls, id: str, source: str, reason: str, text: str = "", kind: str = "error"):
        return cls(id=id, source=source, reason=reason, excerpt=text[:EXCERPT_CHARS], kind=kind)

    def to_json(self) -> dict:
        return {"id": self.id, "source": self.source, "kind": self.kind, "reason": self.reason,
                "excerpt": self.excerpt}


@dataclasses.dataclass(frozen=True)
class EmbeddedBatch:
    """One inference batch, column-wise: the sinks convert it in bulk."""

    records: tuple[Record, ...]
    vectors: dict  # column -> float32 [batch, width]; empty at token granularity
    num_tokens: np.ndarray
    truncated: np.ndarray
    tokens: object = None  # beam_embed.models.tokens.TokenVectors at token granularity

    def __len__(self) -> int:
        return len(self.records)
