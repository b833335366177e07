"""The cache folder ($BEAM_EMBED_CACHE, default ~/.cache/beam-embed): `checkpoint` presets'
exports, made on first use, and gs:// models' local copies (gcs_copy.py).

An export is keyed by the checkpoint's content (a SHA-256 of its files' names and bytes) and the
export format's version, never by where the checkpoint lies: the same model package installed in
another clone or virtual environment finds the export the first one made. Hashing reads every
byte of the checkpoint (~0.1 s for MiniLM's 90 MB, seconds for a large one), so a key is also
remembered under the files' paths, sizes and modification times (`keys/`), and a later run only
lists the folder. No TensorFlow at import.

    <name>-<key>/            an export (encoder/, preprocessor/, beam_embed.json)
    <name>-<key>.partial-<pid>/  an export being written by process <pid>
    keys/<hash of paths>     the content key of a checkpoint folder as it was listed
    keys/sha256-<hash>       a model file's or a shard's SHA-256, by its identity (file_digests.py)
    gs/<bucket>/<path>       copies of gs:// models
    hf/models--<org>--<name>/  Hugging Face Hub models' downloads (hub_download.py)

Each of these folders holds a marker file when the tool made it; `beam-embed cache clear`
removes only what is provably the tool's (cache_marks.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
import shutil
import time

from beam_embed.models.cache_marks import mark, marked, remembered_keys
from beam_embed.models.export_format import FORMAT_VERSION, METADATA_FILE
from beam_embed.models.file_digests import KEYS, recalled
from beam_embed.models.file_digests import remember as remember_key
from beam_embed.models.gcs_copy import cache_dir, writable_cache

GS = "gs"
HF = "hf"  # Hugging Face Hub downloads, in the Hub's cache layout (hub_download.py)
EXPORT_NAME = re.compile(r"^(?P<name>.+)-(?P<key>[0-9a-f]{12})(\.partial-(?P<pid>\d+))?$")
_CHUNK = 8 << 20
# The commands show this logger's lines as their own (beam_embed.process.log.show_as_own).
notices = logging.getLogger(__name__)


def _files(folder: str) -> list[tuple[str, os.stat_result]]:
    """(path relative to `folder`, stat) of every file below it, sorted; caches Python wrote
    into the package (__pycache__) are not the model."""
    found = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in names:
            path = os.path.join(root, name)
            found.append((os.path.relpath(path, folder).replace(os.sep, "/"), os.stat(path)))
    return sorted(found)


def content_key(folder: str, remember: bool = True) -> str:
    """12 hex digits of a SHA-256 over the export format's version and each file's relative
    path and bytes: the same for every copy of the checkpoint. `remember`: write the key to
    `keys/` for the next run (a look that should leave the cache as it is passes False)."""
    files = _files(folder)
    listing = json.dumps([os.path.abspath(folder), FORMAT_VERSION] +
                         [[name, s.st_size, s.st_mtime_ns, s.st_ino] for name, s in files])
    memo = os.path.join(cache_dir(), KEYS, hashlib.sha256(listing.encode()).hexdigest()[:24])
    found = recalled(memo)
    if found is not None:
        return found
    digest = hashlib.sha256(f"beam-embed export format {FORMAT_VERSION}\n".encode())
    for name, _ in files:
        with open(os.path.join(folder, name), "rb") as f:
            file_hash = hashlib.file_digest(f, "sha256").hexdigest()
        digest.update(f"{name}\0{file_hash}\n".encode())
    key = digest.hexdigest()[:12]
    if files and remember:  # a folder that is not there (yet) is not remembered
        remember_key(memo, key)
    return key


def export_path(folder: str, name: str, remember: bool = True) -> str:
    """Where the export of the checkpoint `folder` lies, or will, in the cache."""
    return os.path.join(cache_dir(), f"{name}-{content_key(folder, remember)}")


def exported(folder: str, name: str) -> str:
    """The export of the checkpoint `folder` in the cache, made on first use (said in two
    lines: what is exported where, then how long it took)."""
    out = export_path(folder, name)
    if os.path.exists(os.path.join(out, METADATA_FILE)):
        return out
    from beam_embed.models.export.convert import export_checkpoint

    writable_cache(f"export {name}")
    notices.info(f"exporting {name} from {folder} into {out}: once, later runs and other "
                 "environments reuse it (about a minute)")
    began = time.monotonic()
    tmp = f"{out}.partial-{os.getpid()}"
    try:
        os.makedirs(tmp, exist_ok=True)
        mark(tmp, "export")  # written first: even an export cut short is provably the tool's
        export_checkpoint(folder, tmp, name=name)
        if os.path.exists(out):  # another process finished the same export first
            shutil.rmtree(tmp)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    notices.info(f"exported {name} in {time.monotonic() - began:.1f}s "
                 f"({folder_bytes(out) / 1e6:.0f} MB)")
    return out


def same_cache_export(recorded: str | None, encoder: str) -> str | None:
    """The cache entry's name (`<name>-<key>`) when the SavedModel handle a manifest recorded
    and `encoder` are the same SavedModel of one cache entry and that export is there now:
    exports of the same checkpoint files in the same export format (the key says both), so
    they give the same vectors, even where an earlier export's graph bytes differed (its
    preprocessor's table name held a memory address). None otherwise."""
    if not recorded:
        return None
    ours, theirs = os.path.normpath(encoder), os.path.normpath(recorded)
    entry = os.path.basename(os.path.dirname(ours))
    match = EXPORT_NAME.match(entry)
    if (not match or match.group("pid") or os.path.basename(ours) != os.path.basename(theirs)
            or os.path.basename(os.path.dirname(theirs)) != entry
            or not os.path.isfile(os.path.join(os.path.dirname(ours), METADATA_FILE))):
        return None
    return entry


