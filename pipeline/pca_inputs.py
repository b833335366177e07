"""The embedding job's output folder as the PCA job reads it: its manifest, its shards as blocks.

A block is a `pyarrow.Table` of whole records: the requested columns plus the pooling column
(`fixed_size_list<float32>[width]`), whichever format the shards are in. Parquet shards come one
block per row group (`ReadAllFromParquetBatched`); TFRecord shards are batched and parsed in bulk
with `tf.io.parse_example`. Nothing downstream touches a row in Python.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.io.filesystems import FileSystems

MANIFEST = "manifest.json"
FORMATS = ("parquet", "tfrecord")
FORMAT_VERSION = 1
TFRECORD_BATCH = 4096

# The non-vector columns of every record and their Arrow types (`text` when the manifest says so).
BASE_TYPES = {"id": pa.string(), "text": pa.string(), "source": pa.string(),
              "num_tokens": pa.int32(), "truncated": pa.bool_()}


@dataclass(frozen=True)
class Pooling:
    """One pooling column of the embedding files."""
    name: str
    column: str
    width: int
    normalize: bool


@dataclass(frozen=True)
class EmbeddingSet:
    """What `manifest.json` says about an output folder of the embedding job."""
    folder: str
    model: dict
    poolings: tuple[Pooling, ...]
    metadata_columns: tuple[str, ...]
    has_text: bool
    files: dict  # format -> tuple of full shard paths

    @property
    def manifest_path(self) -> str:
        return FileSystems.join(self.folder, MANIFEST)

    @property
    def columns(self) -> tuple[str, ...]:
        """The non-vector columns of every record, in file order."""
        text = ("text",) if self.has_text else ()
        return ("id",) + text + ("source",) + self.metadata_columns + ("num_tokens", "truncated")

    def column_type(self, column: str) -> pa.DataType:
        return BASE_TYPES.get(column, pa.string())

    def pooling(self, name: str | None) -> Pooling:
        """The pooling named `name` (its name or its column); the first one when `name` is None."""
        if name is None:
            return self.poolings[0]
        for p in self.poolings:
            if name in (p.name, p.column):
                return p
        choices = sorted({p.name for p in self.poolings} | {p.column for p in self.poolings})
        raise ValueError(f"unknown pooling {name!r} in {self.manifest_path}; "
                         f"expected one of {choices}")

    def shards(self, fmt: str | None) -> tuple[str, tuple[str, ...]]:
        """(format, shard paths): `fmt`, or Parquet when listed, else TFRecord."""
        listed = [f for f in FORMATS if self.files.get(f)]
        if fmt is None:
            if not listed:
                raise ValueError(f"{self.manifest_path} lists no shards; expected files in one "
                                 f"of {list(FORMATS)}")
            fmt = listed[0]
        if fmt not in listed:
            raise ValueError(f"format {fmt!r} has no shards in {self.manifest_path}; "
                             f"expected one of {listed}")
        return fmt, self.files[fmt]


def load_embedding_set(folder: str) -> EmbeddingSet:
    """Reads and checks `folder/manifest.json` (local or any Beam filesystem, e.g. gs://)."""
    path = FileSystems.join(folder, MANIFEST)
    if not FileSystems.exists(path):
        raise FileNotFoundError(
            f"no {MANIFEST} in {folder!r}: expected the embedding job's output folder (the job "
            "writes its manifest last, so a run that has not finished has none)")
    with FileSystems.open(path) as f:
        manifest = json.load(f)
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise ValueError(f"{path}: format_version {version!r} is not supported; "
                         f"expected {FORMAT_VERSION}")
    poolings = tuple(Pooling(p["name"], p["column"], int(p["width"]), bool(p.get("normalize")))
                     for p in manifest.get("poolings", []))
    if not poolings:
        raise ValueError(f"{path} lists no poolings")
    files = {fmt: tuple(FileSystems.join(folder, name) for name in names)
             for fmt, names in manifest.get("files", {}).items() if fmt in FORMATS}
    return EmbeddingSet(folder=folder, model=dict(manifest.get("model", {})), poolings=poolings,
                        metadata_columns=tuple(manifest.get("metadata_columns", [])),
                        has_text=bool(manifest.get("text_column", False)), files=files)


def vectors_of(block: pa.Table, column: str, width: int) -> np.ndarray:
    """The block's `column` as a float32 [rows, width] array (zero-copy where Arrow allows)."""
    arr = block.column(column).combine_chunks()
    if arr.null_count:
        raise ValueError(f"column {column!r} holds {arr.null_count} null vectors")
    return arr.flatten().to_numpy(zero_copy_only=False).reshape(-1, width)


def _tfrecord_spec(columns: tuple[str, ...], pooling: Pooling):
    import tensorflow as tf  # only where TFRecord shards are read

    spec = {}
    for c in columns:
        if c in ("num_tokens", "truncated"):
            spec[c] = tf.io.FixedLenFeature([], tf.int64)
        elif c in ("id", "source"):
            spec[c] = tf.io.FixedLenFeature([], tf.string)
        else:  # text and metadata may be missing from a record
            spec[c] = tf.io.FixedLenFeature([], tf.string, default_value="")
    spec[pooling.column] = tf.io.FixedLenFeature([pooling.width], tf.float32)
    return spec


def parse_examples(serialized: list[bytes], columns: tuple[str, ...], pooling: Pooling
                   ) -> pa.Table:
    """A batch of serialized tf.train.Examples -> the block Parquet would have given."""
    import tensorflow as tf

    parsed = tf.io.parse_example(tf.constant(serialized), _tfrecord_spec(columns, pooling))
    arrays = {}
    for c in columns:
        values = parsed[c].numpy()
        if c in ("num_tokens", "truncated"):
            arrays[c] = pa.array(values.astype(np.int32) if c == "num_tokens" else values != 0)
        else:
            arrays[c] = pa.array(values, pa.binary()).cast(pa.string())
    flat = pa.array(parsed[pooling.column].numpy().reshape(-1))
    arrays[pooling.column] = pa.FixedSizeListArray.from_arrays(flat, pooling.width)
    return pa.table(arrays)


class ReadEmbeddings(beam.PTransform):
    """PBegin -> PCollection[pa.Table]: blocks of `columns` + the pooling column from the shards."""

    def __init__(self, shards: tuple[str, ...], fmt: str, columns: tuple[str, ...],
                 pooling: Pooling):
        super().__init__()
        self.shards, self.fmt, self.columns, self.pooling = shards, fmt, columns, pooling

    def expand(self, pbegin):
        files = pbegin | "ListShards" >> beam.Create(list(self.shards))
        if self.fmt == "parquet":
            return files | "ReadParquet" >> beam.io.ReadAllFromParquetBatched(
                columns=list(self.columns) + [self.pooling.column])
        return (files
                | "ReadTFRecord" >> beam.io.ReadAllFromTFRecord()
                | "BatchExamples" >> beam.BatchElements(min_batch_size=TFRECORD_BATCH,
                                                        max_batch_size=TFRECORD_BATCH)
                | "ParseExamples" >> beam.Map(parse_examples, self.columns, self.pooling))
