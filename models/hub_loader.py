"""Loading a model handle (TF-Hub/Kaggle URL, gs:// path or local folder) with one clear error,
once per process.

A SavedModel's variables files are checked against their index before TensorFlow reads them:
a data file cut short otherwise fails inside TensorFlow's restore with "Read less bytes than
requested", naming no file.
"""

from __future__ import annotations

import collections
import os
import re
import threading

from beam_embed.models.gcs_copy import GS, local_copy
from beam_embed.process.private_apis.tf_hub import mark_hub_module_v1


class HandleError(ValueError):
    """A model handle that cannot be loaded; the message says which and what to do."""


def is_remote(path: str) -> bool:
    """A URL or a path on a remote filesystem (gs://, s3://, https://): not a local path."""
    return "://" in path


def _check_local(handle: str) -> None:
    if not is_remote(handle) and not os.path.isdir(handle):
        raise HandleError(f"model handle {handle!r} is not a folder; give a SavedModel folder, "
                          "a gs:// path or a TF-Hub/Kaggle URL")


# A TensorFlow checkpoint index (variables/variables.index) is a LevelDB-format table: blocks of
# prefix-compressed entries, found through an index block named by the file's 48-byte footer.
# TensorFlow writes its bundles' tables uncompressed. Each entry maps a tensor's name to a
# BundleEntryProto: the data file (shard) it is in, its offset and its size there.
_TABLE_FOOTER = 48
_TABLE_MAGIC = 0xDB4775248B80FB57
_BLOCK_TRAILER = 5  # compression type (1 byte) + checksum (4)
_UNCOMPRESSED = 0
REFETCH = "copy, download or export the model again"


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _block(table: bytes, handle: bytes) -> bytes | None:
    """The block a BlockHandle (varint offset, varint size) points at; None when compressed."""
    offset, pos = _varint(handle, 0)
    size, _ = _varint(handle, pos)
    if offset + size + _BLOCK_TRAILER > len(table):
        raise ValueError(f"a block at byte {offset} runs past its end ({len(table)} bytes)")
    if table[offset + size] != _UNCOMPRESSED:
        return None
    return table[offset:offset + size]


def _entries(block: bytes):
    """(key, value) of each entry of a table block."""
    restarts = int.from_bytes(block[-4:], "little")
    end, pos, key = len(block) - 4 - 4 * restarts, 0, b""
    if end < 0:
        raise ValueError("a block's restart array is longer than the block")
    while pos < end:
        shared, pos = _varint(block, pos)
        own, pos = _varint(block, pos)
        length, pos = _varint(block, pos)
        key = key[:shared] + block[pos:pos + own]
        pos += own
        yield key, block[pos:pos + length]
        pos += length


