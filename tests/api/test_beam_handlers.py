"""What RunInference asks a handler: TextEmbeddings hands MLTransform's RunInference a handler
that answers every ModelHandler question as the EmbeddingModelHandler it wraps (sharing, copies,
batching, ...); EmbeddingModelHandler takes every Beam 2.77 ModelHandler keyword and gives
BatchElements its batching, a token budget included."""

from __future__ import annotations

import inspect

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.ml.inference.base import ModelHandler, RunInference
from apache_beam.ml.transforms.base import MLTransform
from apache_beam.testing import test_pipeline

from beam_embed import EmbeddingModelHandler, TextEmbeddings, load_encoder
from beam_embed.api.model_handler import estimated_tokens
from beam_embed.api.text_embeddings import _ColumnHandler
from tests.api.helpers import Collected

# The ModelHandler methods a wrapper answers from what it wraps (Beam's own wrappers forward
# them); the builders (with_*) return a new wrapper instead, and the three the column handler
# adapts (load_model, run_inference, get_num_bytes) are checked by running it.
ADAPTED = {"load_model", "run_inference", "get_num_bytes"}
FORWARDED = sorted(n for n, m in vars(ModelHandler).items()
                   if inspect.isfunction(m) and not n.startswith(("_", "with_"))
                   and n not in ADAPTED)


def _run_inference_handlers(pipeline) -> list:
    """The model handlers of the RunInference transforms applied in `pipeline`."""
    found = []

    class Visitor(beam.pipeline.PipelineVisitor):
        def enter_composite_transform(self, node):
            if isinstance(node.transform, RunInference):
                found.append(node.transform._model_handler)

    pipeline.visit(Visitor())
    return found


def test_mltransform_runs_a_handler_that_shares_and_reports_the_copies(tiny_export, tmp_path):
    for keywords, shared, copies in [({"large_model": True, "model_copies": 2}, True, 2),
                                     ({"large_model": True}, True, 1), ({}, False, 1)]:
        p = beam.Pipeline("DirectRunner")
        _ = (p | beam.Create([{"title": "a cat"}])
             | MLTransform(write_artifact_location=str(tmp_path / str(len(keywords))))
             .with_transform(TextEmbeddings(columns=["title"], model=tiny_export, **keywords)))
        [handler] = _run_inference_handlers(p)
        assert isinstance(handler, _ColumnHandler)
        assert handler.share_model_across_processes() is shared, keywords
        assert handler.model_copies() == copies, keywords


class _Answers(ModelHandler):
    """A handler answering each ModelHandler question with its own name."""

    def __getattribute__(self, name):
        if name in FORWARDED:
            return lambda *args, **kwargs: ("answered", name, args)
        return super().__getattribute__(name)


def test_the_column_handler_forwards_every_question_beam_asks(tiny_export):
    assert {"share_model_across_processes", "model_copies", "batch_elements_kwargs",
            "get_metrics_namespace", "update_model_path", "get_resource_hints",
            "validate_inference_args", "should_skip_batching", "set_environment_vars",
            "get_preprocess_fns", "get_postprocess_fns"} <= set(FORWARDED)
    manager = TextEmbeddings(columns=["title"], model=tiny_export)
    manager.handler = _Answers()
    column = _ColumnHandler(manager)
    for name in FORWARDED:
        parameters = list(inspect.signature(getattr(ModelHandler, name)).parameters)[1:]
        args = tuple(f"arg{i}" for i in range(len(parameters)))
        assert getattr(column, name)(*args) == ("answered", name, args), name


EVERY = {"min_batch_size": 2, "max_batch_size": 8, "max_batch_duration_secs": 5,
         "max_batch_weight": 40, "element_size_fn": len, "batch_length_fn": len,
         "batch_bucket_boundaries": [8, 32], "large_model": True, "model_copies": 3,
         "env_vars": {"SOME_VAR": "1"}}


