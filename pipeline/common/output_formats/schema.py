"""The one schema every output format writes, in no format's terms: which columns a run's rows
have, in order, and how each pooling's vectors are stored. Each format's module encodes a batch
under it (parquet.py an Arrow table, tfrecord.py `tf.train.Example`s).

A row: `id`, `text` (unless left out), `source` (the input file), with --split chunks the
chunk's place (CHUNK_COLUMNS: `parent_id`, `chunk_index`, `char_start`, `char_end`, offsets
into the document's text as read), the carried metadata columns (strings), then the vector columns (one per pooling, or the token columns at token
granularity), `num_tokens`, `truncated`.

Metadata columns are named for their input fields, except a field named like one of the run's
own columns (`source` in a corpus, say): that one is kept as `meta_<field>`, so a user's field
never disappears and no two columns share a name. Two fields that would still share a column
name are refused before the run (`metadata_columns`).

Imports nothing heavy: the run's launcher names the columns before loading anything.
"""

from __future__ import annotations

import dataclasses

from beam_embed.pipeline.common.rows.records import ChunkPlace

BASE_COLUMNS = ("id", "text", "source", "num_tokens", "truncated")
CHUNK_COLUMNS = ("parent_id", "chunk_index", "char_start", "char_end")  # strings, then int64
TOKEN_COLUMNS = ("tokens", "token_start", "token_end", "vectors", "vector_width")
META_PREFIX = "meta_"  # a metadata field named like one of the run's own columns: meta_<field>


def own_columns(vector_columns, chunks: bool = False) -> tuple[str, ...]:
    """The columns a run writes itself, whatever the input holds: the base columns, with
    `chunks` (--split chunks) CHUNK_COLUMNS, and its vector columns (its poolings' columns, or
    TOKEN_COLUMNS)."""
    base = BASE_COLUMNS + (CHUNK_COLUMNS if chunks else ())
    return base + tuple(c for c in vector_columns if c not in base)


def chunk_values(records) -> dict[str, list]:
    """CHUNK_COLUMNS' values for a batch's records (each a chunk: records.ChunkPlace)."""
    places = [ChunkPlace.of(r.meta) for r in records]
    return {"parent_id": [p.parent_id for p in places],
            "chunk_index": [p.index for p in places],
            "char_start": [p.start for p in places],
            "char_end": [p.end for p in places]}


def metadata_columns(fields, own, flag: str = "--metadata_fields",
                     fix: str = "name each field once") -> tuple[str, ...]:
    """Each metadata field's column name: the field's own, or META_PREFIX + it when `own` (the
    run's own columns) holds it. A ValueError naming `flag` and the `fix` when a field is named
    twice or two fields would share a column (`source` beside `meta_source`)."""
    columns: dict[str, str] = {}
    for field in fields:
        column = META_PREFIX + field if field in own else field
        if column in columns:
            first = columns[column]
            if first == field:
                raise ValueError(f"{flag} names {field!r} twice; {fix}")
            raise ValueError(
                f"{flag}: {first!r} and {field!r} would both be column {column!r} (a field named "
                f"like one of the run's own columns, {', '.join(own)}, is kept as "
                f"{META_PREFIX}<field>); {fix}, leaving out {first!r} or {field!r}")
        columns[column] = field
    return tuple(columns)


def metadata_field(column: str, own) -> str:
    """The input field a metadata column holds: meta_source -> source when `own` (the run's own
    columns) holds source; any other column is its field's name."""
    field = column.removeprefix(META_PREFIX)
    return field if field != column and field in own else column


@dataclasses.dataclass(frozen=True)
class OutputSchema:
    """One row per record: shared columns, then one vector column per pooling."""

    widths: tuple[tuple[str, int], ...]  # (column, width) per pooling, in order
    metadata_fields: tuple[str, ...]  # the input's fields, in order (their columns: metadata)
    include_text: bool
    stored: tuple = ()  # per pooling, in order, StoredVectors (--vector_dtype); (): float32
    chunks: bool = False  # --split chunks: CHUNK_COLUMNS after `source`
    granularity = "sentence"

    def storage(self) -> list:
        """(column, how its vectors are stored: a StoredVectors) per pooling."""
        from beam_embed.pipeline.common.rows.vector_dtypes import StoredVectors

        return [(col, self.stored[i] if self.stored else StoredVectors("float32", width))
                for i, (col, width) in enumerate(self.widths)]

    def vector_columns(self) -> tuple[str, ...]:
        return tuple(col for col, _ in self.widths)

    def metadata(self, flag: str = "--metadata_fields") -> list[tuple[str, str]]:
        """(input field, its column) per carried metadata field, in order; a ValueError naming
        `flag` for fields that would share a column (metadata_columns)."""
        columns = metadata_columns(self.metadata_fields,
                                   own_columns(self.vector_columns(), self.chunks), flag)
        return list(zip(self.metadata_fields, columns))


@dataclasses.dataclass(frozen=True)
class TokenSchema(OutputSchema):
    """Token granularity: per record its tokens, their character offsets into `text` and their
    vectors (`dtype`: float32 or float16, --token_dtype), instead of one vector a pooling."""

    dtype: str = "float32"
    granularity = "token"

    @property
    def width(self) -> int:
        return dict(self.widths)["vectors"]

    def vector_columns(self) -> tuple[str, ...]:
        return TOKEN_COLUMNS