def folder_bytes(path: str) -> int:
    if not os.path.isdir(path):
        return os.path.getsize(path) if os.path.exists(path) else 0
    return sum(os.path.getsize(os.path.join(root, n))
               for root, _, names in os.walk(path) for n in names
               if not os.path.islink(os.path.join(root, n)))


@dataclasses.dataclass(frozen=True)
class Entry:
    """One thing in the cache folder: `kind` is export, partial (an export being written, or
    left by a process that stopped), keys, gs, or None for what this tool did not provably
    write (cache_marks.py); `unproved`: why a folder named like an entry is not taken for one."""

    name: str
    path: str
    kind: str | None
    bytes: int
    pid: int | None = None
    source: str | None = None  # an export's checkpoint folder, as its metadata says
    unproved: str | None = None


def _source(path: str) -> str | None:
    try:
        with open(os.path.join(path, METADATA_FILE), encoding="utf-8") as f:
            source = json.load(f).get("source")
    except (OSError, ValueError, AttributeError):
        return None
    return source if isinstance(source, str) else None


def _earlier_export(path: str, key: str, source: str | None) -> bool:
    """An unmarked export made before markers: its name's key is the content key of the
    checkpoint its metadata names (an `export-model` output a user named like an entry is not:
    its name holds no such key)."""
    return bool(source) and os.path.isdir(source) and content_key(source, remember=False) == key


def _classify(name: str, path: str) -> tuple[str | None, int | None, str | None, str | None]:
    """(kind, pid, source, why not ours) of one name in the cache folder."""
    match = EXPORT_NAME.match(name) if os.path.isdir(path) else None
    if name in (KEYS, GS, HF) and os.path.isdir(path):
        if marked(path) or (name == KEYS and remembered_keys(path)):
            return name, None, None, None
        return None, None, None, "holds files beam-embed did not write" if name == KEYS else \
            "made before beam-embed marked its folders, or not beam-embed's"
    if not match:
        return None, None, None, None
    if match.group("pid"):
        if marked(path):
            return "partial", int(match.group("pid")), None, None
        return None, None, None, "named like an export being written, without beam-embed's marker"
    source = _source(path)
    if os.path.exists(os.path.join(path, METADATA_FILE)) and (
            marked(path) or _earlier_export(path, match.group("key"), source)):
        return "export", None, source, None
    return None, None, None, "named like an export, not one the cache made"


def entries(folder: str | None = None) -> list[Entry]:
    """The cache folder's entries, by name."""
    folder = folder or cache_dir()
    if not os.path.isdir(folder):
        return []
    found = []
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        kind, pid, source, unproved = _classify(name, path)
        found.append(Entry(name, path, kind, folder_bytes(path), pid, source, unproved))
    return found
