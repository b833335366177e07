"""EmbeddingModelHandler: a Beam ModelHandler over texts for RunInference (and, wrapped, for
KeyedModelHandler and MLTransform), on the job's encoder: each text checked and cleaned as the
run does, the batch embedded in one call, one PredictionResult per text of the batch given."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from apache_beam.ml.inference.base import ModelHandler, PredictionResult

from beam_embed.api.elements import prepared_text
from beam_embed.api.keywords import MODEL, model_spec, one_pooling, run_settings
from beam_embed.pipeline.job.sources import NAMESPACE

__all__ = ["EmbeddingModelHandler"]

ACCEPTED = ("pooling", *MODEL, "max_batch_size", "clean", "max_text_bytes")
BEAM_KEYWORDS = ("min_batch_size", "max_batch_duration_secs", "large_model", "model_copies")


class EmbeddingModelHandler(ModelHandler[str, PredictionResult, object]):
    """A ModelHandler for `RunInference`: each text -> a `PredictionResult` whose `inference` is
    its float32 vector (`example`: the text as given; `model_id`: the model's name).

    `model`, `pooling` (one; default the model's first recommended) and the run's other model
    settings as keywords (`normalize`, `max_seq_length`, `long_text`, `precision`,
    `accelerator`, `encoder`, `preprocessor`, `elmo_signature`, `clean`, `max_text_bytes`),
    checked as `beam-embed run` checks its flags. Batches: RunInference's (Beam's
    BatchElements, which counts texts: up to `max_batch_size`, 512); Beam's own
    `min_batch_size`, `max_batch_duration_secs` (streaming), `large_model` and `model_copies`
    are passed to Beam. The model is loaded once a process and shared as Beam's handlers share
    theirs. Wrap it in `KeyedModelHandler` for (key, text) pairs.

    A text the run would dead-letter (empty after cleaning, over max_text_bytes, with NUL bytes,
    not a string) fails its batch with a ValueError naming it;
    `RunInference(...).with_exception_handling()` sets such batches aside."""

    def __init__(self, model: str | None = None, pooling: str | None = None, **keywords):
        beam_keywords = {k: keywords.pop(k) for k in BEAM_KEYWORDS if k in keywords}
        self.settings = run_settings("EmbeddingModelHandler",
                                     {"model": model, "pooling": pooling, **keywords},
                                     ACCEPTED + BEAM_KEYWORDS)
        self.spec = one_pooling("EmbeddingModelHandler", model_spec(self.settings),
                                given=pooling is not None)
        self.column = self.spec.parsed_poolings()[0].column
        super().__init__(max_batch_size=self.settings.max_batch_size, **beam_keywords)

    def load_model(self):
        from beam_embed.models.tf_import import import_tensorflow

        import_tensorflow()  # quietly, in a worker process too
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
