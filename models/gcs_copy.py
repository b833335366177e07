"""A gs:// model read from a local copy, fetched through Beam's filesystem.

TensorFlow reads gs:// with a Cloud Storage client of its own (tf.io.gfile), which always talks
to www.googleapis.com: it cannot be pointed at a local emulator (STORAGE_EMULATOR_HOST), and it
looks for credentials its own way (the commands' one-line look, beam_embed/process/gcs_auth.py,
does not reach it). Beam's filesystem, which reads the corpus and writes the outputs, does
both, so the files of a gs:// model are copied with it into the cache folder
(`$BEAM_EMBED_CACHE/gs/<bucket>/<path>`) and TensorFlow reads the copy. An object is fetched
again when its size or update time changed, and local files the gs:// folder no longer holds
are removed; a process lists a gs:// path once. Model handles keep their gs:// names (manifests,
Dataflow workers, messages).

No TensorFlow and no Beam at import.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import threading
import uuid

from beam_embed.models.cache_marks import made_folder

GS = "gs://"
_PARTIAL = ".partial-"  # a copy being written; never taken for the object
_CHUNK = 8 << 20
_COPIES: dict[str, str] = {}  # gs:// path -> its local copy, made by this process
_LOCK = threading.Lock()  # one copy at a time: the warm-up thread loads beside the launcher


class CacheFolderError(ValueError):
    """$BEAM_EMBED_CACHE names no usable folder; the message names the value and the fix."""


def cache_dir() -> str:
    """$BEAM_EMBED_CACHE (`~` expanded), or ~/.cache/beam-embed. An empty value, a relative
    path (a Dask worker, or a later run, would find another folder from another working
    folder) or a file is refused: CacheFolderError."""
    value = os.environ.get("BEAM_EMBED_CACHE")
    if value is None:
        return os.path.expanduser("~/.cache/beam-embed")
    folder = os.path.expanduser(value)
    if not value.strip():
        raise CacheFolderError("BEAM_EMBED_CACHE is set but empty: set it to a folder's "
                               "absolute path, or unset it for ~/.cache/beam-embed")
    if not os.path.isabs(folder):
        raise CacheFolderError(f"BEAM_EMBED_CACHE={value!r} is a relative path: give an "
                               f"absolute one (e.g. {os.path.abspath(folder)}), the same for "
                               "every process that reads the cache")
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise CacheFolderError(f"BEAM_EMBED_CACHE={value!r} is a file, not a folder: point it "
                               "at a folder (made on first use)")
    return folder


def writable_cache(what: str) -> str:
    """The cache folder, made if missing; an OSError saying so in one line when it cannot be
    written (read-only, not ours): `what` names what needed it."""
    folder = cache_dir()
    probe = os.path.join(folder, f".write-test-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        os.makedirs(folder, exist_ok=True)
        with open(probe, "w"):
            pass
        os.remove(probe)
    except OSError as e:  # the line says its cause; the probe's own name would only confuse
        raise OSError(e.errno, f"the model cache {folder} cannot be written "
                               f"({e.strerror or e}): {what} needs it; point BEAM_EMBED_CACHE at "
                               "a folder this user can write") from None
    return folder


def local_copy(path: str) -> str:
    """`path` itself unless it is on gs://; else the local copy of the object, or of every
    object under the folder, it names, fetched when missing or changed. A gs:// path with no
    object gives a local path that does not exist. Raises OSError when gs:// cannot be read."""
    if not path.startswith(GS):
        return path
    with _LOCK:
        if path not in _COPIES:
            _COPIES[path] = _copy(path)
        return _COPIES[path]


def gs_names(message: str) -> str:
    """`message` with the local copies it names said by their gs:// names."""
    for path, local in _COPIES.items():
        message = message.replace(local, path.rstrip("/"))
    return message


def _local_path(path: str) -> str:
    name = path[len(GS):].strip("/")
    clean = posixpath.normpath(name)
    if not name or clean != name or clean.startswith(".."):
        raise OSError(f"{path!r} is not a gs://bucket/path this tool copies")
    return os.path.join(cache_dir(), "gs", *clean.split("/"))


def _listing(path: str) -> dict[str, object]:
    """{name relative to `path` ("" for the object itself): its FileMetadata}."""
    from apache_beam.io.filesystems import FileSystems

    base = path.rstrip("/")
    found = {}
    for result in FileSystems.match([base, base + "/**"]):
        for meta in result.metadata_list:
            if meta.path == base:
                found[""] = meta
            elif meta.path.startswith(base + "/") and not meta.path.endswith("/"):
                found[meta.path[len(base) + 1:]] = meta
    return found


def _fresh(local: str, meta) -> bool:
    try:
        stat = os.stat(local)
    except OSError:
        return False
    return stat.st_size == meta.size_in_bytes and \
        abs(stat.st_mtime - meta.last_updated_in_seconds) < 1e-3


def _fetch(meta, local: str) -> None:
    """The object copied to `local` whole or not at all (written aside, then renamed)."""
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    # a cache that holds fresh copies may be read-only; one that needs a copy must be written
    made_folder(os.path.join(writable_cache(f"a local copy of {meta.path}"), "gs"), "gs")
    os.makedirs(os.path.dirname(local), exist_ok=True)
    tmp = f"{local}{_PARTIAL}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        # UNCOMPRESSED: a model's files are read as they are, whatever their names end with
        with FileSystems.open(meta.path, compression_type=CompressionTypes.UNCOMPRESSED) as src, \
                open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst, _CHUNK)
        os.utime(tmp, (meta.last_updated_in_seconds, meta.last_updated_in_seconds))
        os.replace(tmp, local)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _remove(local: str) -> None:
    if os.path.isdir(local) and not os.path.islink(local):
        shutil.rmtree(local)
    elif os.path.lexists(local):
        os.remove(local)


def _copy(path: str) -> str:
    local = _local_path(path)
    found = _listing(path)
    if "" in found:  # an object
        if os.path.isdir(local):
            _remove(local)
        if not _fresh(local, found[""]):
            _fetch(found[""], local)
        return local
    if not found:  # nothing there (any more): no copy says otherwise
        _remove(local)
        return local
    if os.path.lexists(local) and not os.path.isdir(local):
        _remove(local)
    for name, meta in sorted(found.items()):
        target = os.path.join(local, *name.split("/"))
        if not _fresh(target, meta):
            _fetch(meta, target)
    for root, _, files in os.walk(local):  # what the folder no longer holds
        for file in files:
            name = os.path.relpath(os.path.join(root, file), local).replace(os.sep, "/")
            if name not in found and _PARTIAL not in file:
                os.remove(os.path.join(root, file))
    return local
