"""EmbedTexts through TestPipeline: one Embedding per element equal to what `beam-embed run`
writes for the same records, dead letters equal to its errors files, every element form, a
bad element failing the pipeline by name, and a streaming pipeline (TestStream)."""

from __future__ import annotations

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.testing import test_pipeline, test_stream

from beam_embed import Embedding, EmbedTexts
from tests.api.helpers import POOLINGS, SETTINGS, Collected, cosine, dead_letter_lines, elements
from tests.job_helpers import dead_letters, parquet_rows

pytestmark = pytest.mark.pipeline  # whole pipelines


@pytest.fixture(scope="module")
def embedded(tiny_export):
    """The corpus's elements through EmbedTexts(...).with_exception_handling(): (embeddings,
    dead letters)."""
    collected = Collected()
    with test_pipeline.TestPipeline() as p:
        good, bad = (p | beam.Create(elements())
                     | EmbedTexts(model=tiny_export, pooling=POOLINGS, **SETTINGS)
                     .with_exception_handling())
        collected.of(good, "Good")
        collected.of(bad, "Bad")
    return collected[good], collected[bad]


def test_vectors_equal_the_runs(embedded, reference_run):
    embeddings, _ = embedded
    rows = parquet_rows(reference_run[0])
    assert sorted(e.id for e in embeddings) == sorted(rows) == ["r1", "r2", "r3", "r4"]
    for e in embeddings:
        row = rows[e.id]
        assert isinstance(e, Embedding) and sorted(e.vectors) == sorted(POOLINGS)
        for column, vector in e.vectors.items():
            assert vector.dtype == np.float32 and vector.shape == (8,)
            assert cosine(vector, row[column]) >= 0.99999, (e.id, column)
        assert (e.text, e.num_tokens, e.truncated) == (row["text"], row["num_tokens"],
                                                       row["truncated"])
        assert e.fields == {"topic": row["topic"]} and e.topic == row["topic"]
    assert {e.id: e.truncated for e in embeddings}["r4"] is True
    assert {e.id: e.text for e in embeddings}["r2"] == "a dog ran !"  # cleaned as the run does


def test_dead_letters_equal_the_runs_errors(embedded, reference_run):
    _, dead = embedded
    expected = dead_letter_lines(dead_letters(reference_run[0]))
    assert dead_letter_lines(d.to_json() for d in dead) == expected
    assert {d[0] for d in expected} == {"r5", "r6", "r7", "r8", "r9"}


def test_every_element_form(tiny_export):
    collected = Collected()
    with test_pipeline.TestPipeline() as p:
        good, bad = (p | beam.Create(["the cat", ("k", "a dog"), {"id": 7, "text": "play",
                                                                  "n": [1, 2]},
                                      beam.Row(id="row", text="the bank", year=1999),
                                      {"body": "x", "key": 1}, 3.5])
                     | EmbedTexts(model=tiny_export, pooling=["mean"]).with_exception_handling())
        collected.of(good, "Good")
        collected.of(bad, "Bad")
    found = {e.id: e for e in collected[good]}
    assert sorted(found, key=str) == [7, None, "k", "row"]
    assert found[None].text == "the cat" and found["k"].fields == {}
    assert found[7].fields == {"n": [1, 2]} and found["row"].year == 1999
    reasons = sorted(d.reason for d in collected[bad])
    assert reasons == ["element is of type float; expected a text, an (id, text) pair or a "
                       "dict with a 'text' field", "missing text field 'text'"]
    with test_pipeline.TestPipeline() as p:  # the fields named otherwise
        named = (p | beam.Create([{"body": "the cat", "key": "c1"}])
                 | EmbedTexts(model=tiny_export, pooling=["mean"], text_field="body",
                              id_field="key"))
        collected.of(named)
    (e,) = collected[named]
    assert (e.id, e.text, e.fields) == ("c1", "the cat", {})


def test_bytes_texts_are_read_as_utf8_or_refused_with_the_reason(tiny_export):
    """Bytes as the text of a pair or a dict are the UTF-8 text they encode (the same vectors
    as that str), never their repr; bytes that are not UTF-8, or another binary type, are
    dead letters saying so."""
    collected = Collected()
    with test_pipeline.TestPipeline() as p:
        good, bad = (p | beam.Create([("s", "the café"), ("b", "the café".encode()),
                                      {"id": "d", "text": b"a dog ran"}, ("x", b"\xff\xfecat"),
                                      {"id": "a", "text": bytearray(b"the cat")}])
                     | EmbedTexts(model=tiny_export, poolings=["mean"]).with_exception_handling())
        collected.of(good, "Good")
        collected.of(bad, "Bad")
    found = {e.id: e for e in collected[good]}
    assert sorted(found) == ["b", "d", "s"]
    assert found["b"].text == "the café" and found["d"].text == "a dog ran"
    np.testing.assert_array_equal(found["b"].vectors["mean"], found["s"].vectors["mean"])
    assert sorted((d.id, d.reason) for d in collected[bad]) == [
        ("a", "text field 'text' is bytearray, not a string"),
        ("x", "text is not UTF-8 (invalid start byte at byte 0)")]


def test_a_bad_element_fails_the_pipeline_naming_it(tiny_export):
    with pytest.raises(Exception, match=r"id 'r5' \(empty text; .*with_exception_handling"):
        with test_pipeline.TestPipeline() as p:
            _ = (p | beam.Create([{"id": "r1", "text": "the cat"}, {"id": "r5", "text": "  "}])
                 | EmbedTexts(model=tiny_export, pooling=["mean"]))


def test_sentences_are_split_as_the_run_splits_them(tiny_export):
    collected = Collected()
    with test_pipeline.TestPipeline() as p:
        out = (p | beam.Create([("d", "The cat sat. A dog ran!")])
               | EmbedTexts(model=tiny_export, pooling=["mean"], split="sentences"))
        collected.of(out)
    assert sorted((e.id, e.text) for e in collected[out]) == [("d#s0", "The cat sat."),
                                                              ("d#s1", "A dog ran!")]


def test_a_stream_is_embedded_as_a_batch_is(tiny_export, embedded):
    options = PipelineOptions()
    options.view_as(StandardOptions).streaming = True
    records = elements()
    stream = (test_stream.TestStream().add_elements(records[:4]).advance_watermark_to(10)
              .add_elements(records[4:]).advance_watermark_to(20)
              .advance_watermark_to_infinity())
    collected = Collected()
    with test_pipeline.TestPipeline(options=options) as p:
        good, bad = (p | stream
                     | EmbedTexts(model=tiny_export, pooling=POOLINGS, **SETTINGS)
                     .with_exception_handling())
        collected.of(good, "Good")
        collected.of(bad, "Bad")
    batch = {e.id: e for e in embedded[0]}
    streamed = collected[good]
    assert sorted(e.id for e in streamed) == sorted(batch)
    for e in streamed:
        for column, vector in e.vectors.items():
            np.testing.assert_allclose(vector, batch[e.id].vectors[column], atol=1e-6)
    assert dead_letter_lines(d.to_json() for d in collected[bad]) == \
        dead_letter_lines(d.to_json() for d in embedded[1])


def test_windowed_input_is_refused_with_the_way_out(tiny_export):
    with pytest.raises(ValueError, match="globally windowed input.*EmbeddingModelHandler"):
        with test_pipeline.TestPipeline() as p:
            _ = (p | beam.Create(["a"]) | beam.WindowInto(beam.window.FixedWindows(10))
                 | EmbedTexts(model=tiny_export, pooling=["mean"]))
