"""beam-embed: batch text embeddings with TF-Hub encoders on Apache Beam.

The one import package the distribution installs: `beam_embed.pipeline` (the commands and the
jobs) and `beam_embed.models` (the encoders) inside it. The repository keeps `pipeline/` and
`models/` at its top level; an install maps them in here (setup.py's package_dir: a wheel copies
them, a checkout's editable install points the two names at the folders), so each file has one
path.

The public names below are the Python API (beam_embed/api/, docs/api.md): Beam transforms,
a RunInference model handler, an MLTransform embeddings manager, a reader of a run's folder
and an encoder for notebooks. They are looked up on first use (PEP 562), so that importing
this package, which every command does, loads neither Beam nor numpy nor TensorFlow.
"""

from __future__ import annotations

import importlib

# Each public name -> the module of beam_embed.api that defines it.
PUBLIC = {
    "EmbedTexts": "embed_texts", "Embedding": "elements", "DeadLetter": "elements",
    "EmbeddingModelHandler": "model_handler", "TextEmbeddings": "text_embeddings",
    "WriteEmbeddings": "write", "read_embeddings": "read", "StoredEmbeddings": "read",
    "load_encoder": "encoder", "TextEncoder": "encoder",
}
__all__ = sorted(PUBLIC)


def __getattr__(name: str):
    """A public name, imported from its module when first asked for."""
    if name not in PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.api.{PUBLIC[name]}")
    value = globals()[name] = getattr(module, name)
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(PUBLIC))
