"""The job's output formats: one registry entry each, the one place that says what a format is.

An entry names its implementations as "module:attr" strings, imported only where they are used
(so this module, the flag help and every flag check stay free of Beam, numpy and TensorFlow):
the writer (a module of beam_embed.pipeline.job, resolved only by the job), the row counter (the
manifest's `rows` and the shard check) and the reader pca reads blocks of whole records with (a
module of beam_embed.pipeline.pca, resolved only by pca). Everything that used to branch on a format's
name asks its entry instead: the flag check, the manifest's `files` and `rows`, the shard check,
pca's reader, search's refusal. Adding a format = one writer + one entry here + its tests.

The registry is a plain dict, read when asked (never copied at import), so a test can register
a format of its own for the length of the test.
"""

from __future__ import annotations

import dataclasses
import importlib


@dataclasses.dataclass(frozen=True)
class OutputFormat:
    name: str  # the --format value and the manifest's `files` key
    suffix: str  # its shards are named embeddings-00000-of-00004{suffix}
    title: str  # the format in messages: "the Parquet shards listed in ..."
    # "module:Class": a Beam PTransform, Class(output, schema, num_shards, in_bundles=...), over
    # the job's EmbeddedBatch PCollection, returning the paths it wrote
    writer: str
    rows: str  # "module:function": path -> the rows in one shard (read back, or IncompleteInput)
    rows_up_front: bool = False  # counting rows is cheap (a footer): readers check every
    #                              shard's rows before reading any data; else as they read it
    # "module:function": fn(shard_paths_pcollection, columns, pooling, rows) -> a PCollection of
    # pyarrow Tables (whole records: `columns` + the pooling's column); None: pca cannot read it
    reader: str | None = None
    tensorflow: bool = False  # reading it loads TensorFlow (pca loads it quietly first)
    writes_files: bool = True  # False: it writes no shards, the manifest lists no files for it

    def writer_class(self):
        return _load(self.writer)

    def count_rows(self, path: str) -> int:
        return _load(self.rows)(path)

    def read_blocks(self):
        if self.reader is None:
            raise ValueError(f"{self.title} shards ({self.name!r}) have no reader; expected one "
                             f"of {readable()}")
        return _load(self.reader)


def _load(ref: str):
    module, name = ref.split(":")
    return getattr(importlib.import_module(module), name)


# In the order readers choose by when no format is asked for (Parquet first).
OUTPUT_FORMATS: dict[str, OutputFormat] = {
    "parquet": OutputFormat(
        "parquet", ".parquet", "Parquet", "beam_embed.pipeline.job.sinks:WriteParquet",
        "beam_embed.pipeline.common.shards:parquet_rows", rows_up_front=True,
        reader="beam_embed.pipeline.pca.inputs:read_parquet_blocks"),
    "tfrecord": OutputFormat(
        "tfrecord", ".tfrecord", "TFRecord", "beam_embed.pipeline.job.sinks:WriteTFRecord",
        "beam_embed.pipeline.common.shards:tfrecord_rows",
        reader="beam_embed.pipeline.pca.inputs:read_tfrecord_blocks", tensorflow=True),
}


def names() -> tuple[str, ...]:
    return tuple(OUTPUT_FORMATS)


def readable() -> list[str]:
    """The formats pca can read."""
    return [f.name for f in OUTPUT_FORMATS.values() if f.reader is not None]


def output_format(name: str) -> OutputFormat:
    try:
        return OUTPUT_FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown format {name!r}; expected one of {list(OUTPUT_FORMATS)}"
                         ) from None