def _varint_fields(message: bytes) -> dict[int, int]:
    """The varint fields of a protobuf message by field number (the others skipped): enough of
    BundleHeaderProto and BundleEntryProto without importing TensorFlow for their classes."""
    fields, pos = {}, 0
    while pos < len(message):
        tag, pos = _varint(message, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            fields[number], pos = _varint(message, pos)
        elif wire in (1, 5):  # fixed64, fixed32
            pos += 8 if wire == 1 else 4
        elif wire == 2:  # length-delimited
            length, pos = _varint(message, pos)
            pos += length
        else:
            raise ValueError(f"an entry holds protobuf wire type {wire}")
    if pos != len(message):
        raise ValueError("an entry runs past its end")
    return fields


# BundleHeaderProto.num_shards; BundleEntryProto.shard_id, .offset, .size (tensor_bundle.proto)
_NUM_SHARDS, _SHARD_ID, _OFFSET, _SIZE = 1, 3, 4, 5


def bundle_extents(index: bytes) -> tuple[int, dict[int, int]] | None:
    """(number of data files, data file -> the bytes its tensors span) from a checkpoint
    index's contents; None when the table is compressed (nothing TensorFlow writes). Raises
    ValueError or IndexError when the index itself is damaged."""
    if len(index) < _TABLE_FOOTER:
        raise ValueError(f"{len(index)} bytes, shorter than a table's footer")
    footer = index[-_TABLE_FOOTER:]
    if int.from_bytes(footer[-8:], "little") != _TABLE_MAGIC:
        raise ValueError("not a checkpoint index: its footer has no table magic number")
    _, pos = _varint(footer, _varint(footer, 0)[1])  # skip the metaindex block's handle
    top = _block(index, footer[pos:])
    if top is None:
        return None
    shards, extents = None, {}
    for _, handle in _entries(top):
        block = _block(index, handle)
        if block is None:
            return None
        for key, value in _entries(block):
            fields = _varint_fields(value)
            if key == b"":  # the header entry
                shards = fields.get(_NUM_SHARDS, 0)
            elif fields.get(_SIZE):
                shard, end = fields.get(_SHARD_ID, 0), fields.get(_OFFSET, 0) + fields[_SIZE]
                extents[shard] = max(extents.get(shard, 0), end)
    if shards is None:
        raise ValueError("it has no header entry")
    return shards, extents


def _read_local(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _file_ops(path: str):
    """(exists, size, read) for a local path without TensorFlow, else through its filesystems."""
    if not is_remote(path):
        return os.path.exists, os.path.getsize, _read_local
    import tensorflow as tf

    def read(p):
        with tf.io.gfile.GFile(p, "rb") as f:
            return f.read()
    return tf.io.gfile.exists, lambda p: tf.io.gfile.stat(p).length, read


def check_variables(folder: str, required: bool = False, fix: str = REFETCH) -> None:
    """The SavedModel's variables files are all there and as long as its index says, else a
    HandleError naming the file (`fix`: what to do). A folder without variables/variables.index
    passes unless `required` (a SavedModel may have no variables). Reads the index only."""
    exists, size_of, read = _file_ops(folder)
    index = os.path.join(folder, "variables", "variables.index")
    if not exists(index):
        if required:
            raise HandleError(f"{index} is missing: the SavedModel's variables cannot be read "
                              f"without it; {fix}")
        return
    try:
        found = bundle_extents(read(index))
    except (ValueError, IndexError) as e:
        raise HandleError(f"{index} is damaged ({e}); {fix}") from e
    if found is None:
        return
    shards, extents = found
    for shard in range(shards):
        data = os.path.join(folder, "variables", f"variables.data-{shard:05d}-of-{shards:05d}")
        if not exists(data):
            raise HandleError(f"{data} is missing: {index} names {shards} data file(s); {fix}")
        size, needed = size_of(data), extents.get(shard, 0)
        if size < needed:
            raise HandleError(f"{data} is cut short: {size} bytes where its index places "
                              f"tensors up to byte {needed}; {fix}")


def _first_line(e: Exception) -> str:
    text = re.sub(r"^\{\{[^}]*\}\}\s*", "", str(e).strip())  # TF's "{{function_node ...}}"
    return text.splitlines()[0] if text else type(e).__name__


def _cannot(handle: str, e: Exception) -> HandleError:
    import tensorflow as tf

    if isinstance(e, tf.errors.DataLossError):  # a checksum that does not match: the files
        return HandleError(f"model handle {handle!r} is damaged ({_first_line(e)}); {REFETCH}")
    return HandleError(
        f"cannot load model handle {handle!r} ({_first_line(e)}); check the URL or path and "
        "network access, or export a local copy with `beam-embed export-model`")


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
    mark_hub_module_v1(loaded, is_hub_module_v1)  # as hub.load marks it (hub.KerasLayer reads it)
    return loaded


def load_handle(handle: str, tags=None):
    """`hub.load` with errors that name the handle; local folders must exist."""
    from beam_embed.models.tf_import import register_text_ops

    register_text_ops()  # TensorFlow, and the ops BERT preprocessors and text-in embedders call
    import tensorflow as tf

    _check_local(handle)
    folder = handle
    if not downloads(handle):
        try:
            folder = local_copy(handle)  # gs:// read through Beam (models/gcs_copy.py)
        except OSError as e:
            raise _cannot(handle, e) from e
        check_variables(folder)  # a file cut short, named here rather than deep in the restore
    try:
        if not downloads(handle):
            return _load_saved_model(folder, tags)
        import tensorflow_hub as hub

        return hub.load(handle, tags=tags)
    except (OSError, ValueError, tf.errors.OpError, RuntimeError) as e:
        raise _cannot(handle, e) from e


def resolve_handle(handle: str) -> str:
    """The folder holding the handle's SavedModel: a URL is downloaded into TF-Hub's cache, a
    gs:// folder copied into ours (models/gcs_copy.py); local folders are themselves."""
    import tensorflow as tf
    import tensorflow_hub as hub

    _check_local(handle)
    try:
        return local_copy(handle) if handle.startswith(GS) else hub.resolve(handle)
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
