"""EmbedTexts: a PTransform from texts to one Embedding per element, through the job's own
stages: the elements read as `run` reads records (elements.py), cleaned, empty texts set aside
and optionally split into sentences (PrepareTexts), embedded by EmbedRecords (the run's
length-sorted batches under a token budget, its RunInference stage, its long-text policy)."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence

import apache_beam as beam

from beam_embed.api.elements import Embedding, element_record, embeddings_of
from beam_embed.api.keywords import (
    BATCHES,
    MODEL,
    TEXTS,
    explicit_keywords,
    model_spec,
    renamed_keyword,
    run_settings,
)
from beam_embed.pipeline.common.rows.records import DeadLetter
from beam_embed.pipeline.job.embed import EmbedRecords
from beam_embed.pipeline.job.sources import DEAD, PrepareTexts

__all__ = ["EmbedTexts"]

ACCEPTED = ("pooling", *MODEL, *BATCHES, *TEXTS, "split", "progress_every")


class _ReadElements(beam.DoFn):
    def __init__(self, text_field: str, id_field: str | None, max_text_bytes: int):
        self._args = (text_field, id_field, max_text_bytes)

    def process(self, element):
        found = element_record(element, *self._args)
        yield beam.pvalue.TaggedOutput(DEAD, found) if isinstance(found, DeadLetter) else found


def _fail(dead: DeadLetter):
    raise ValueError(f"EmbedTexts could not embed the element with id {dead.id!r} ({dead.reason}; "
                     f"its text starts {dead.excerpt[:80]!r}); EmbedTexts(...)."
                     "with_exception_handling() gives such elements as dead letters instead")


class EmbedTexts(beam.PTransform):
    """Embeds a PCollection of texts: one `Embedding` per element, as `beam-embed run` embeds a
    record (its batching, speed path, long-text policy and cleaning).

    Elements: a text; an `(id, text)` pair; a dict (or a `beam.Row`) with the text under
    `text_field` ("text") and the id under `id_field` ("id"), its other fields kept on the
    Embedding. A pair's or a dict's text given as bytes is the UTF-8 text they encode (bytes
    that are not UTF-8, and other binary types, are dead letters saying so). Keywords: the run's
    settings of the same names (`beam-embed run --help`), with the same checks: `model` (a
    preset, an export-model folder or a SavedModel), `pooling` (one or a list, as --pooling;
    default the model's recommended; the earlier keyword `poolings` still works, with a
    DeprecationWarning), `normalize`, `max_seq_length`, `long_text`
    ("truncate" or "chunk"), `batch_tokens`, `max_batch_size`, `precision`, `accelerator`,
    `encoder`, `preprocessor`, `elmo_signature`, `prompt_name` (one of the model's prompts),
    `prompt` (a literal prefix; "" for none), `clean`, `split` ("sentences": one Embedding
    per sentence, ids `ID#sN`), `max_text_bytes`, `text_field`, `id_field`, `progress_every`
    (seconds between progress lines on stderr; default 0, none). A bad value raises the
    command line's ValueError; a keyword EmbedTexts does not take, a TypeError naming those it
    does. The model is resolved here, before the pipeline runs, from its files (a preset
    or an export-model folder loads no TensorFlow here); each worker process loads it once.

    An element that cannot be embedded (an empty text, one over max_text_bytes, a text that is
    not a string, an encoder failure) fails the pipeline with a message naming it; with
    `.with_exception_handling()` the transform returns `(embeddings, dead_letters)` instead,
    each dead letter a `DeadLetter` with the reason a run's errors files give.

    Input in the global window, bounded or streaming (the batches are sorted within each
    bundle); the Embeddings come out at the end of the global window, as RunInference's
    results do. For windowed streams use `EmbeddingModelHandler` with RunInference, which
    batches per window."""

    @explicit_keywords
    def __init__(self, model: str | None = None, pooling: str | Sequence[str] | None = None,
                 *, normalize: bool | None = None, max_seq_length: int | None = None,
                 long_text: str | None = None, batch_tokens: int | None = None,
                 max_batch_size: int | None = None, precision: str | None = None,
                 accelerator: str | None = None, encoder: str | None = None,
                 preprocessor: str | None = None, elmo_signature: str | None = None,
                 prompt_name: str | None = None, prompt: str | None = None,
                 clean: bool | None = None, split: str | None = None,
                 max_text_bytes: int | None = None, text_field: str | None = None,
                 id_field: str | None = None, progress_every: float | None = None,
                 poolings: Sequence[str] | None = None):
        super().__init__()
        given = {k: v for k, v in locals().items() if k in ACCEPTED}
        given["pooling"] = renamed_keyword("EmbedTexts", "poolings", "pooling", poolings, pooling)
        self.settings = run_settings("EmbedTexts", given, ACCEPTED, progress_every=0.0)
        if self.settings.split == "chunks":  # its rows' parent and offsets are a run's columns
            raise ValueError("EmbedTexts: split 'chunks' is `beam-embed run --split chunks`'s; "
                             "expected split 'none' or 'sentences'")
        self.spec = model_spec(self.settings)
        self._dead_letters = False

    def with_exception_handling(self) -> EmbedTexts:
        """This transform returning `(embeddings, dead_letters)` instead of failing on a bad
        element."""
        handled = copy.copy(self)
        handled._dead_letters = True
        return handled

    def expand(self, pcoll):
        from beam_embed.pipeline.job.resolved import check_accelerator, worker_threads

        if not pcoll.windowing.is_default():
            raise ValueError("EmbedTexts takes globally windowed input (its batches are sorted "
                             "by length across the window); window its output, or use "
                             "RunInference with EmbeddingModelHandler, which batches per window")
        s, options = self.settings, pcoll.pipeline.options
        spec = dataclasses.replace(self.spec, **dict(zip(
            ("intra_op_threads", "inter_op_threads"), worker_threads(options))))
        check_accelerator(spec, options)
        read = (pcoll | "ReadElements" >> beam.ParDo(_ReadElements(
            s.text_field, s.id_field, s.max_text_bytes)).with_outputs(DEAD, main="records"))
        prepared = (read.records | "PrepareTexts" >> beam.ParDo(PrepareTexts(s.clean, s.split))
                    .with_outputs(DEAD, main="records"))
        embedded = prepared.records | "EmbedRecords" >> EmbedRecords(
            spec, s.batch_tokens, s.max_batch_size, s.progress_every, library=True)
        embeddings = (embedded["batches"] | "ToEmbeddings" >> beam.FlatMap(embeddings_of)
                      .with_output_types(Embedding))
        dead = ((read[DEAD], prepared[DEAD], embedded["dead"])
                | "DeadLetters" >> beam.Flatten().with_output_types(DeadLetter))
        if self._dead_letters:
            return embeddings, dead
        _ = dead | "FailOnDeadLetter" >> beam.Map(_fail)
        return embeddings
