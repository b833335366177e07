"""What the SavedModel kinds know about their handles without loading them: the fingerprint a
manifest records, and how many token positions a model has. beam_embed.models.encoder.Encoder's defaults
call these; a kind that is not a SavedModel overrides them.

No TensorFlow at import (the encoder interface imports this module).
"""

from __future__ import annotations

import hashlib
import os

from beam_embed.models.hub_loader import is_remote, resolve_handle


def fingerprint(*handles: str | None) -> str:
    """sha256 over each handle's saved_model.pb (or the handle itself when remote/unreadable).
    Manifests of every version hold this value and `search` compares it with the model at hand:
    it must stay the same for the same files."""
    import tensorflow as tf

    digest = hashlib.sha256()
    for handle in filter(None, handles):
        pb = f"{handle.rstrip('/')}/saved_model.pb"
        if not is_remote(handle) and tf.io.gfile.exists(pb):
            with tf.io.gfile.GFile(pb, "rb") as f:
                digest.update(f.read())
        else:
            digest.update(handle.encode())
    return digest.hexdigest()[:16]


def _local_folder(handle: str) -> str:
    """A TF-Hub URL's or a gs:// folder's cached copy (made when the model was loaded)."""
    if is_remote(handle):
        return resolve_handle(handle)
    return handle


def position_rows(handle: str) -> int | None:
    """The first dimension of the SavedModel's position embedding variable, read from its
    checkpoint index; None when it has none (ELMo's LSTMs have no positions)."""
    import tensorflow as tf

    index = os.path.join(_local_folder(handle), "variables", "variables")
    try:
        variables = tf.train.list_variables(index)
    except (tf.errors.OpError, ValueError):
        return None
    sizes = [shape[0] for name, shape in variables
             if "position" in name.lower() and len(shape) == 2]
    return int(sizes[0]) if sizes else None
