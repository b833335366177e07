"""The job's output formats: one module each (parquet.py, tfrecord.py) holding everything about
the format (its encoding of a batch under the one schema, schema.py; its writer; its readers),
and this registry of their `OutputFormat` objects, the one place that says which formats exist.
The job and the Python API name formats from here and never encode one.

An entry holds the format's functions themselves: its writer (the job's), its row counter (the
manifest's `rows` and the shard check), and the readers of whichever commands can read it: pca's
blocks of whole records, --reuse's previous rows, search's column scan and rows by number, the
Python API's whole shards. A
command asks the entry (or `readers`, for the formats it can read) instead of branching on a
format's name. The format modules import Beam, pyarrow and TensorFlow inside their functions
only, so this registry, the flag help and every flag check stay free of them. Adding a format =
one module + one entry here + its tests (tests/job/test_extra_format.py registers one from a test
alone).

The registry is a plain dict, read when asked (never copied at import), so a test can register
a format of its own for the length of the test. Beside the formats: Beam's file sink around a
format's writer (sink.py) and the thread that reads a format's next row group ahead
(prefetch.py).

May import: beam_embed.pipeline.common.run_folder (the folder's names, bundle writes, digests),
.rows, .settings, Beam, pyarrow, numpy, TensorFlow (inside functions only). Never
.finished_run or .stores, which read a run through these formats.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from beam_embed.pipeline.common.output_formats import lance, parquet, tfrecord


@dataclasses.dataclass(frozen=True)
class OutputFormat:
    name: str  # the --format value and the manifest's `files` key
    suffix: str  # its shards are named embeddings-00000-of-00004{suffix}
    title: str  # the format in messages: "the Parquet shards listed in ..."
    # write(output, schema, num_shards, in_bundles=False): a Beam PTransform over the job's
    # EmbeddedBatch PCollection encoding each batch under `schema` (schema.OutputSchema) and
    # writing its shards into the folder `output`, returning their paths
    write: Callable
    count_rows: Callable[[str], int]  # one shard's rows (read back), or IncompleteInput
    # open_batches(handle, schema, shard_bytes) -> an object writing the job's EmbeddedBatches
    # into one open file (encode(batch) -> a payload with its size in `nbytes` or len();
    # write(payload); pending_bytes(): what it holds not yet written; close()):
    # the job's shards of bounded size, committed as they close (run_folder/committed_shards.py),
    # which --resume keeps. None: the job writes the format with `write` alone (no --resume)
    open_batches: Callable | None = None
    # a dataset format (one dataset of the run, not shards: Lance) writes a part of it in each
    # shard set instead: open_part(output, set_name, schema, shard_bytes) -> an object with
    # encode, write, size(), close(rows) -> {file name: {"rows", "digest"}} and `metadata` (the
    # part as the dataset's commit takes it), and finish_parts(output, parts, schema) ->
    # {file name: {"rows", "digest"}} of the files that make the parts one dataset
    open_part: Callable | None = None
    finish_parts: Callable | None = None
    dataset: str | None = None  # a dataset format's folder in the run's folder
    rows_up_front: bool = False  # counting rows is cheap (a footer): readers check every
    #                              shard's rows before reading any data; else as they read it
    # pca: read_blocks(shard_paths_pcollection, columns, pooling, rows) -> a PCollection of
    # pyarrow Tables (whole records: `columns` + the pooling's column, stored as Parquet has it)
    read_blocks: Callable | None = None
    # --reuse: read_previous(path, vector_columns[, stored]) -> (text, vectors, num_tokens,
    # truncated) per row, the vectors float32 as stored; `stored` (StoredVectors per column,
    # given for an int8 run only): int8 codes read back as values its ranges encode to the same
    # codes (StoredVectors.recodable)
    read_previous: Callable | None = None
    # search: read_column(path, column) -> the column's Arrow arrays in row order, a part at a
    # time; fetch_rows(paths, rows, columns) -> {row: values} for rows numbered across the files
    read_column: Callable | None = None
    fetch_rows: Callable | None = None
    # the Python API's read_embeddings: read_table(path, columns, pooling, rows) -> one shard as a
    # pyarrow Table of `columns` + the pooling's column as Parquet stores it, in file order (a
    # shard whose rows were not counted up front is checked against `rows`, as pca's blocks)
    read_table: Callable | None = None
    tensorflow: bool = False  # reading it loads TensorFlow (pca loads it quietly first)
    writes_files: bool = True  # False: it writes no shards, the manifest lists no files for it
    by_default: bool = True  # written when the run names no formats (--format's default)


# In the order readers choose by when no format is asked for (Parquet first).
OUTPUT_FORMATS: dict[str, OutputFormat] = {
    "parquet": OutputFormat(
        "parquet", parquet.SUFFIX, "Parquet", parquet.write, parquet.count_rows,
        open_batches=parquet.open_batches, rows_up_front=True, read_blocks=parquet.read_blocks,
        read_previous=parquet.read_previous, read_column=parquet.read_column,
        fetch_rows=parquet.fetch_rows, read_table=parquet.read_table),
    "tfrecord": OutputFormat(
        "tfrecord", tfrecord.SUFFIX, "TFRecord", tfrecord.write, tfrecord.count_rows,
        open_batches=tfrecord.open_batches, read_blocks=tfrecord.read_blocks, read_previous=tfrecord.read_previous,
        read_table=tfrecord.read_table, tensorflow=True),
    "lance": OutputFormat(
        "lance", lance.SUFFIX, "Lance", lance.write, lance.count_rows,
        open_part=lance.open_part, finish_parts=lance.finish_parts, dataset=lance.DATASET,
        by_default=False),
}


def names() -> tuple[str, ...]:
    return tuple(OUTPUT_FORMATS)


def written_by_default() -> tuple[str, ...]:
    """--format's default: the formats a run writes when it names none."""
    return tuple(f.name for f in OUTPUT_FORMATS.values() if f.by_default)


def readers(reader: str) -> list[OutputFormat]:
    """The formats that have `reader` ("read_blocks", "read_previous", "read_column"), in
    registry order."""
    return [f for f in OUTPUT_FORMATS.values() if getattr(f, reader) is not None]


def readable() -> list[str]:
    """The formats pca can read."""
    return [f.name for f in readers("read_blocks")]


def output_format(name: str) -> OutputFormat:
    try:
        return OUTPUT_FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown format {name!r}; expected one of {list(OUTPUT_FORMATS)}"
                         ) from None
