"""TextEmbeddings in MLTransform: each named column replaced by the run's vector of its text, the
other columns as they were, dicts and Beam Rows alike; the artifacts MLTransform writes read
back by a second MLTransform."""

from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.ml.transforms.base import MLTransform
from apache_beam.testing import test_pipeline

from beam_embed import TextEmbeddings
from tests.api.helpers import ROWS, SETTINGS, Collected, cosine
from tests.job_helpers import parquet_rows

pytestmark = pytest.mark.pipeline  # whole pipelines

MODEL_SETTINGS = {k: v for k, v in SETTINGS.items() if k != "batch_tokens"}
TEXT = {r["id"]: r["text"] for r in ROWS}
PAIRS = [("r1", "r2"), ("r3", "r4")]  # the ids of each element's columns a and b


def _elements():
    return [{"n": i, "a": TEXT[a], "b": TEXT[b], "note": "kept"} for i, (a, b) in enumerate(PAIRS)]


def _check(outputs, rows) -> None:
    assert sorted(o["n"] for o in outputs) == [0, 1]
    for o in outputs:
        assert sorted(o) == ["a", "b", "n", "note"] and o["note"] == "kept"
        for column, rid in zip(("a", "b"), PAIRS[o["n"]]):
            vector = o[column]
            assert isinstance(vector, list) and len(vector) == 8
            assert all(isinstance(x, float) for x in vector)
            assert cosine(vector, rows[rid]["mean"]) >= 0.99999, (o["n"], column)


def test_mltransform_replaces_the_columns_with_the_runs_vectors(tiny_export, reference_run,
                                                                tmp_path):
    rows = parquet_rows(reference_run[0])
    collected = Collected()
    manager = TextEmbeddings(columns=["a", "b"], model=tiny_export, pooling="mean",
                             **MODEL_SETTINGS)
    with test_pipeline.TestPipeline() as p:
        dicts = (p | "Dicts" >> beam.Create(_elements())
                 | "Embed" >> MLTransform(write_artifact_location=str(tmp_path / "artifacts"))
                 .with_transform(manager))
        beam_rows = (p | "Rows" >> beam.Create([beam.Row(**e) for e in _elements()])
                     | "EmbedRows" >> MLTransform(write_artifact_location=str(tmp_path / "rows"))
                     .with_transform(manager))
        collected.of(dicts, "Dicts")
        collected.of(beam_rows, "Rows")
    _check(collected[dicts], rows)
    from_rows = collected[beam_rows]
    assert all(isinstance(r, beam.Row) for r in from_rows)
    _check([r._asdict() for r in from_rows], rows)
    with test_pipeline.TestPipeline() as p:  # the saved transform, read back as MLTransform does
        again = (p | beam.Create(_elements())
                 | MLTransform(read_artifact_location=str(tmp_path / "artifacts")))
        collected.of(again)
    _check(collected[again], rows)


def test_keywords_are_checked_as_the_handlers(tiny_export):
    with pytest.raises(TypeError, match=r"TextEmbeddings\(\) got an unexpected keyword "
                                        r"argument 'hub_url'"):
        TextEmbeddings(columns=["a"], hub_url="https://tfhub.dev/x")
    with pytest.raises(ValueError, match="pooling= names one pooling"):
        TextEmbeddings(columns=["a"], model=tiny_export, pooling=["mean", "cls"])
