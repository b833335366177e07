"""The manifest's shards as readers get them: every listed file present and undamaged, and row
counts adding up to the manifest's.

A run records each shard's row count in its manifest (`rows`), counted by its format
(beam_embed.pipeline.common.output_formats): Parquet from the file's footer, TFRecord from its
records. Readers check the shards of a format whose rows are cheap to count (Parquet: one footer
per file) before reading any data, so a missing, truncated or swapped shard is named at once;
the others are checked as they are read (the format's reader), since counting their records
means reading them, unless the reader asks for every count first (--reuse refuses a damaged run
before the job starts). A damaged or missing shard is an IncompleteInput: one line naming the
file, never fewer records read without a word.
"""

from __future__ import annotations

from apache_beam.io.filesystems import FileSystems

from beam_embed.pipeline.common.errors import IncompleteInput
from beam_embed.pipeline.common.output_formats import output_format


def check_shards(es, fmt: str, count_all: bool = False) -> tuple[str, ...]:
    """`es`'s shards of `fmt`, checked: each exists; where rows are counted up front (Parquet's
    footers, or every format with `count_all`) each shard is readable and its rows match the
    manifest's per file and in total. Raises IncompleteInput naming the first bad one."""
    paths = es.files.get(fmt, ())
    listed = f"{es.manifest_path} lists it among the {len(paths)} {fmt} shards of that run"
    for path in paths:
        if not FileSystems.exists(path):
            raise IncompleteInput(f"{path} is missing: {listed}; restore it or rerun the job")
    entry = output_format(fmt)
    if not (entry.rows_up_front or count_all):  # checked as they are read
        return tuple(paths)
    total = 0
    for path in paths:
        n = entry.count_rows(path)
        expected = es.rows.get(FileSystems.split(path)[1])
        if expected is not None and n != expected:
            raise IncompleteInput(f"{path} holds {n} rows, but {es.manifest_path} counts "
                                  f"{expected}; it was replaced: restore it or rerun the job")
        total += n
    embedded = es.counts.get("embedded")
    if embedded is not None and total != embedded:
        raise IncompleteInput(f"the {entry.title} shards listed in {es.manifest_path} hold "
                              f"{total} rows, but it counts {embedded} embedded records; rerun "
                              "the job")
    return tuple(paths)
