"""WriteEmbeddings(store=...): once the write publishes, its rows are upserted into each store
as `beam-embed run --store` upserts them (keyed by id: a second write leaves no duplicate;
store_sync removes what a later write lacks), into stores that run here (LanceDB, Qdrant's
local mode); a store that cannot be reached, or a bad URI, fails before the pipeline runs."""

from __future__ import annotations

import os

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing import test_pipeline

from beam_embed import EmbedTexts, WriteEmbeddings
from tests.api.helpers import POOLINGS, SETTINGS, elements
from tests.job_helpers import parquet_rows

pytestmark = pytest.mark.pipeline  # whole pipelines


def _write(tiny_export, out, items, **keywords) -> None:
    with test_pipeline.TestPipeline() as p:
        _ = (p | beam.Create(items)
             | EmbedTexts(model=tiny_export, pooling=POOLINGS, **SETTINGS)
             .with_exception_handling()
             | WriteEmbeddings(out, metadata_fields=["topic"], **keywords))


def _lance(db: str) -> dict:
    import lancedb

    return {r["id"]: r for r in lancedb.connect(db).open_table("docs").to_arrow().to_pylist()}


def _qdrant(path: str) -> dict:
    from qdrant_client import QdrantClient

    client = QdrantClient(path=path)
    try:
        points, _ = client.scroll("docs", limit=1000, with_payload=True, with_vectors=True)
    finally:
        client.close()
    return {p.payload["id"]: p for p in points}


def test_the_written_rows_are_upserted_into_each_store(tiny_export, tmp_path):
    out, db, qdrant = (str(tmp_path / n) for n in ("out", "lance", "qdrant"))
    stores = {"store": [f"lancedb:{db}", f"qdrant:{qdrant}"], "store_table": "docs"}
    _write(tiny_export, out, elements(), **stores)
    rows = parquet_rows(out)
    assert len(rows) >= 3  # the corpus's good records (the others are dead letters)
    lance, points = _lance(db), _qdrant(qdrant)
    assert set(lance) == set(points) == set(rows)
    for rid, row in rows.items():  # the first pooling's vector, the text and the metadata
        for vector in (lance[rid]["vector"], points[rid].vector):
            np.testing.assert_array_equal(np.asarray(vector, np.float32),
                                          np.asarray(row["mean"], np.float32))
        for payload in (lance[rid], points[rid].payload):
            assert (payload["text"], payload["topic"]) == (row["text"], row["topic"])

    _write(tiny_export, out, elements(), overwrite=True, **stores)  # again: one point per id
    assert set(_lance(db)) == set(_qdrant(qdrant)) == set(rows)
    assert len(_lance(db)) == len(rows)

    kept = [e for e in elements() if e["id"] != "r1"]  # and a smaller write, synced
    _write(tiny_export, out, kept, overwrite=True, store_sync=True, **stores)
    assert set(_lance(db)) == set(_qdrant(qdrant)) == set(rows) - {"r1"}


def test_an_unreachable_store_fails_before_the_pipeline_runs(tiny_export, tmp_path):
    out = str(tmp_path / "out")
    with pytest.raises(ValueError, match=r"qdrant://127\.0\.0\.1:9: cannot open the store"):
        with beam.Pipeline() as p:
            _ = (p | beam.Create(elements())
                 | EmbedTexts(model=tiny_export, pooling=POOLINGS, **SETTINGS)
                 | WriteEmbeddings(out, store="qdrant://127.0.0.1:9"))
    assert not os.path.exists(os.path.join(out, "manifest.json"))


def test_a_bad_store_uri_fails_at_construction(tmp_path):
    with pytest.raises(ValueError, match="unknown store; expected a URI starting with one of"):
        WriteEmbeddings(str(tmp_path / "out"), store="redis://x")
    with pytest.raises(ValueError, match="'my-dataset' is not a BigQuery dataset name"):
        WriteEmbeddings(str(tmp_path / "out"), store=["bigquery://my-project.my-dataset.t"])


def test_stores_is_taken_as_store(tmp_path):
    with pytest.warns(DeprecationWarning, match=r"stores=\.\.\.\) is now .*store=\.\.\."):
        write = WriteEmbeddings(str(tmp_path / "out"), stores=["lancedb:db"], store_sync=True)
    assert write.settings.store == ("lancedb:db",) and write.settings.store_sync is True


def test_a_bigquery_table_is_a_step_of_the_users_pipeline(tiny_export, tmp_path):
    """Built, not run (nothing reaches BigQuery here): the pipeline holds Beam's file loads into
    the table, and a pipeline whose --temp_location is not on Cloud Storage is refused."""
    from apache_beam.options.pipeline_options import PipelineOptions

    def build(temp):
        p = beam.Pipeline(options=PipelineOptions(["--temp_location", temp]))
        _ = (p | beam.Create(elements())
             | EmbedTexts(model=tiny_export, pooling=POOLINGS, **SETTINGS)
             | WriteEmbeddings(str(tmp_path / "out"), store="bigquery://my-project.ds.docs"))
        return p

    labels = _labels(build("gs://bucket/tmp"))
    assert "WriteEmbeddings/WriteBigQuery[my-project.ds.docs]/WriteToBigQuery/" \
           "BigQueryBatchFileLoads" in labels
    with pytest.raises(ValueError, match="expected --temp_location gs://BUCKET/PATH"):
        build(str(tmp_path / "tmp"))
    assert not os.path.exists(tmp_path / "out" / "manifest.json")


def _labels(p) -> set[str]:
    return {t.unique_name for t in p.to_runner_api().components.transforms.values()}


def test_a_store_that_fails_while_loading_names_how_to_load_again(tiny_export, tmp_path):
    """Reached when the pipeline is built, then given a table of another width before it runs:
    the pipeline fails after the publish, and says how to load the published run."""
    import lancedb
    import pyarrow as pa

    out, db = str(tmp_path / "out"), str(tmp_path / "lance")
    p = beam.Pipeline()
    _ = (p | beam.Create(elements())
         | EmbedTexts(model=tiny_export, pooling=POOLINGS, **SETTINGS).with_exception_handling()
         | WriteEmbeddings(out, store=f"lancedb:{db}", store_table="docs"))
    vector = pa.FixedSizeListArray.from_arrays(pa.array([0.0, 1.0], pa.float32()), 2)
    lancedb.connect(db).create_table("docs", data=pa.table({"id": ["x"], "vector": vector}))
    with pytest.raises(Exception, match=rf"published in {out}, but loading it into the store "
                       rf"failed: .*width 2.*load it again with: beam-embed store {out} "
                       rf"lancedb:{db} --store_table docs"):
        p.run().wait_until_finish()
    assert os.path.exists(os.path.join(out, "manifest.json"))
