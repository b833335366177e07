"""Which layout a checkpoint folder holds, and the inspection and tensor reader for it."""

from __future__ import annotations

import os
from contextlib import AbstractContextManager

from beam_embed.models.export.checkpoint import (
    GOOGLE,
    HUGGING_FACE,
    Checkpoint,
    CheckpointError,
    some,
)
from beam_embed.models.export.google_checkpoint import inspect_google_folder, open_google_tensors
from beam_embed.models.export.hf_checkpoint import WEIGHT_FILES, inspect_hf_folder, open_hf_tensors
from beam_embed.models.export.weight_map import Tensors


def layout_of(path: str, checkpoint: str | None = None) -> str:
    """Which layout `path` holds: an explicit TF checkpoint or bert_config.json means Google's,
    a config.json Hugging Face's (preferred when a folder has both and HF weights)."""
    if not os.path.isdir(path):
        raise CheckpointError(f"checkpoint folder {path!r} does not exist or is not a folder")
    has = set(os.listdir(path))
    if checkpoint is None and "config.json" in has and (
            "bert_config.json" not in has or has.intersection(WEIGHT_FILES)):
        return HUGGING_FACE
    if checkpoint is not None or "bert_config.json" in has:
        return GOOGLE
    if "modules.json" in has:  # sentence-transformers: the Transformer's files in a sub-folder
        return HUGGING_FACE
    raise CheckpointError(
        f"{path} has no config.json (a Hugging Face folder: config.json, model.safetensors or "
        "pytorch_model.bin, vocab.txt) and no bert_config.json (a google-research/bert folder: "
        f"bert_config.json, vocab.txt, a TF checkpoint); found: {some(has)}")


def inspect_checkpoint(path: str, checkpoint: str | None = None,
                       lower_case: bool | None = None) -> Checkpoint:
    """Validates a checkpoint folder of either layout; `checkpoint` is an explicit TF checkpoint
    prefix and `lower_case` overrides what the folder says or implies."""
    if layout_of(path, checkpoint) == HUGGING_FACE:
        return inspect_hf_folder(path, lower_case)
    return inspect_google_folder(path, checkpoint, lower_case)


def open_tensors(ckpt: Checkpoint) -> AbstractContextManager[Tensors]:
    """The checkpoint's tensors by name, read lazily, in the naming its layout uses."""
    return open_google_tensors(ckpt) if ckpt.layout == GOOGLE else open_hf_tensors(ckpt)
