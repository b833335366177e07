"""The embedding job's shards as the PCA job reads them: blocks of whole records.

A block is a `pyarrow.Table` of whole records: the requested columns plus the pooling column
(as the Parquet shards store it: beam_embed.pipeline.common.vector_dtypes), whichever format the shards
are in. Parquet shards come one
block per row group, in splits of up to GROUPS_PER_SPLIT row groups spread over the workers, each
split's next row groups read on a thread while the current block is worked on (a 1M-row PCA
spends about as long decoding Parquet as in BLAS; see beam_embed.pipeline.common.prefetch). TFRecord shards
are batched and parsed in bulk with `tf.io.parse_example`. Nothing downstream touches a row in
Python.
"""

from __future__ import annotations

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_embed.pipeline.common.manifest import PoolingColumn
from beam_embed.pipeline.common.output_formats import output_format
from beam_embed.pipeline.common.prefetch import prefetched
from beam_embed.pipeline.common.shards import tfrecord_records
from beam_embed.pipeline.common.vector_dtypes import read_back
from beam_embed.pipeline.pca.blocks import TableCoder  # noqa: F401  (registers the blocks' coder)

TFRECORD_BATCH = 4096
GROUPS_PER_SPLIT = 16  # a split's row groups are read in order, one worker; splits spread out
PREFETCH = 2  # row groups read ahead: ~4 in memory at once (read, waiting, in use), ~250 MB
#              with the ~64 MB row groups the job writes


def vectors_of(block: pa.Table, pooling: PoolingColumn) -> np.ndarray:
    """The block's pooling column as a float32 [rows, width] array (float32: a view of the
    block's buffer; other dtypes decoded)."""
    return read_back(block.column(pooling.column), pooling.stored(), pooling.column)


def _tfrecord_spec(columns: tuple[str, ...], pooling: PoolingColumn):
    import tensorflow as tf  # only where TFRecord shards are read

    spec = {}
    for c in columns:
        if c in ("num_tokens", "truncated"):
            spec[c] = tf.io.FixedLenFeature([], tf.int64)
        elif c in ("id", "source"):
            spec[c] = tf.io.FixedLenFeature([], tf.string)
        else:  # text and metadata may be missing from a record
            spec[c] = tf.io.FixedLenFeature([], tf.string, default_value="")
    spec[pooling.column] = (tf.io.FixedLenFeature([pooling.width], tf.float32)
                            if pooling.dtype == "float32" else  # a vector's bytes
                            tf.io.FixedLenFeature([], tf.string))
    return spec


def parse_examples(serialized: list[bytes], columns: tuple[str, ...], pooling: PoolingColumn
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
    vectors, stored = parsed[pooling.column].numpy(), pooling.stored()
    arrays[pooling.column] = stored.arrow_of_stored(
        vectors if pooling.dtype == "float32" else stored.stored_of_bytes(list(vectors)))
    return pa.table(arrays)


def _open(path: str):
    return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def row_group_splits(path: str):
    """(path, first, stop) row-group ranges of one Parquet shard, GROUPS_PER_SPLIT at most."""
    import pyarrow.parquet as pq

    with _open(path) as f:
        groups = pq.ParquetFile(f).num_row_groups
    for first in range(0, groups, GROUPS_PER_SPLIT):
        yield path, first, min(groups, first + GROUPS_PER_SPLIT)


class ReadRowGroups(beam.DoFn):
    """(path, first, stop) -> one block per row group, read ahead on a thread. Arrow's own
    column threads stay off: the read is one column or a few, and the prefetch thread is the
    parallelism (measured: the same speed or slower with them on)."""

    def __init__(self, columns: list[str]):
        super().__init__()
        self.columns = columns

    def process(self, split):
        import pyarrow.parquet as pq

        path, first, stop = split
        with _open(path) as f:
            shard = pq.ParquetFile(f)
            yield from prefetched((shard.read_row_group(i, self.columns, use_threads=False)
                                   for i in range(first, stop)), PREFETCH)


def _shard_records(path: str, rows: dict):
    return tfrecord_records(path, rows.get(path.rsplit("/", 1)[-1]))


class ReadEmbeddings(beam.PTransform):
    """PBegin -> PCollection[pa.Table]: blocks of `columns` + the pooling column from the shards.

    TFRecord shards are read whole, one per worker, each checked against the row count the
    manifest has for it (`rows`: shard name -> rows): a damaged or swapped shard fails the job
    naming the file instead of leaving its records out."""

    def __init__(self, shards: tuple[str, ...], fmt: str, columns: tuple[str, ...],
                 pooling: PoolingColumn, rows: dict | None = None):
        super().__init__()
        self.shards, self.fmt, self.columns, self.pooling = shards, fmt, columns, pooling
        self.rows = dict(rows or {})

    def expand(self, pbegin):
        files = pbegin | "ListShards" >> beam.Create(list(self.shards))
        read = output_format(self.fmt).read_blocks()  # the format's reader, below
        return read(files, self.columns, self.pooling, self.rows)


def read_parquet_blocks(files, columns: tuple[str, ...], pooling: PoolingColumn, rows: dict):
    """Shard paths -> one block per row group (the rows were checked against the manifest from
    the footers before: beam_embed.pipeline.common.shards.check_shards)."""
    return (files
            | "SplitRowGroups" >> beam.FlatMap(row_group_splits)
            | "SpreadSplits" >> beam.Reshuffle()
            | "ReadRowGroups" >> beam.ParDo(ReadRowGroups(
                list(columns) + [pooling.column])).with_output_types(pa.Table))


def read_tfrecord_blocks(files, columns: tuple[str, ...], pooling: PoolingColumn, rows: dict):
    """Shard paths -> blocks of TFRECORD_BATCH parsed records, each shard checked against its
    manifest row count as it is read."""
    return (files
            | "SpreadShards" >> beam.Reshuffle()
            | "ReadTFRecord" >> beam.FlatMap(_shard_records, rows)
            | "BatchExamples" >> beam.BatchElements(min_batch_size=TFRECORD_BATCH,
                                                    max_batch_size=TFRECORD_BATCH)
            | "ParseExamples" >> beam.Map(parse_examples, columns, pooling
                                          ).with_output_types(pa.Table))
