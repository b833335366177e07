"""TextEmbeddings: an EmbeddingsManager for MLTransform on the job's encoder (through
EmbeddingModelHandler), a drop-in for Beam's TensorflowHubTextEmbeddings: each named column of
each dict (or Beam Row) replaced by its vector, a list of floats as Beam's managers give."""

from __future__ import annotations

from collections.abc import Sequence

import apache_beam as beam
from apache_beam.ml.inference.base import ModelHandler, RunInference
from apache_beam.ml.transforms.base import EmbeddingsManager

from beam_embed.api import model_handler
from beam_embed.api.keywords import check_keywords
from beam_embed.api.model_handler import EmbeddingModelHandler

__all__ = ["TextEmbeddings"]

# EmbeddingsManager's own keywords (the batch sizes are the handler's settings).
MANAGER_KEYWORDS = ("large_model", "inference_args")


class _ColumnHandler(ModelHandler):
    """Dicts in, dicts out: the manager's columns' texts embedded by the handler in one call
    (the manager's type adapter takes them out and puts the vectors back)."""

    def __init__(self, manager: TextEmbeddings):
        super().__init__()
        self._adapter = manager.type_adapter
        self._handler = manager.get_model_handler()

    def load_model(self):
        return self._handler.load_model()

    def run_inference(self, batch: Sequence[dict], model, inference_args=None) -> list:
        vectors = self._handler.vectors(self._adapter.input_fn(batch), model)
        return self._adapter.output_fn(batch, vectors.tolist())

    def batch_elements_kwargs(self):
        return self._handler.batch_elements_kwargs()

    def get_num_bytes(self, batch) -> int:
        return self._handler.get_num_bytes(self._adapter.input_fn(batch))

    def get_metrics_namespace(self) -> str:
        return self._handler.get_metrics_namespace()

    def share_model_across_processes(self) -> bool:
        return self._handler.share_model_across_processes()


class TextEmbeddings(EmbeddingsManager):
    """For `MLTransform`: replaces each of `columns` (text) with its embedding, a list of
    floats, as Beam's `TensorflowHubTextEmbeddings` does.

    `model`, `pooling` (one) and the run's other model settings as keywords, as
    `EmbeddingModelHandler` takes them (with Beam's batching keywords); `large_model` and
    `inference_args` as Beam's managers take them. Every named column of
    every element must hold a text the run would embed (a non-empty string): another value
    fails its batch with a message naming it (`MLTransform(...).with_exception_handling()`
    sets such batches aside)."""

    def __init__(self, columns: list[str], model: str | None = None,
                 pooling: str | None = None, **keywords):
        check_keywords("TextEmbeddings", keywords, model_handler.ACCEPTED +
                       model_handler.BEAM_KEYWORDS + MANAGER_KEYWORDS)
        manager = {k: keywords.pop(k) for k in MANAGER_KEYWORDS if k in keywords}
        self.handler = EmbeddingModelHandler(model, pooling, **keywords)
        super().__init__(columns=list(columns), **manager)

    def get_model_handler(self) -> EmbeddingModelHandler:
        return self.handler

    def get_ptransform_for_processing(self, **kwargs) -> beam.PTransform:
        return RunInference(model_handler=_ColumnHandler(self),
                            inference_args=self.inference_args)
