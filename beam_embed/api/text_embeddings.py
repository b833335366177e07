"""TextEmbeddings: an EmbeddingsManager for MLTransform on the job's encoder (through
EmbeddingModelHandler), a drop-in for Beam's TensorflowHubTextEmbeddings: each named column of
each dict (or Beam Row) replaced by its vector, a list of floats as Beam's managers give."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import apache_beam as beam
from apache_beam.ml.inference.base import ModelHandler, RunInference
from apache_beam.ml.transforms.base import EmbeddingsManager

from beam_embed.api.keywords import explicit_keywords
from beam_embed.api.model_handler import EmbeddingModelHandler

__all__ = ["TextEmbeddings"]


class _ColumnHandler(ModelHandler):
    """Dicts in, dicts out: the manager's columns' texts embedded by the handler in one call
    (the manager's type adapter takes them out and puts the vectors back). Everything else
    RunInference asks a handler (batching, sharing, copies, metrics, resource hints, model
    path, environment, pre- and post-processing) is the wrapped handler's answer, as Beam's
    own wrappers forward it."""

    def __init__(self, manager: TextEmbeddings):
        super().__init__()
        self._adapter = manager.type_adapter
        self._handler = manager.get_model_handler()

    def load_model(self):
        return self._handler.load_model()

    def run_inference(self, batch: Sequence[dict], model, inference_args=None) -> list:
        vectors = self._handler.vectors(self._adapter.input_fn(batch), model)
        return self._adapter.output_fn(batch, vectors.tolist())

    def get_num_bytes(self, batch) -> int:
        return self._handler.get_num_bytes(self._adapter.input_fn(batch))

    def batch_elements_kwargs(self):
        return self._handler.batch_elements_kwargs()

    def get_metrics_namespace(self) -> str:
        return self._handler.get_metrics_namespace()

    def get_resource_hints(self) -> dict:
        return self._handler.get_resource_hints()

    def validate_inference_args(self, inference_args) -> None:
        return self._handler.validate_inference_args(inference_args)

    def update_model_path(self, model_path: str | None = None) -> None:
        return self._handler.update_model_path(model_path)

    def update_model_paths(self, model, model_paths=None) -> None:
        return self._handler.update_model_paths(model, model_paths)

    def get_preprocess_fns(self):
        return self._handler.get_preprocess_fns()

    def get_postprocess_fns(self):
        return self._handler.get_postprocess_fns()

    def should_skip_batching(self) -> bool:
        return self._handler.should_skip_batching()

    def set_environment_vars(self) -> None:
        return self._handler.set_environment_vars()

    def share_model_across_processes(self) -> bool:
        return self._handler.share_model_across_processes()

    def model_copies(self) -> int:
        return self._handler.model_copies()

    def override_metrics(self, metrics_namespace: str = "") -> bool:
        return self._handler.override_metrics(metrics_namespace)

    def should_garbage_collect_on_timeout(self) -> bool:
        return self._handler.should_garbage_collect_on_timeout()


class TextEmbeddings(EmbeddingsManager):
    """For `MLTransform`: replaces each of `columns` (text) with its embedding, a list of
    floats, as Beam's `TensorflowHubTextEmbeddings` does.

    `model`, `pooling` (one) and the run's other model settings, and Beam's batching keywords
    (`min_batch_size`, `max_batch_size`, `max_batch_weight`, `element_size_fn`, ...,
    `large_model`, `model_copies`, `env_vars`), as `EmbeddingModelHandler` takes them: the
    handler RunInference runs reports them (`large_model` or `model_copies`: one model shared
    by a machine's processes, or that many). `inference_args` as Beam's managers take it.
    Every named column of every element must hold a text the run would embed (a non-empty
    string): another value fails its batch with a message naming it
    (`MLTransform(...).with_exception_handling()` sets such batches aside)."""

    @explicit_keywords
    def __init__(self, columns: list[str], model: str | None = None,
                 pooling: str | None = None, *, normalize: bool | None = None,
                 max_seq_length: int | None = None, long_text: str | None = None,
                 precision: str | None = None, accelerator: str | None = None,
                 encoder: str | None = None, preprocessor: str | None = None,
                 elmo_signature: str | None = None, prompt_name: str | None = None,
                 prompt: str | None = None, clean: bool | None = None,
                 max_text_bytes: int | None = None, min_batch_size: int | None = None,
                 max_batch_size: int | None = None, max_batch_duration_secs: int | None = None,
                 max_batch_weight: int | None = None,
                 element_size_fn: Callable[[Any], int] | None = None,
                 batch_length_fn: Callable[[Any], int] | None = None,
                 batch_bucket_boundaries: list[int] | None = None,
                 large_model: bool = False, model_copies: int | None = None,
                 env_vars: dict[str, str] | None = None,
                 inference_args: dict[str, Any] | None = None):
        given = dict(locals())
        for name in ("self", "__class__", "columns", "inference_args"):
            given.pop(name, None)
        self.handler = EmbeddingModelHandler(**given)
        super().__init__(columns=list(columns), min_batch_size=min_batch_size,
                         max_batch_size=max_batch_size, large_model=large_model,
                         inference_args=inference_args or {})

    def get_model_handler(self) -> EmbeddingModelHandler:
        return self.handler

    def get_ptransform_for_processing(self, **kwargs) -> beam.PTransform:
        return RunInference(model_handler=_ColumnHandler(self),
                            inference_args=self.inference_args)
