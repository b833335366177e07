"""Loading a model handle (TF-Hub/Kaggle URL, gs:// path or local folder) with one clear error."""

from __future__ import annotations

import os


class HandleError(ValueError):
    """A model handle that cannot be loaded; the message says which and what to do."""


def is_remote(path: str) -> bool:
    """A URL or a path on a remote filesystem (gs://, s3://, https://): not a local path."""
    return "://" in path


def load_handle(handle: str, tags=None):
    """`hub.load` with errors that name the handle; local folders must exist."""
    import tensorflow as tf
    import tensorflow_hub as hub
    import tensorflow_text  # noqa: F401  (registers the ops BERT preprocessors use)

    if not is_remote(handle) and not os.path.isdir(handle):
        raise HandleError(f"model handle {handle!r} is not a folder; give a SavedModel folder, "
                          "a gs:// path or a TF-Hub/Kaggle URL")
    try:
        return hub.load(handle, tags=tags)
    except (OSError, ValueError, tf.errors.OpError, RuntimeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise HandleError(
            f"cannot load model handle {handle!r} ({first}); check the URL or path and network "
            "access, or export a local copy with `beam-embed export-model`") from e
