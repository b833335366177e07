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
  hold lists or objects, and fields named like a column the run writes itself (`id`, `text`,
  `source`, `num_tokens`, `truncated`, the vector columns), are not carried.

Every shard has the one schema the launcher decided: a record without a carried field has null
there, a later record whose value is a list or an object has its JSON text, and a field that
no file's first records hold is not carried (name it in --metadata_fields).
"""

from __future__ import annotations

import dataclasses

from beam_embed.pipeline.job.formats import FileFields
from beam_embed.pipeline.job.sources import check_columns

DEFAULT_ID = "id"
BASE_COLUMNS = ("id", "text", "source", "num_tokens", "truncated")
TOKEN_COLUMNS = ("tokens", "token_start", "token_end", "vectors", "vector_width")


def own_columns(run) -> tuple[str, ...]:
    """The columns a run writes itself, whatever the input holds."""
    spec = run.encoder
    vectors = TOKEN_COLUMNS if spec.granularity == "token" else tuple(
        p.column for p in spec.parsed_poolings())
    return BASE_COLUMNS + vectors


def with_input_fields(run, files):
    """`run` (a ResolvedRun) with its fields checked against `files` ((path, bytes) each) and
    its id and metadata fields decided where the settings left them unset (None); a ValueError
    for a field the input lacks, or a metadata field named like one of the run's own columns."""
    s = run.settings
    found = check_columns(list(files), s.input_format, run.fields())
    own = own_columns(run)
    given = s.metadata_fields or ()
    clash = [m for m in given if m in own]
    if clash:
        raise ValueError(f"--metadata_fields {clash[0]!r} is a column the run writes itself "
                         f"({', '.join(own)}); expected other fields")
    _check_sampled_metadata(given, found)
    id_field = s.id_field
    # a field named `id` is the id even when some first records hold a list there: those
    # records are dead letters saying so, the others keep their ids
    if id_field is None and any(DEFAULT_ID in f.names for f in found):
        id_field = DEFAULT_ID
    metadata = s.metadata_fields
    if metadata is None:
        skip = {*own, s.text_field, id_field}
        metadata = tuple(dict.fromkeys(n for f in found for n in f.scalar if n not in skip))
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
    gave them; `decided`, as with_input_fields completed them."""
    if decided.id_field is None and not decided.metadata_fields and \
            given.metadata_fields is None:
        return ""  # a text corpus: nothing to decide
    ids = f"ids from field {decided.id_field!r}" if decided.id_field else "ids path:line"
    if given.id_field is None and decided.id_field:
        ids += " (--id_field names another)"
    if decided.metadata_fields:
        meta = f"metadata columns {', '.join(decided.metadata_fields)}"
    else:
        meta = "no metadata columns"
    if given.metadata_fields is None:
        meta += " (the input's fields; --metadata_fields narrows them, '' drops them)"
    return f"; {ids}, {meta}"
