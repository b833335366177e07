"""The blocks' coder: Arrow IPC round trips, Arrow's sizes, and the job's block PCollections typed
so Beam picks it."""

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.testing.util import assert_that, equal_to

from beam_embed.pipeline.common.finished_run.embedding_set import PoolingColumn
from beam_embed.pipeline.pca.blocks import TableCoder
from beam_embed.pipeline.pca.inputs import ReadEmbeddings
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


def test_row_groups_are_read_once_each_in_splits(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    from beam_embed.pipeline.common.output_formats import parquet

    monkeypatch.setattr(parquet, "GROUPS_PER_SPLIT", 4)
    x, _ = clustered_matrix(230)
    table = records({"mean": x}, texts=[f"text {i}" for i in range(230)])
    path = str(tmp_path / "embeddings-00000-of-00001.parquet")
    pq.write_table(table, path, row_group_size=23)  # 10 row groups -> splits of 4, 4, 2
    assert list(parquet.row_group_splits(path)) == [(path, 0, 4), (path, 4, 8), (path, 8, 10)]

    pooling = PoolingColumn("mean", "mean", WIDTH, False)
    with beam.Pipeline() as p:
        sizes = (p | ReadEmbeddings((path,), "parquet", ("id",), pooling)
                 | beam.Map(lambda b: (b.column("id")[0].as_py(), b.num_rows)))
        ids = (p | "Again" >> ReadEmbeddings((path,), "parquet", ("id",), pooling)
               | beam.FlatMap(lambda b: b.column("id").to_pylist()))
        assert_that(sizes, equal_to(
            [(table.column("id")[i].as_py(), 23) for i in range(0, 230, 23)]), label="blocks")
        assert_that(ids, equal_to(
            table.column("id").to_pylist()), label="rows")
