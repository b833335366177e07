"""load_encoder: the job's encoder in a notebook, without Beam: texts -> a float32 array, as
sentence-transformers' `encode` gives it, each text prepared as the run prepares a record; and a
text's WordPieces as the `tokens` command shows them."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from beam_embed.api.elements import prepared_text
from beam_embed.api.keywords import MODEL, explicit_keywords, model_spec, run_settings

__all__ = ["TextEncoder", "load_encoder"]

ACCEPTED = (*MODEL, "pooling", "clean", "max_text_bytes")  # the run's names


class TextEncoder:
    """A loaded model (`load_encoder`). `name`: the model's; `poolings`: the poolings `encode`
    uses by default (the model's recommended, or those given to load_encoder); `spec`: its
    settings as the job's workers get them."""

    def __init__(self, spec, settings):
        self.spec, self.settings = spec, settings
        self.name = spec.name
        self.poolings = tuple(spec.poolings)
        self._embedders: dict[str, object] = {}  # pooling -> Embedder, one model under all
        self._tokenizer = None

    def _embedder(self, pooling: str):
        found = self._embedders.get(pooling)
        if found is None:
            spec = dataclasses.replace(self.spec, poolings=(pooling,))
            poolings = spec.parsed_poolings()  # a pooling the model lacks is refused here
            if not self._embedders:
                from beam_embed.models.tf_import import import_tensorflow
                from beam_embed.process.log import library_quiet_wanted

                import_tensorflow(library_quiet_wanted())  # quietly, unless asked otherwise
                found = spec.build()
            else:
                from beam_embed.models.embedder import Embedder

                found = Embedder(next(iter(self._embedders.values())).encoder, poolings,
                                 normalize=spec.normalize, long_text=spec.long_text,
                                 truncate_dim=spec.truncate_dim, prompt=spec.prompt,
                                 prompt_in_pooling=spec.prompt_in_pooling)
            self._embedders[pooling] = found
        return found

    def encode(self, texts: Sequence[str] | str, pooling: str | None = None,
               batch_size: int = 64) -> np.ndarray:
        """float32 [len(texts), width] (a single text: [width]) in the order given, with
        `pooling` (default: the first of `poolings`), `batch_size` texts an encoder call
        (sorted by length first, as the run batches). A text the run would dead-letter
        (empty after cleaning, over max_text_bytes, NUL bytes, not a string) is a ValueError
        naming its position."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        single = isinstance(texts, str)
        s = self.settings
        prepared = [prepared_text(t, s.clean, s.max_text_bytes, f"text {i}")
                    for i, t in enumerate([texts] if single else texts)]
        embedder = self._embedder(pooling or self.poolings[0])
        column = embedder.columns[0]
        order = np.argsort([len(t) for t in prepared], kind="stable")
        parts = [embedder.embed([prepared[i] for i in order[at:at + batch_size]]).vectors[column]
                 for at in range(0, len(order), batch_size)]
        if not parts:
            return np.zeros((0, self.width(pooling)), np.float32)
        vectors = np.empty((len(prepared), parts[0].shape[1]), np.float32)
        vectors[order] = np.concatenate(parts)
        return vectors[0] if single else vectors

    def width(self, pooling: str | None = None) -> int:
        """The vectors' width with `pooling`."""
        return int(self.encode(["width"], pooling).shape[1])

    def tokens(self, text: str) -> list[tuple[str, list[str]]]:
        """The text's words as written, each with its WordPieces, as `beam-embed tokens` shows
        them (BERT-family models)."""
        from beam_embed.pipeline.inspect.tokens import compare, tokenizer_of

        if self._tokenizer is None:
            self._tokenizer = tokenizer_of(self.spec, self.name)
        found = compare(text, [self._tokenizer])
        return list(zip(found["labels"], found["words"][self.name]))


@explicit_keywords
def load_encoder(model: str | None = None, pooling: str | Sequence[str] | None = None, *,
                 normalize: bool | None = None, max_seq_length: int | None = None,
                 long_text: str | None = None, precision: str | None = None,
                 accelerator: str | None = None, encoder: str | None = None,
                 preprocessor: str | None = None, elmo_signature: str | None = None,
                 prompt_name: str | None = None, prompt: str | None = None,
                 clean: bool | None = None, max_text_bytes: int | None = None) -> TextEncoder:
    """The model `model` (a preset such as "minilm", an export-model folder or a SavedModel),
    with the run's model settings as keywords (`pooling`: the default poolings of `encode`,
    `normalize`, `max_seq_length`, `long_text`, `precision`, `accelerator`, `encoder`,
    `preprocessor`, `elmo_signature`, `prompt_name` (one of the model's prompts, e.g.
    "query"; default the model's default prompt), `prompt` (a literal prefix; "" for none),
    `clean`, `max_text_bytes`), checked as `beam-embed run` checks its flags. The model (and TensorFlow, without its start-up lines unless
    BEAM_EMBED_VERBOSE=1 or TF_CPP_MIN_LOG_LEVEL 0/1 asks for them) loads at the first
    `encode`."""
    given = {k: v for k, v in locals().items() if k in ACCEPTED}
    given = run_settings("load_encoder", given, ACCEPTED)
    return TextEncoder(model_spec(given), given)