def test_every_beam_keyword_is_taken_and_given_to_beam(tiny_export):
    beam_keywords = set(inspect.signature(ModelHandler.__init__).parameters) - {"self",
                                                                               "kwargs"}
    assert beam_keywords | {"env_vars"} == set(EVERY)  # Beam 2.77's, all of them
    handler = EmbeddingModelHandler(model=tiny_export, **EVERY)
    given = handler.batch_elements_kwargs()
    assert {k: v for k, v in given.items() if k != "element_size_fn"} == {
        "min_batch_size": 2, "max_batch_size": 40, "max_batch_duration_secs": 5,
        "length_fn": len, "bucket_boundaries": [8, 32]}
    # the weight is BatchElements' size limit; each text counts at least 40 / 8 = 5
    assert given["element_size_fn"]("abc") == 5 and given["element_size_fn"]("x" * 30) == 30
    assert handler.share_model_across_processes() and handler.model_copies() == 3
    assert handler._env_vars == {"SOME_VAR": "1"}
    plain = EmbeddingModelHandler(model=tiny_export, min_batch_size=3, max_batch_size=5)
    assert plain.batch_elements_kwargs() == {"min_batch_size": 3, "max_batch_size": 5}
    assert not plain.share_model_across_processes() and plain.model_copies() == 1


TEXTS = ["a", "the cat sat on the mat", "a dog ran in the big park today", "play",
         "the river bank was big and small and the money was big", "mat", "the cat",
         "a dog and a cat and a river and a bank"]


@pytest.mark.pipeline
def test_a_token_budget_batches_run_inference_within_it(tiny_export):
    """max_batch_weight as the run's --batch_tokens: RunInference runs (Beam's own handlers
    fail on the keyword in 2.77), its batches hold at most 24 estimated tokens and 4 texts,
    and the vectors are the encoder's."""
    handler = EmbeddingModelHandler(model=tiny_export, pooling="mean", max_batch_weight=24,
                                    max_batch_size=4)
    collected = Collected()
    with test_pipeline.TestPipeline() as p:
        texts = p | beam.Create(TEXTS)
        batches = texts | beam.BatchElements(**handler.batch_elements_kwargs())
        results = texts | RunInference(handler)
        collected.of(batches, "Batches")
        collected.of(results, "Results")
    batches = collected[batches]
    assert sorted(t for b in batches for t in b) == sorted(TEXTS) and len(batches) > 2
    for batch in batches:
        assert len(batch) <= 4
        assert len(batch) == 1 or sum(estimated_tokens(t) for t in batch) <= 24, batch
    expected = load_encoder(tiny_export, pooling="mean").encode(TEXTS)
    got = {r.example: r.inference for r in collected[results]}
    np.testing.assert_allclose(np.stack([got[t] for t in TEXTS]), expected, atol=1e-5)


def test_the_documented_keywords_are_in_the_signatures():
    """Explicit keywords (IDE completion, inspect.signature), the command line's names."""
    import beam_embed

    model = {"model", "pooling", "normalize", "max_seq_length", "long_text", "precision",
             "accelerator", "encoder", "preprocessor", "elmo_signature", "clean",
             "max_text_bytes", "prompt_name", "prompt"}
    expected = {
        "EmbedTexts": model | {"batch_tokens", "max_batch_size", "split", "text_field",
                               "id_field", "progress_every"},
        "EmbeddingModelHandler": model | set(EVERY),
        "TextEmbeddings": model | set(EVERY) | {"columns", "inference_args"},
        "WriteEmbeddings": {"output", "format", "vector_dtype", "calibration_texts",
                            "num_shards", "include_text", "metadata_fields", "overwrite"},
        "load_encoder": model,
    }
    for name, keywords in expected.items():
        parameters = inspect.signature(getattr(beam_embed, name)).parameters
        assert not [p for p in parameters.values() if p.kind == p.VAR_KEYWORD], name
        assert keywords <= set(parameters), (name, keywords - set(parameters))
        assert all(p.annotation is not inspect.Parameter.empty for n, p in parameters.items()
                   if n != "self"), name


def test_the_command_lines_names_and_the_earlier_ones(tiny_export):
    """`pooling` as --pooling; `poolings` still taken, with a DeprecationWarning."""
    from beam_embed import EmbedTexts

    assert EmbedTexts(model=tiny_export, pooling="mean,cls").settings.pooling == ("mean", "cls")
    with pytest.warns(DeprecationWarning, match=r"EmbedTexts\(poolings=...\) is now "
                                                r"EmbedTexts\(pooling=...\)"):
        earlier = EmbedTexts(model=tiny_export, poolings=["cls"])
    assert earlier.settings.pooling == ("cls",)
    with pytest.raises(TypeError, match="both pooling= and its earlier name poolings="):
        EmbedTexts(model=tiny_export, pooling="mean", poolings=["cls"])
    with pytest.raises(TypeError, match=r"'pooling_'; did you mean pooling\?"):
        EmbedTexts(model=tiny_export, pooling_="mean")
