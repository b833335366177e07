"""The blocks' coder: Arrow IPC round trips, Arrow's sizes, and the job's block PCollections typed
so Beam picks it."""

import apache_beam as beam
import numpy as np
import pyarrow as pa

from pipeline.common.manifest import PoolingColumn
from pipeline.pca.blocks import TableCoder
from pipeline.pca.inputs import ReadEmbeddings
from tests.pca.fixtures import WIDTH, clustered_matrix, records


def test_blocks_round_trip_through_the_coder_unchanged():
    x, _ = clustered_matrix(257)
    block = records({"mean": x}, texts=[f"text {i}" for i in range(257)])
    coder = TableCoder()
    back = coder.decode(coder.encode(block))
    assert back.equals(block) and back.schema == block.schema
    np.testing.assert_array_equal(
        back.column("mean").combine_chunks().flatten().to_numpy().reshape(-1, WIDTH), x)
    assert coder.estimate_size(block) == block.nbytes >= x.nbytes


def test_read_blocks_are_typed_tables_and_get_the_coder():
    pooling = PoolingColumn("mean", "mean", WIDTH, False)
    p = beam.Pipeline()  # built, never run: nothing is read
    blocks = p | ReadEmbeddings(("/no/such.parquet",), "parquet", ("id",), pooling)
    assert blocks.element_type is pa.Table
    assert isinstance(beam.coders.registry.get_coder(blocks.element_type), TableCoder)
