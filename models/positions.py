"""How many token positions a model has: the longest `--max-seq-length` it can run.

Read without running the model: an `export-model` folder records `max_position_embeddings` in
its beam_embed.json; any other SavedModel has it as the first dimension of its position
embedding variable, read from the checkpoint's index. None when neither is found (ELMo's LSTMs
have no positions).
"""

from __future__ import annotations

import json
import os

from models.hub_loader import is_remote


def _export_metadata(encoder: str) -> dict:
    import tensorflow as tf

    from models.export_format import METADATA_FILE

    meta = os.path.join(os.path.dirname(encoder.rstrip("/")), METADATA_FILE)
    if not tf.io.gfile.exists(meta):
        return {}
    with tf.io.gfile.GFile(meta) as f:
        return json.load(f)


def _local_folder(handle: str) -> str:
    """A TF-Hub URL's cached copy (already downloaded when the model was loaded)."""
    if is_remote(handle) and not handle.startswith("gs://"):
        import tensorflow_hub as hub

        return hub.resolve(handle)
    return handle


def max_positions(encoder: str) -> int | None:
    import tensorflow as tf

    recorded = _export_metadata(encoder).get("max_position_embeddings")
    if recorded:
        return int(recorded)
    index = os.path.join(_local_folder(encoder), "variables", "variables")
    try:
        variables = tf.train.list_variables(index)
    except (tf.errors.OpError, ValueError):
        return None
    sizes = [shape[0] for name, shape in variables
             if "position" in name.lower() and len(shape) == 2]
    return int(sizes[0]) if sizes else None
