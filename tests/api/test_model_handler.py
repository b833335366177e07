"""EmbeddingModelHandler: RunInference's results equal the run's vectors, KeyedModelHandler keeps
the keys, a batch's results are that batch's, bad texts fail their batch by name, the model is
loaded once a process, and the keywords are the run's settings."""

from __future__ import annotations

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.ml.inference.base import KeyedModelHandler, PredictionResult, RunInference
from apache_beam.testing import test_pipeline

from beam_embed import EmbeddingModelHandler
from beam_embed.models.spec import encoder_spec
from tests.api.helpers import ROWS, SETTINGS, Collected, cosine
from tests.job_helpers import parquet_rows

HANDLER_SETTINGS = {k: v for k, v in SETTINGS.items() if k != "batch_tokens"}
GOOD = {r["id"]: r["text"] for r in ROWS if r["id"] in ("r1", "r2", "r3", "r4")}


def _check(results, rows, column: str, keyed: bool) -> None:
    ids = {text: rid for rid, text in GOOD.items()}
    assert len(results) == len(GOOD)
    for item in results:
        rid, result = item if keyed else (ids[item.example], item)
        assert isinstance(result, PredictionResult) and result.model_id == "tiny-bert"
        assert result.example == GOOD[rid]  # the text as given, not as cleaned
        assert result.inference.dtype == np.float32 and result.inference.shape == (8,)
        assert cosine(result.inference, rows[rid][column]) >= 0.99999, (rid, column)


@pytest.mark.pipeline
def test_run_inference_gives_the_runs_vectors_and_keyed_keeps_keys(tiny_export, reference_run):
    rows = parquet_rows(reference_run[0])
    collected, outputs = Collected(), {}
    with test_pipeline.TestPipeline() as p:
        texts = p | "Texts" >> beam.Create(list(GOOD.values()))
        pairs = p | "Pairs" >> beam.Create(list(GOOD.items()))
        for pooling in ("mean", "cls"):
            handler = EmbeddingModelHandler(model=tiny_export, pooling=pooling,
                                            max_batch_size=2, **HANDLER_SETTINGS)
            outputs[pooling, False] = texts | f"Infer{pooling}" >> RunInference(handler)
            outputs[pooling, True] = (pairs | f"InferKeyed{pooling}"
                                      >> RunInference(KeyedModelHandler(handler)))
        for (pooling, keyed), pcoll in outputs.items():
            collected.of(pcoll, f"{pooling}{keyed}")
    for (pooling, keyed), pcoll in outputs.items():
        _check(collected[pcoll], rows, pooling, keyed)


def test_a_batch_gives_its_own_results_in_its_order(tiny_export):
    handler = EmbeddingModelHandler(model=tiny_export, pooling="mean")
    model = handler.load_model()
    first = handler.run_inference(["a dog", "the cat sat", "play"], model)
    second = handler.run_inference(["the river bank"], model)
    assert [r.example for r in first] == ["a dog", "the cat sat", "play"]
    assert [r.example for r in second] == ["the river bank"]
    alone = handler.run_inference(["the cat sat"], model)[0].inference
    np.testing.assert_allclose(first[1].inference, alone, atol=1e-6)


def test_a_text_the_run_would_dead_letter_fails_its_batch_by_name(tiny_export):
    handler = EmbeddingModelHandler(model=tiny_export, pooling="mean", max_text_bytes=20)
    model = handler.load_model()
    with pytest.raises(ValueError, match=r"text 1 of the batch: empty text"):
        handler.run_inference(["a dog", " \t "], model)
    with pytest.raises(ValueError, match=r"text 0 of the batch: text is 25 bytes, over "
                                         r"--max-text-bytes=20"):
        handler.run_inference(["x" * 25], model)
    with pytest.raises(TypeError, match=r"text 0 of the batch is of type bytes"):
        handler.run_inference([b"a dog"], model)


@pytest.mark.pipeline
def test_the_model_loads_once_for_every_batch(fresh_export, loads):
    handler = EmbeddingModelHandler(model=fresh_export, pooling="mean", max_batch_size=1)
    assert not loads  # resolving the model loads nothing
    collected = Collected()
    with test_pipeline.TestPipeline() as p:
        out = (p | beam.Create([f"the cat sat {i}" for i in range(12)])
               | RunInference(handler))
        collected.of(out)
    assert len(collected[out]) == 12
    assert sum(h.endswith("encoder") for h in loads) == 1, loads


@pytest.mark.parametrize("keywords, error, message", [
    ({"pooling": "mean,cls"}, ValueError, r"one vector a text: pooling= names one pooling, got "
                                          r"'mean,cls'"),
    ({"max_seq_len": 8}, TypeError, r"unexpected keyword argument 'max_seq_len'; did you mean "
                                    r"max_seq_length\?.*it takes .*pooling"),
    ({"batch_tokens": 64}, TypeError, "'batch_tokens'"),  # Beam's BatchElements counts texts
    ({"long_text": "split"}, ValueError, r"unknown --long_text 'split'; expected one of "
                                         r"\['truncate', 'chunk'\]"),
    ({"max_seq_length": 100}, ValueError, r"--max_seq_length 100 is more than the 64 token "
                                          r"positions"),
])
def test_keywords_are_the_runs_settings(tiny_export, keywords, error, message):
    with pytest.raises(error, match=message):
        EmbeddingModelHandler(model=tiny_export, **keywords)


def test_defaults_are_the_models_and_beams_keywords_go_to_beam(tiny_export):
    default = EmbeddingModelHandler(model=tiny_export)  # the model's first recommended
    assert default.spec.poolings == encoder_spec(tiny_export).poolings[:1]
    assert EmbeddingModelHandler(model=tiny_export, min_batch_size=3, max_batch_size=5
                                 ).batch_elements_kwargs() == {"min_batch_size": 3,
                                                               "max_batch_size": 5}
