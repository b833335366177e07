"""What in the cache folder the tool provably made: each folder it creates there (an export, an
export being written, `keys/`, `gs/`) holds a marker file, written when the folder is made, and
`beam-embed cache clear` removes only marked folders. The cache folder may be a shared or home
folder ($BEAM_EMBED_CACHE) where a user keeps folders of the same names; a folder that existed
before the tool wanted it stays unmarked, and the tool only adds its files into it.

Entries made before markers were written: an export is recognized when its name's key is the
content key of the checkpoint its metadata names, still there (content_key in export_cache.py);
`keys/` when every file in it has a remembered key's name and a hex digest as its text. An
unmarked `gs/` cannot be told apart from a user's folder: it is left, and named. No TensorFlow.
"""

from __future__ import annotations

import json
import os
import re

MARKER = ".beam-embed-cache-entry"
_KEY_FILE = re.compile(r"^([0-9a-f]{24}|sha256-[0-9a-f]{32})(\.partial-\d+)?$")
_HEX = re.compile(r"^[0-9a-f]+$")


def mark(folder: str, kind: str) -> None:
    """Writes `folder`'s marker (the folder is the tool's: it just made it)."""
    with open(os.path.join(folder, MARKER), "w", encoding="utf-8") as f:
        json.dump({"kind": kind, "made_by": "beam-embed"}, f)


def made_folder(folder: str, kind: str) -> None:
    """`folder` there, marked as the tool's when this call creates it; one that existed already
    (a user's, or the tool's) is left as it is. Raises OSError as os.makedirs does."""
    try:
        os.makedirs(folder)
    except FileExistsError:
        return
    mark(folder, kind)


def marked(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, MARKER))


def remembered_keys(folder: str) -> bool:
    """An unmarked `keys/` the tool wrote: nothing in it but files named as it names them,
    each holding a hex digest, and at least one of them."""
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    for name in names:
        path = os.path.join(folder, name)
        if not _KEY_FILE.match(name) or not os.path.isfile(path) or os.path.islink(path):
            return False
        try:
            with open(path, encoding="ascii") as f:
                if not _HEX.match(f.read(200).strip()):
                    return False
        except (OSError, ValueError):
            return False
    return bool(names)
