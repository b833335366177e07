"""Loading a model handle (TF-Hub/Kaggle URL, gs:// path or local folder) with one clear error,
once per process."""

from __future__ import annotations

import collections
import os
import threading


class HandleError(ValueError):
    """A model handle that cannot be loaded; the message says which and what to do."""


def is_remote(path: str) -> bool:
    """A URL or a path on a remote filesystem (gs://, s3://, https://): not a local path."""
    return "://" in path


def _check_local(handle: str) -> None:
    if not is_remote(handle) and not os.path.isdir(handle):
        raise HandleError(f"model handle {handle!r} is not a folder; give a SavedModel folder, "
                          "a gs:// path or a TF-Hub/Kaggle URL")


def _cannot(handle: str, e: Exception) -> HandleError:
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return HandleError(
        f"cannot load model handle {handle!r} ({first}); check the URL or path and network "
        "access, or export a local copy with `beam-embed export-model`")


def downloads(handle: str) -> bool:
    """A TF-Hub/Kaggle URL, which tensorflow_hub resolves to a download in its cache."""
    return handle.startswith(("http://", "https://"))


def _load_saved_model(path: str, tags):
    """What `hub.load` does once the handle is a folder (local or gs://): TF1 Hub modules
    (tfhub_module.pb) load with the empty tag set. Without importing tensorflow_hub, which
    imports all of Keras 2 (tf_keras) first (see tf_import.py)."""
    import tensorflow as tf

    is_hub_module_v1 = tf.io.gfile.exists(os.path.join(path, "tfhub_module.pb"))
    if tags is None and is_hub_module_v1:
        tags = []
    if not any(tf.io.gfile.exists(os.path.join(path, name))
               for name in ("saved_model.pb", "saved_model.pbtxt")):
        raise ValueError(f"{path!r} contains neither saved_model.pb nor saved_model.pbtxt")
    loaded = tf.saved_model.load(path, tags=tags)
    loaded._is_hub_module_v1 = is_hub_module_v1  # as hub.load marks it (hub.KerasLayer reads it)
    return loaded


def load_handle(handle: str, tags=None):
    """`hub.load` with errors that name the handle; local folders must exist."""
    from models.tf_import import register_text_ops

    register_text_ops()  # TensorFlow, and the ops BERT preprocessors and text-in embedders call
    import tensorflow as tf

    _check_local(handle)
    try:
        if not downloads(handle):
            return _load_saved_model(handle, tags)
        import tensorflow_hub as hub

        return hub.load(handle, tags=tags)
    except (OSError, ValueError, tf.errors.OpError, RuntimeError) as e:
        raise _cannot(handle, e) from e


def resolve_handle(handle: str) -> str:
    """The folder holding the handle's SavedModel: a URL is downloaded into TF-Hub's cache;
    local and gs:// folders are themselves."""
    import tensorflow as tf
    import tensorflow_hub as hub

    _check_local(handle)
    try:
        return hub.resolve(handle)
    except (OSError, ValueError, tf.errors.OpError, RuntimeError) as e:
        raise _cannot(handle, e) from e


# Loaded SavedModels of this process, most recent last. The job's launcher loads the model to
# check it (and to recognize its kind) before the pipeline starts; the in-process DirectRunner
# then loads it again in RunInference: this keeps the second load (and the first call's graph
# optimization, ~1 s for a bf16 BERT) from being paid twice. Bounded: a process rarely holds
# more than a model or two.
_LOADED: collections.OrderedDict = collections.OrderedDict()
_LOADED_MAX = 4
_LOADING: dict = {}  # key -> the lock its load holds
_LOCK = threading.Lock()  # guards both dicts


def _version(handle: str):
    pb = os.path.join(handle, "saved_model.pb")
    return os.path.getmtime(pb) if not is_remote(handle) and os.path.exists(pb) else None


def load_once(handle: str, tags=None):
    """`load_handle`, once per process (and per version of a local folder) and tag set. Safe
    from several threads (models/warm_up.py loads on one): a handle two threads ask for at once
    loads once, different handles load side by side."""
    key = (handle, _version(handle), None if tags is None else tuple(tags))
    with _LOCK:
        lock = _LOADING.setdefault(key, threading.Lock())
    with lock:
        with _LOCK:
            if key in _LOADED:
                _LOADED.move_to_end(key)
                return _LOADED[key]
        loaded = load_handle(handle, tags)
        with _LOCK:
            _LOADED[key] = loaded
            while len(_LOADED) > _LOADED_MAX:
                _LOADING.pop(_LOADED.popitem(last=False)[0], None)
        return loaded
