"""The Parquet sink writes every table it is given, dictionary-encoding the string columns only."""

from __future__ import annotations

import glob

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from beam_embed.pipeline.common.output_formats.parquet import write_tables

SCHEMA = pa.schema([pa.field("id", pa.string()), pa.field("topic", pa.string()),
                    pa.field("mean", pa.list_(pa.float32(), 4)), pa.field("n", pa.int32())])


def _table(start: int, rows: int, rng) -> pa.Table:
    vectors = rng.standard_normal((rows, 4)).astype(np.float32)
    return pa.Table.from_arrays(
        [pa.array([f"r{i}" for i in range(start, start + rows)]),
         pa.array(["news" if i % 2 else "sport" for i in range(rows)]),
         pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), 4),
         pa.array(np.arange(start, start + rows, dtype=np.int32))], schema=SCHEMA)


def test_tables_round_trip_and_only_strings_use_a_dictionary(tmp_path):
    rng = np.random.default_rng(0)
    tables = [_table(0, 5, rng), _table(5, 3, rng), _table(8, 7, rng)]
    with beam.Pipeline() as p:
        _ = (p | beam.Create(tables)
             | write_tables(str(tmp_path / "emb"), SCHEMA, 2, ".parquet", "-SSSSS-of-NNNNN"))
    files = sorted(glob.glob(str(tmp_path / "emb-*-of-00002.parquet")))
    assert len(files) == 2
    back = pa.concat_tables([pq.read_table(f) for f in files]).sort_by("n")
    want = pa.concat_tables(tables)
    assert back.schema == SCHEMA
    assert back.column("id").to_pylist() == want.column("id").to_pylist()
    np.testing.assert_array_equal(
        back.column("mean").combine_chunks().flatten().to_numpy(),
        want.column("mean").combine_chunks().flatten().to_numpy())
    for f in files:
        meta = pq.ParquetFile(f).metadata
        for g in range(meta.num_row_groups):
            encodings = {meta.row_group(g).column(c).path_in_schema.split(".")[0]:
                         meta.row_group(g).column(c).encodings for c in range(meta.num_columns)}
            assert "RLE_DICTIONARY" in encodings["id"] and "RLE_DICTIONARY" in encodings["topic"]
            assert "RLE_DICTIONARY" not in encodings["mean"], encodings["mean"]
            assert "RLE_DICTIONARY" not in encodings["n"], encodings["n"]
