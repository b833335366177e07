"""The embedding job's shards as the PCA job reads them: blocks of whole records.

A block is a `pyarrow.Table` of whole records: the requested columns plus the pooling column
(as the Parquet shards store it: beam_embed.pipeline.common.rows.vector_dtypes), whichever format
the shards are in; each format's module reads them (beam_embed.pipeline.common.output_formats:
Parquet a block per row group, read ahead on a thread; TFRecord batched and parsed in bulk with
`tf.io.parse_example`). Nothing downstream touches a row in Python.
"""

from __future__ import annotations

import apache_beam as beam
import numpy as np
import pyarrow as pa

from beam_embed.pipeline.common.finished_run.embedding_set import PoolingColumn
from beam_embed.pipeline.common.output_formats import output_format
from beam_embed.pipeline.common.rows.vector_dtypes import read_back
from beam_embed.pipeline.pca.blocks import TableCoder  # noqa: F401  (registers the blocks' coder)


def vectors_of(block: pa.Table, pooling: PoolingColumn) -> np.ndarray:
    """The block's pooling column as a float32 [rows, width] array (float32: a view of the
    block's buffer; other dtypes decoded)."""
    return read_back(block.column(pooling.column), pooling.stored(), pooling.column)


class ReadEmbeddings(beam.PTransform):
    """PBegin -> PCollection[pa.Table]: blocks of `columns` + the pooling column from the shards,
    by the format's reader. Shards whose rows were not checked before (TFRecord) are checked as
    they are read against the row count the manifest has for each (`rows`: shard name -> rows):
    a damaged or swapped shard fails the job naming the file instead of leaving its records
    out."""

    def __init__(self, shards: tuple[str, ...], fmt: str, columns: tuple[str, ...],
                 pooling: PoolingColumn, rows: dict | None = None):
        super().__init__()
        self.shards, self.fmt, self.columns, self.pooling = shards, fmt, columns, pooling
        self.rows = dict(rows or {})

    def expand(self, pbegin):
        files = pbegin | "ListShards" >> beam.Create(list(self.shards))
        return output_format(self.fmt).read_blocks(files, self.columns, self.pooling, self.rows)
