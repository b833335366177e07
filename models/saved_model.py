"""What the SavedModel kinds know about their handles without loading them: the fingerprint a
manifest records (and the one earlier versions recorded), and how many token positions a model
has. beam_embed.models.encoder.Encoder's defaults
call these; a kind that is not a SavedModel overrides them.

No TensorFlow at import (the encoder interface imports this module).
"""

from __future__ import annotations

import hashlib
import json
import os

from beam_embed.models.export_format import (
    ENCODER,
    METADATA_FILE,
    PREPROCESSOR,
    RUN_READS,
    dense_files,
    saved_models,
)
from beam_embed.models.file_digests import file_sha256
from beam_embed.models.hub_loader import is_remote, resolve_handle

# What a SavedModel folder holds that decides its outputs: its graph (any of these files) and
# everything under these folders (weights, vocabularies). Not TensorFlow's own fingerprint.pb
# (derived from the rest), nor files a user keeps beside a model (a README, .git).
MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt", "tfhub_module.pb", "keras_metadata.pb")
MODEL_FOLDERS = ("variables", "assets", "assets.extra")
FINGERPRINT_FORMAT = b"beam-embed model fingerprint 2\n"  # never equals an earlier version's


def _model_files(folder: str) -> list[tuple[str, str]]:
    """(name relative to `folder`, path) of each file of the SavedModel `folder`, sorted."""
    found = [(name, os.path.join(folder, name)) for name in MODEL_FILES
             if os.path.isfile(os.path.join(folder, name))]
    for sub in MODEL_FOLDERS:
        for root, dirs, names in os.walk(os.path.join(folder, sub)):
            dirs.sort()
            for name in names:
                path = os.path.join(root, name)
                found.append((os.path.relpath(path, folder).replace(os.sep, "/"), path))
    return sorted(found)


def _export_of(handle: str) -> tuple[str, dict | bytes] | None:
    """(the export folder, its metadata: parsed, or its bytes when it does not parse) when
    `handle` is one of an `export-model` folder's SavedModels; None otherwise."""
    folder = os.path.dirname(os.path.normpath(handle))
    path = os.path.join(folder, METADATA_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        raw = f.read()
    try:
        meta = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return folder, raw
    return folder, meta if isinstance(meta, dict) else raw


def _saved_models(meta: dict | bytes) -> list[str]:
    """The export's SavedModel folders as its metadata lists them (encoder/ and preprocessor/
    when it cannot say)."""
    if isinstance(meta, dict) and isinstance(meta.get("encoders", {}), dict):
        return saved_models(meta)
    return [ENCODER, PREPROCESSOR]


def _hash_folder(digest, folder: str, label: str) -> bool:
    """Each model file of `folder` (name, SHA-256) into `digest`, under `label`; whether it held
    any."""
    files = _model_files(folder)
    for name, path in files:
        digest.update(f"{label}/{name}\0{file_sha256(path)}\n".encode())
    return bool(files)


def fingerprint(*handles: str | None) -> str:
    """16 hex digits of a SHA-256 over every file that decides the vectors of the model at these
    handles: each SavedModel's graph, variables and assets (vocabulary), and, for an
    `export-model` folder's SavedModels, every SavedModel it lists (each precision's encoder, the
    preprocessor) and the metadata a run reads (pooling, normalization, lengths, ...; not the
    paths it was made from, which differ between machines). A remote handle, or a local one
    without a SavedModel, is hashed by its name. The same files give the same value on every
    machine; manifests record it and `search`, `--reuse` and `pca --fit` compare it.

    Each file's hash is remembered under its identity (file_digests.py): a run start hashes the
    ~90 MB of a model's variables once, then only looks at the files. Hashing at export time
    into the metadata instead would miss a file changed after the export (a vocabulary edited
    by hand), and a SavedModel that is not an export has no metadata to keep it in."""
    digest = hashlib.sha256(FINGERPRINT_FORMAT)
    done: set[str] = set()
    for i, handle in enumerate(filter(None, handles)):
        digest.update(f"handle {i}\n".encode())
        if is_remote(handle) or not os.path.isdir(handle):
            digest.update(f"named\0{handle}\n".encode())
            continue
        export = _export_of(handle)
        if export is None:
            if not _hash_folder(digest, handle, "."):
                digest.update(f"named\0{handle}\n".encode())
            continue
        folder, meta = export
        if os.path.realpath(folder) in done:  # its SavedModels are in the digest already
            continue
        done.add(os.path.realpath(folder))
        if isinstance(meta, bytes):  # the run refuses such an export; its bytes stand for it
            digest.update(b"metadata\0" + hashlib.sha256(meta).digest())
        else:
            read = {k: meta[k] for k in sorted(RUN_READS) if k in meta}
            if meta.get("include_prompt") is False:  # a prompt's tokens leave its mean; kept
                read["include_prompt"] = False  # out otherwise, so earlier fingerprints stand
            digest.update(b"metadata\0" + json.dumps(read, sort_keys=True).encode() + b"\n")
        for sub in _saved_models(meta):
            _hash_folder(digest, os.path.join(folder, sub), sub)
        for name in dense_files(meta) if isinstance(meta, dict) else ():
            path = os.path.join(folder, name)
            found = file_sha256(path) if os.path.isfile(path) else "missing"
            digest.update(f"{name}\0{found}\n".encode())
    return digest.hexdigest()[:16]


def earlier_fingerprint(*handles: str | None) -> str:
    """The value versions before FINGERPRINT_FORMAT 2 recorded for these handles: sha256 over
    each handle's saved_model.pb only (or the handle itself when remote or without one).
    Manifests they wrote hold it; it cannot tell a changed vocabulary or weights."""
    digest = hashlib.sha256()
    for handle in filter(None, handles):
        pb = os.path.join(handle.rstrip("/"), "saved_model.pb")
        if not is_remote(handle) and os.path.isfile(pb):
            with open(pb, "rb") as f:
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
