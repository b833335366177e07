"""SHA-256 of local files, each remembered in the cache folder under the file's identity, so an
unchanged file is read and hashed once, not on every run (a model's ~90 MB of variables took
~0.1 s a run start to hash; a run's shards are hashed by each reader).

A file's identity is its absolute path, size, modification and change times (ns) and inode
(device too): a file rewritten, replaced, renamed or copied gets another one, and the change
time cannot be set back by a user (`touch` sets the modification time only). A hash is
remembered only when the file's identity did not change while it was read. A cache folder that
cannot be written (read-only, shared) only means the hash is computed again next time. No
TensorFlow and no Beam at import.

    keys/sha256-<hash of the identity>   the file's SHA-256, as hex
"""

from __future__ import annotations

import hashlib
import json
import os

from beam_embed.models.cache_marks import made_folder
from beam_embed.models.gcs_copy import cache_dir

KEYS = "keys"  # the cache folder's sub-folder of remembered keys and hashes


def _facts(stat: os.stat_result) -> list[int]:
    return [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, stat.st_dev]


def identity(path: str, stat: os.stat_result) -> str:
    """What a remembered hash of the file `path` (stat-ed as `stat`) is filed under."""
    key = json.dumps([os.path.abspath(path), *_facts(stat)])
    return os.path.join(cache_dir(), KEYS, "sha256-" + hashlib.sha256(key.encode()).hexdigest()[:32])


def recalled(memo: str) -> str | None:
    try:
        with open(memo, encoding="utf-8") as f:
            return f.read().strip() or None
    except OSError:
        return None


def remember(path: str, text: str) -> None:
    """`text` written to `path` whole (aside, then renamed); a cache that cannot be written to
    (read-only, shared) only means the value is computed again next time."""
    tmp = f"{path}.partial-{os.getpid()}"
    try:
        made_folder(os.path.dirname(path), KEYS)
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:
        if os.path.exists(tmp):
            os.remove(tmp)


def open_file_sha256(f, path: str) -> str:
    """The SHA-256 (hex) of the open local file `f` (named `path`) as it is now, read through
    `f` itself unless remembered under its identity (so it is the hash of what `f` reads, even
    when `path` is replaced meanwhile); `f` is left at its start."""
    before = os.fstat(f.fileno())
    memo = identity(path, before)
    found = recalled(memo)
    if found is None:
        f.seek(0)
        found = hashlib.file_digest(f, "sha256").hexdigest()
        f.seek(0)
        if _facts(os.fstat(f.fileno())) == _facts(before):  # not written to while read
            remember(memo, found)
    return found


def file_sha256(path: str) -> str:
    """The SHA-256 (hex) of the local file `path` (opened only when not remembered)."""
    found = recalled(identity(path, os.stat(path)))
    if found is not None:
        return found
    with open(path, "rb") as f:
        return open_file_sha256(f, path)
