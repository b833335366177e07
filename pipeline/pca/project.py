"""The second pass: blocks of records -> blocks of `id, pc_1..pc_K, columns`, written as Parquet."""

from __future__ import annotations

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.io.filesystems import FileSystems

from beam_embed.pipeline.common.output_formats.parquet import write_tables
from beam_embed.pipeline.pca.fit import PcaFit
from beam_embed.pipeline.pca.inputs import vectors_of

PROJECTIONS = "projections"  # shards: projections-00000-of-00004.parquet


def pc_names(k: int) -> list[str]:
    return [f"pc_{i}" for i in range(1, k + 1)]


def projection_schema(k: int, columns: dict) -> pa.Schema:
    """`id`, pc_1..pc_K as float32, then `columns` (name -> Arrow type)."""
    return pa.schema([("id", pa.string())] + [(n, pa.float32()) for n in pc_names(k)]
                     + [(c, t) for c, t in columns.items() if c != "id"])


def project_block(block: pa.Table, fit: PcaFit, schema: pa.Schema) -> pa.Table:
    """One block of records -> its projection table (float32 coordinates)."""
    pooling = fit.spec.pooling
    coords = fit.transform(vectors_of(block, pooling))
    coords = np.ascontiguousarray(coords.T)
    arrays = {"id": block.column("id")}
    arrays.update(zip(pc_names(len(coords)), coords))
    arrays.update({c: block.column(c) for c in schema.names if c not in arrays})
    return pa.table(arrays).cast(schema)


class ProjectEmbeddings(beam.PTransform):
    """PCollection[pa.Table] of records -> PCollection[pa.Table] shaped by `schema`."""

    def __init__(self, fit, schema: pa.Schema):
        """`fit`: the PcaFit itself, or a side input (`beam.pvalue.AsSingleton`) that yields it."""
        super().__init__()
        self.fit, self.schema = fit, schema

    def expand(self, blocks):
        return blocks | "ApplyFit" >> beam.Map(project_block, self.fit, self.schema
                                                ).with_output_types(pa.Table)


class WriteProjections(beam.PTransform):
    """PCollection[pa.Table] -> `folder/projections-SSSSS-of-NNNNN.parquet`, runner-sharded.

    Only the columns of `schema` are written, so the blocks may carry more (the sample's text)."""

    def __init__(self, folder: str, schema: pa.Schema):
        super().__init__()
        self.folder, self.schema = folder, schema

    def expand(self, tables):
        return (tables
                | "SelectColumns" >> beam.Map(pa.Table.select, self.schema.names
                                              ).with_output_types(pa.Table)
                | "WriteParquet" >> write_tables(
                    FileSystems.join(self.folder, PROJECTIONS), self.schema,
                    compression="snappy", dictionary=[
                        f.name for f in self.schema
                        if f.name != "id" and not pa.types.is_floating(f.type)]))
