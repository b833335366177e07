"""EmbeddingModelHandler: a Beam ModelHandler over texts for RunInference (and, wrapped, for
KeyedModelHandler and MLTransform), on the job's encoder: each text checked and cleaned as the
run does, the batch embedded in one call, one PredictionResult per text of the batch given."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from apache_beam.ml.inference.base import ModelHandler, PredictionResult

from beam_embed.api.elements import prepared_text
from beam_embed.api.keywords import explicit_keywords, model_spec, one_pooling, run_settings
from beam_embed.pipeline.job.sources import NAMESPACE

__all__ = ["EmbeddingModelHandler", "estimated_tokens"]

# The run's settings the handler takes, under the run's names.
SETTINGS = ("model", "pooling", "encoder", "preprocessor", "elmo_signature", "normalize",
            "max_seq_length", "long_text", "precision", "accelerator", "max_batch_size",
            "clean", "max_text_bytes", "prompt_name", "prompt")
# Beam 2.77 ModelHandler's own keywords, handed to ModelHandler.__init__ as given.
BEAM_KEYWORDS = ("min_batch_size", "max_batch_duration_secs", "max_batch_weight",
                 "element_size_fn", "batch_length_fn", "batch_bucket_boundaries", "large_model",
                 "model_copies", "env_vars")


def estimated_tokens(text) -> int:
    """A text's tokens as the run estimates them for its token budget ([CLS], [SEP] and
    WordPiece's ~1.3 pieces a word: 2 + a quarter of its characters); 1 for a non-text, which
    its batch refuses."""
    return 2 + (len(text) + 3) // 4 if isinstance(text, str) else 1


def _per_row(size_fn: Callable[[Any], int], floor: int) -> Callable[[Any], int]:
    """`size_fn` counted as at least `floor`: under a size limit of rows * floor, no batch
    holds more than `rows` elements."""
    return lambda element: max(size_fn(element), floor)


class EmbeddingModelHandler(ModelHandler[str, PredictionResult, object]):
    """A ModelHandler for `RunInference`: each text -> a `PredictionResult` whose `inference` is
    its float32 vector (`example`: the text as given; `model_id`: the model's name).

    `model` (a preset, an export-model folder or a SavedModel), `pooling` (one; default the
    model's first recommended) and the run's other model settings (`normalize`,
    `max_seq_length`, `long_text`, `precision`, `accelerator`, `encoder`, `preprocessor`,
    `elmo_signature`, `prompt_name`, `prompt`, `clean`, `max_text_bytes`), checked as
    `beam-embed run` checks its flags.

    Batches are RunInference's (Beam's BatchElements), shaped by Beam's ModelHandler keywords,
    all taken: `min_batch_size`, `max_batch_size` (512 texts), `max_batch_duration_secs`
    (streaming), `batch_length_fn` and `batch_bucket_boundaries` (length buckets, with
    `max_batch_duration_secs`), `large_model`, `model_copies` (one model shared by the processes
    of a machine, or that many), `env_vars`. A token budget as the run has one (its
    `--batch_tokens`) is `max_batch_weight` with `element_size_fn` (default: the run's estimate
    of a text's tokens, `estimated_tokens`). Beam 2.77's BatchElements has no
    `max_batch_weight` (RunInference fails on it with Beam's own handlers): it limits the sum of
    `element_size_fn` over a batch by its max_batch_size, so `batch_elements_kwargs()` gives it
    the weight there, each text counted as at least max_batch_weight / max_batch_size tokens,
    which keeps max_batch_size too. The model is loaded once a process (or shared, as above).
    Wrap it in `KeyedModelHandler` for (key, text) pairs.

    Constructing it loads no TensorFlow (for a preset or an export-model folder): the workers
    load the model, in `load_model`.

    A text the run would dead-letter (empty after cleaning, over max_text_bytes, with NUL bytes,
    not a string) fails its batch with a ValueError naming it;
    `RunInference(...).with_exception_handling()` sets such batches aside."""

    @explicit_keywords
    def __init__(self, model: str | None = None, pooling: str | None = None, *,
                 normalize: bool | None = None, max_seq_length: int | None = None,
                 long_text: str | None = None, precision: str | None = None,
                 accelerator: str | None = None, encoder: str | None = None,
                 preprocessor: str | None = None, elmo_signature: str | None = None,
                 prompt_name: str | None = None, prompt: str | None = None,
                 clean: bool | None = None, max_text_bytes: int | None = None,
                 min_batch_size: int | None = None, max_batch_size: int | None = None,
                 max_batch_duration_secs: int | None = None,
                 max_batch_weight: int | None = None,
                 element_size_fn: Callable[[Any], int] | None = None,
                 batch_length_fn: Callable[[Any], int] | None = None,
                 batch_bucket_boundaries: list[int] | None = None,
                 large_model: bool = False, model_copies: int | None = None,
                 env_vars: dict[str, str] | None = None):
        given = dict(locals())
        self.settings = run_settings("EmbeddingModelHandler",
                                     {k: given[k] for k in SETTINGS}, SETTINGS)
        self.spec = one_pooling("EmbeddingModelHandler", model_spec(self.settings),
                                given=pooling is not None)
        self.column = self.spec.parsed_poolings()[0].column
        if element_size_fn is None and max_batch_weight is not None:
            element_size_fn = estimated_tokens
        super().__init__(
            min_batch_size=min_batch_size, max_batch_size=self.settings.max_batch_size,
            max_batch_duration_secs=max_batch_duration_secs, max_batch_weight=max_batch_weight,
            element_size_fn=element_size_fn, batch_length_fn=batch_length_fn,
            batch_bucket_boundaries=batch_bucket_boundaries, large_model=large_model,
            model_copies=model_copies, env_vars=dict(env_vars or {}))

    def batch_elements_kwargs(self) -> dict[str, Any]:
        """The batching keywords given, as Beam's BatchElements takes them (RunInference
        passes them on): Beam's names (`length_fn`, `bucket_boundaries`), and a
        `max_batch_weight` given as BatchElements' limit of the summed element sizes (see the
        class's docstring)."""
        found = dict(super().batch_elements_kwargs())
        weight = found.pop("max_batch_weight", None)
        if weight is not None:
            rows = found["max_batch_size"]
            found["max_batch_size"] = weight
            found["element_size_fn"] = _per_row(found["element_size_fn"], -(-weight // rows))
        return found

    def load_model(self):
        """The model, in the worker process. TensorFlow loads without its start-up lines unless
        the user asked for them (BEAM_EMBED_VERBOSE=1, TF_CPP_MIN_LOG_LEVEL 0 or 1): its C++
        log level is read as errors-only while it loads, and the environment variables that
        say so are removed again after (models/tf_import.py); nothing else of the process is
        changed."""
        from beam_embed.models.tf_import import import_tensorflow
        from beam_embed.process.log import library_quiet_wanted

        import_tensorflow(library_quiet_wanted())
        return self.spec.build()

    def vectors(self, texts: Sequence[str], model) -> np.ndarray:
        """float32 [len(texts), width]: the texts checked, cleaned and embedded in one call."""
        s = self.settings
        prepared = [prepared_text(t, s.clean, s.max_text_bytes, f"text {i} of the batch")
                    for i, t in enumerate(texts)]
        return model.embed(prepared).vectors[self.column]

    def run_inference(self, batch: Sequence[str], model, inference_args=None
                      ) -> list[PredictionResult]:
        vectors = self.vectors(batch, model)
        return [PredictionResult(text, np.array(v, np.float32), self.spec.name)
                for text, v in zip(batch, vectors)]

    def get_num_bytes(self, batch: Sequence[str]) -> int:
        """Text bytes (Beam's default pickles the whole batch on every call)."""
        return sum(len(t) for t in batch if isinstance(t, str))

    def get_metrics_namespace(self) -> str:
        return NAMESPACE
