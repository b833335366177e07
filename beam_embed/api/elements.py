"""What EmbedTexts takes and gives: an element (a text, an (id, text) pair, a dict or a Beam Row)
read into the job's Record as `run` reads a record of a file, with the same checks and reasons;
one `Embedding` per element embedded; a `DeadLetter` (the run's errors-file line) for each one
that was not."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from beam_embed.pipeline.common.rows.records import DeadLetter, EmbeddedBatch, Record
from beam_embed.pipeline.job.cleaning import clean_text
from beam_embed.pipeline.job.formats import Fields

__all__ = ["DeadLetter", "Embedding"]


@dataclasses.dataclass(frozen=True, eq=False)
class Embedding:
    """One element's embedding.

    `id`: the element's id as given (None for a plain text); `text`: the text embedded (cleaned
    as `run` cleans it, unless clean=False); `vectors`: pooling column -> float32 numpy vector
    (the column as in a run's files: `mean`, `cls`, `mean_layer_m2` for mean@-2); `num_tokens`:
    the text's tokens, [CLS]/[SEP] included, before truncation; `truncated`: whether the model's
    max_seq_length cut it (never with long_text="chunk"); `fields`: the element's other fields,
    also readable as attributes (`embedding.topic`)."""

    id: object
    text: str
    vectors: dict[str, np.ndarray]
    num_tokens: int
    truncated: bool
    fields: Mapping = dataclasses.field(default_factory=dict)

    def __getattr__(self, name: str):
        fields = self.__dict__.get("fields") or {}
        if name in fields:
            return fields[name]
        raise AttributeError(f"Embedding has no field {name!r}; its element's other fields: "
                             f"{sorted(fields)}")


def _row(element) -> dict | None:
    if isinstance(element, Mapping):
        return dict(element)
    if hasattr(element, "_asdict"):  # beam.Row, a NamedTuple
        return dict(element._asdict())
    return None


def element_record(element, text_field: str, id_field: str | None,
                   max_text_bytes: int) -> Record | DeadLetter:
    """An element as the job's Record (its other fields in `meta`, as given), or a DeadLetter
    with the reason `run` gives a bad record (Fields: a missing, null or non-string text, one
    over max_text_bytes, NUL bytes, invalid UTF-8)."""
    if isinstance(element, str):
        return Fields(text_field, None, (), max_text_bytes).checked(None, None, element)
    if isinstance(element, tuple) and len(element) == 2 and not hasattr(element, "_asdict"):
        rid, row, key = element[0], {"text": element[1]}, "text"
    else:
        row, key = _row(element), text_field
        if row is None:
            return DeadLetter.of(None, None, f"element is of type {type(element).__name__}; "
                                 f"expected a text, an (id, text) pair or a dict with a "
                                 f"{text_field!r} field", repr(element))
        rid = row.get(id_field or "id")
    found = Fields(key, None, (), max_text_bytes).record(None, 0, row)
    found = dataclasses.replace(found, id=rid)  # as given, not as the run's string
    if isinstance(found, DeadLetter):
        return found
    others = tuple((k, v) for k, v in row.items() if k not in (key, id_field or "id"))
    return dataclasses.replace(found, meta=others)


def embeddings_of(batch: EmbeddedBatch):
    """One Embedding per row of an inference batch."""
    for i, record in enumerate(batch.records):
        yield Embedding(record.id, record.text,
                        {c: np.array(v[i], np.float32) for c, v in batch.vectors.items()},
                        int(batch.num_tokens[i]), bool(batch.truncated[i]), dict(record.meta))


def prepared_text(text, clean: bool, max_text_bytes: int, where: str) -> str:
    """One text as the run prepares a record's (checked, cleaned), for the API's calls that take
    texts alone; a ValueError saying `where` the text is and the run's reason when the run would
    dead-letter it."""
    if not isinstance(text, str):
        raise TypeError(f"{where} is of type {type(text).__name__}; expected a str")
    found = Fields("text", None, (), max_text_bytes).checked(None, None, text)
    if isinstance(found, DeadLetter):
        raise ValueError(f"{where}: {found.reason} (it starts {found.excerpt[:80]!r})")
    text = clean_text(text) if clean else text
    if not text.strip():
        raise ValueError(f"{where}: empty text ({found.text[:80]!r}); the run dead-letters "
                         "empty texts instead of embedding them")
    return text
