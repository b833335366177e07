"""beam-embed: batch text embeddings with TF-Hub encoders on Apache Beam.

The one import package the distribution installs: `beam_embed.pipeline` (the commands and the
jobs) and `beam_embed.models` (the encoders) inside it. The repository keeps `pipeline/` and
`models/` at its top level; an install maps them in here (setup.py's package_dir), and so does
this module when it is imported from a source checkout (a worktree or a folder on PYTHONPATH),
so a checkout always runs its own code, never another copy's.

The public names below are the Python API (beam_embed/api/, docs/api.md): Beam transforms,
a RunInference model handler, an MLTransform embeddings manager, a reader of a run's folder
and an encoder for notebooks. They are looked up on first use (PEP 562), so that importing
this package, which every command does, loads neither Beam nor numpy nor TensorFlow.
"""

from __future__ import annotations

import importlib.util
import os
import sys

SUBPACKAGES = ("models", "pipeline")
# Each public name -> the module of beam_embed.api that defines it.
PUBLIC = {
    "EmbedTexts": "embed_texts", "Embedding": "elements", "DeadLetter": "elements",
    "EmbeddingModelHandler": "model_handler", "TextEmbeddings": "text_embeddings",
    "WriteEmbeddings": "write", "read_embeddings": "read", "StoredEmbeddings": "read",
    "load_encoder": "encoder", "TextEncoder": "encoder",
}
__all__ = sorted(PUBLIC)


def _map_checkout() -> None:
    """In a source checkout, `beam_embed.pipeline` and `beam_embed.models` are the folders beside
    this one. Registered here (their __init__ files are docstrings) rather than by adding the
    checkout's root to __path__, which would make tests/, benchmarks/ and setup.py submodules."""
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    for name in SUBPACKAGES:
        full = f"{__name__}.{name}"
        init = os.path.join(root, name, "__init__.py")
        if full in sys.modules or os.path.isdir(os.path.join(here, name)) \
                or not os.path.isfile(init):
            continue
        spec = importlib.util.spec_from_file_location(
            full, init, submodule_search_locations=[os.path.dirname(init)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[full] = module
        spec.loader.exec_module(module)
        globals()[name] = module


_map_checkout()


def __getattr__(name: str):
    """A public name, imported from its module when first asked for."""
    if name not in PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.api.{PUBLIC[name]}")
    value = globals()[name] = getattr(module, name)
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(PUBLIC))
