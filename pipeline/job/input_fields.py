"""Which of the input's fields a run reads, checked and decided on the launcher before the run.

Each file's fields are read first (sources.check_columns: a Parquet footer, a CSV/TSV header,
the first records of a JSONL or TFRecord file) and the fields the flags name are checked
against them. What the flags leave unset is then decided from them, the same way for every
format with named fields:

- the id: without --id_field, a field named `id` (in any file) is the id; records without one
  get `path:line` ids, as without any id field; a record whose id is a list or an object is a
  dead letter saying so;
- the metadata: without --metadata_fields, every other field that holds single values (text,
  numbers, booleans) in the files' first records (their schema for Parquet and CSV) is carried
  as a string column, in the order first seen; `--metadata_fields ''` carries none. Fields that
  hold lists or objects are not carried (name them in --metadata_fields to carry their JSON
  text); the text and id fields are columns already.

A field named like a column the run writes itself (`id`, `text`, `source`, `num_tokens`,
`truncated`, the vector columns) is carried as `meta_<field>` (output_formats/schema.py), given
or by default; fields that would still share a column are refused here, before any data is read.

Every shard has the one schema the launcher decided: a record without a carried field has null
there, a later record whose value is a list or an object has its JSON text, and a field that
no file's first records hold is not carried (name it in --metadata_fields).
"""

from __future__ import annotations

import dataclasses

from beam_embed.pipeline.common.output_formats.schema import (
    TOKEN_COLUMNS,
    metadata_columns,
    own_columns,
)
from beam_embed.pipeline.job.formats import FileFields
from beam_embed.pipeline.job.sources import check_columns

DEFAULT_ID = "id"


def run_columns(run) -> tuple[str, ...]:
    """The columns a run writes itself, whatever the input holds."""
    spec = run.encoder
    return own_columns(TOKEN_COLUMNS if spec.granularity == "token" else tuple(
        p.column for p in spec.parsed_poolings()), run.settings.split == "chunks")


def with_input_fields(run, files):
    """`run` (a ResolvedRun) with its fields checked against `files` ((path, bytes) each) and
    its id and metadata fields decided where the settings left them unset (None); a ValueError
    for a field the input lacks, or metadata fields that would share a column."""
    s = run.settings
    given = s.metadata_fields or ()
    own = run_columns(run)
    metadata_columns(given, own)
    found = check_columns(list(files), s.input_format, run.fields())
    _check_sampled_metadata(given, found)
    id_field = s.id_field
    # a field named `id` is the id even when some first records hold a list there: those
    # records are dead letters saying so, the others keep their ids
    if id_field is None and any(DEFAULT_ID in f.names for f in found):
        id_field = DEFAULT_ID
    metadata = s.metadata_fields
    if metadata is None:
        skip = {s.text_field, id_field}
        metadata = tuple(dict.fromkeys(n for f in found for n in f.scalar if n not in skip))
        metadata_columns(metadata, own, "the input's fields, carried by default,",
                         "name the fields to carry with --metadata_fields")
    return dataclasses.replace(run, settings=dataclasses.replace(
        s, id_field=id_field, metadata_fields=metadata))


def _check_sampled_metadata(given: tuple[str, ...], found: list[FileFields]) -> None:
    """A --metadata_fields field that none of the JSONL/TFRecord files' first records hold (a
    schema that lacks one was refused by check_columns): a field only later records hold is
    taken on trust when some first record holds it."""
    sampled = [f for f in found if f.sampled]
    if not sampled or any(not f.sampled for f in found):
        return
    seen = {n for f in sampled for n in f.names}
    missing = [m for m in given if m not in seen]
    if missing:
        names = ", ".join(seen_in_order(sampled))
        raise ValueError(f"--metadata_fields {missing[0]!r} is not a field of the input's first "
                         f"records (the first {sampled[0].sampled} of each file); their fields: "
                         f"{names}")


def seen_in_order(found: list[FileFields]) -> list[str]:
    return list(dict.fromkeys(n for f in found for n in f.names))


def fields_note(given, decided) -> str:
    """What the run's first line says about ids and metadata: `given`, the settings as the user
    gave them; `decided`, as with_input_fields completed them. A field kept under another name
    says so (a field named like a pooling's column is not known here: the manifest lists it)."""
    if decided.id_field is None and not decided.metadata_fields and \
            given.metadata_fields is None:
        return ""  # a text corpus: nothing to decide
    ids = f"ids from field {decided.id_field!r}" if decided.id_field else "ids path:line"
    if given.id_field is None and decided.id_field:
        ids += " (--id_field names another)"
    if decided.metadata_fields:
        own = own_columns(TOKEN_COLUMNS if decided.granularity == "token" else (),
                          decided.split == "chunks")
        columns = metadata_columns(decided.metadata_fields, own)
        meta = "metadata columns " + ", ".join(
            c if c == f else f"{f} as {c}"
            for f, c in zip(decided.metadata_fields, columns))
    else:
        meta = "no metadata columns"
    if given.metadata_fields is None:
        meta += " (the input's fields; --metadata_fields narrows them, '' drops them)"
    return f"; {ids}, {meta}"
