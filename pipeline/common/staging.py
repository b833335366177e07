"""A run is written beside the previous one and swapped in when it is complete; it only ever
replaces or deletes files that a manifest lists.

Everything a run writes goes to its own staging folder inside the output folder
(`STAGING_PREFIX<run id>/`), Beam's temporary `beam-temp-*` folders included. So a run never
writes over another run's files, and Beam's finalize step (which deletes existing files that
match its shard names) only ever sees the run's own. When the run is complete (its manifest
written in the staging folder), `publish` swaps it in: the old manifest goes first, then the
files it listed; the files the new manifest lists move in, the new manifest last. At every
moment the output folder holds either a manifest with exactly the files it lists, or no
manifest, which readers refuse. Local disks swap by renames (milliseconds); gs:// copies and
deletes, one object at a time, and the old run stays readable until the new one is complete
there too.

What a run may delete in the output folder is decided by `check_output`, before it starts:
the files the folder's manifest lists, and the manifest. Nothing else, however much its name
looks like an output: a user's `embeddings-final-v2.parquet` stays where it is. A folder with
such look-alikes and no manifest that lists them is refused, and so is an unlisted file under a
name the new run writes. Before the swap changes anything, `publish` records in the staging
folder which files it replaces and which it moves in (`JOURNAL`): a swap cut short (a killed
process, a lost machine) leaves that record, and the next run counts those files as a run's.

Whatever a killed run left (its staging folder, `beam-temp-*` folders of older versions) is
removed by the next run that holds the folder's claim.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import tempfile
from dataclasses import dataclass

from apache_beam.io.filesystems import FileSystems

from beam_embed.models.hub_loader import is_remote
from beam_embed.pipeline.common.errors import CommandError, one_line
from beam_embed.pipeline.common.manifest import MANIFEST, OutputKind, existing_outputs
from beam_embed.process.log import log

STAGING_PREFIX = ".beam-embed-staging-"
BEAM_TEMP_PREFIX = "beam-temp-"  # Beam's FileBasedSink: <output dir>/beam-temp-<prefix>-<uuid>/
JOURNAL = "publishing.json"  # in the staging folder, written before a swap touches the output
_SHOWN = 5  # unknown files a refusal names


@contextlib.contextmanager
def naming_file(path: str):
    """An OSError raised inside names `path` when it names no file itself: write() on a full
    disk fails with ENOSPC and no file name, and the one-line error should say which file."""
    try:
        yield
    except OSError as e:
        if e.filename is None:  # named in place: one-line errors report the innermost cause
            e.filename = path
        raise


@dataclass(frozen=True)
class Previous:
    """What a new run may replace in its output folder: the names (relative to the folder) that
    a manifest there lists, the manifest itself, and the files of a swap that was cut short."""
    folder: str
    replaceable: frozenset[str] = frozenset()


def _delete_folders(paths: list[str]) -> None:
    """Deletes folders with everything in them: a local folder by its own path; on object
    stores a trailing "/" deletes every object under the name."""
    FileSystems.delete([p.rstrip("/") + ("/" if is_remote(p) else "") for p in paths])


def staging_folder(folder: str, run_id: str) -> str:
    return FileSystems.join(folder, STAGING_PREFIX + run_id)


def _children(folder: str, prefix: str) -> set[str]:
    """Paths of the entries of `folder` whose name starts with `prefix`, files or folders (a
    killed run's folders may be empty). Object stores have no folders: they are found through
    the objects under them."""
    if not is_remote(folder):
        names = os.listdir(folder) if os.path.isdir(folder) else []
        return {os.path.join(folder, n) for n in names if n.startswith(prefix)}
    base = folder.rstrip("/") + "/"
    found = set()
    patterns = [FileSystems.join(folder, prefix + "*"), FileSystems.join(folder, prefix + "*/**")]
    for result in FileSystems.match(patterns):
        for meta in result.metadata_list:
            if meta.path.startswith(base):
                found.add(base + meta.path[len(base):].split("/", 1)[0])
    return found


def remove_leftovers(folder: str, keep: str | None = None) -> list[str]:
    """Deletes staging and Beam temp folders of earlier (killed) runs in `folder`, except `keep`.
    Call it only while holding the folder's claim: then no other run is writing them."""
    keep = keep.rstrip("/") if keep else None
    stale = sorted(p for prefix in (STAGING_PREFIX, BEAM_TEMP_PREFIX)
                   for p in _children(folder, prefix) if p.rstrip("/") != keep)
    if stale:
        _delete_folders(stale)
    return stale


def _holds_anything(folder: str) -> bool:
    """Whether `folder` exists: on object stores, whether any object is under its name."""
    if not is_remote(folder):
        return os.path.exists(folder)
    found = FileSystems.match([folder.rstrip("/") + "/**"])
    return any(r.metadata_list for r in found)


def discard(staging: str) -> None:
    """Removes a failed run's staging folder (a later run would remove it otherwise)."""
    try:
        if _holds_anything(staging):
            _delete_folders([staging])
    except OSError as e:
        log(f"warning: could not remove {staging} ({e}); the next run into the folder will")


def _path(folder: str, name: str) -> str:
    return FileSystems.join(folder, *name.split("/"))


def _is_file(path: str) -> bool:
    """A file (not a folder: a folder is never deleted on a manifest's word)."""
    return os.path.isfile(path) if not is_remote(path) else FileSystems.exists(path)


def _safe_names(names, source: str) -> list[str]:
    """`names` (paths relative to a folder, "/"-separated), each checked to stay inside it: a
    manifest that names "../x" or "/x" is refused rather than followed."""
    out = []
    for name in names:
        clean = posixpath.normpath(name) if isinstance(name, str) else ""
        if (not clean or clean in (".", "..") or clean.startswith(("/", "../")) or "\\" in clean
                or clean != name):
            raise ValueError(f"{source} lists {name!r}, which is not a file name inside its "
                             "folder; nothing there is replaced on its word")
        out.append(clean)
    return out


def _read_json(path: str) -> dict | None:
    """The JSON object at `path`; None when there is no file; a ValueError when unreadable."""
    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path) as f:
        try:
            data = json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{path} is not valid JSON ({e})") from e
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a JSON object")
    return data


def _listed(folder: str, kind: OutputKind, flag: str) -> set[str] | None:
    """The names the folder's manifest lists, the manifest among them; None without one."""
    path = FileSystems.join(folder, MANIFEST)
    try:
        manifest = _read_json(path)
    except ValueError as e:
        raise ValueError(f"{flag} {folder!r} holds a {MANIFEST} that cannot be read ({e}); "
                         f"nothing there is replaced without one: move it or choose another "
                         f"{flag}") from e
    if manifest is None:
        return None
    if not kind.recognizes(manifest):
        raise ValueError(f"{flag} {folder!r} holds a {MANIFEST} that `{kind.command}` did not "
                         f"write (another command's output); choose another {flag}")
    return {MANIFEST, *_safe_names(kind.listed(manifest), path)}


def _cut_short(folder: str) -> set[str]:
    """The names the journals of swaps cut short (in staging folders killed runs left) list:
    the old run's files and the new run's, both a run's to replace."""
    names: set[str] = set()
    for staging in sorted(_children(folder, STAGING_PREFIX)):
        path = FileSystems.join(staging, JOURNAL)
        try:
            journal = _read_json(path)
        except (ValueError, OSError):  # a journal cut short: its swap had not begun
            continue
        if journal is not None:
            names |= set(_safe_names([*journal.get("replaced", []), *journal.get("new", [])],
                                     path))
    return names


def _relative(folder: str, paths: list[str]) -> list[str]:
    base = folder.rstrip("/") + "/"
    return sorted(p[len(base):] for p in paths if p.startswith(base))


def _some(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def _check_writable(folder: str, flag: str) -> None:
    """A ValueError in one line when nothing can be created in the local `folder` (read-only
    disk, no permission): said before a run starts, naming the folder."""
    if is_remote(folder):
        return  # object stores answer only to a write: the claim's upload says it
    if not os.path.isdir(folder):
        raise ValueError(f"{flag} {folder!r} is not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=".beam-embed-probe-", dir=folder)
        os.close(fd)
        os.remove(probe)
    except OSError as e:
        raise ValueError(f"{flag} {folder!r} is not writable ({e.strerror or e})") from e


def check_output(folder: str, kind: OutputKind, overwrite: bool,
                 flag: str = "--output") -> Previous:
    """What a new run may replace in `folder`, or a ValueError in one line: the folder is not
    writable; it holds a previous run and not `overwrite`; it holds files that look like this
    command's outputs that no manifest lists and no manifest is there; or it holds an unlisted
    file under a name the new run writes. Cheap, so commands check it before loading a model,
    and again under the folder's claim."""
    if not _holds_anything(folder):
        return Previous(folder)
    _check_writable(folder, flag)
    listed, cut_short = _listed(folder, kind, flag), _cut_short(folder)
    known = (listed or set()) | cut_short
    unknown = [n for n in _relative(folder, existing_outputs(folder, kind.patterns))
               if n not in known]
    if listed is None and not cut_short and unknown:  # nothing says which files are a run's
        raise ValueError(f"{flag} {folder!r} holds files that look like `{kind.command}` "
                         f"outputs but no {MANIFEST} lists them ({_some(unknown)}); files no "
                         f"manifest lists are never deleted: move them or choose another {flag}")
    present = sorted(n for n in known if _is_file(_path(folder, n)))
    if present and not overwrite:
        raise ValueError(f"{flag} {folder!r} holds a previous run ({len(present)} files, e.g. "
                         f"{_path(folder, present[0])}); pass --overwrite to replace it or "
                         f"choose another {flag}")
    clashes = [n for n in unknown if kind.names.fullmatch(n)]
    if clashes:
        raise ValueError(f"{flag} {folder!r} holds {_some(clashes)}, which its {MANIFEST} does "
                         f"not list; a new run writes files of such names, and files no "
                         f"manifest lists are never replaced: move them or choose another "
                         f"{flag}")
    return Previous(folder, frozenset(known))


class NothingPublished(CommandError):
    """The run finished but was not swapped in; the output folder is as it was."""


def _prune(folder: str, removed: list[str]) -> None:
    """Removes the local sub-folders that deleting `removed` left empty (and only those)."""
    if is_remote(folder):
        return
    parents = {posixpath.dirname(n) for n in removed if "/" in n}
    for parent in sorted(parents, key=lambda p: -p.count("/")):
        while parent:
            try:
                os.rmdir(_path(folder, parent))  # fails unless empty: a user's file keeps it
            except OSError:
                break
            parent = posixpath.dirname(parent)


def publish(staging: str, folder: str, kind: OutputKind, previous: Previous) -> list[str]:
    """Swaps the complete run in `staging` into `folder` (see the module's docstring); returns
    the old run's files it replaced. Raises NothingPublished, having changed nothing, when the
    run has no manifest, lacks a file it lists, or would replace a file no manifest listed."""
    try:
        manifest = _read_json(FileSystems.join(staging, MANIFEST))
    except ValueError as e:
        raise NothingPublished(f"{e}: the run did not finish, nothing was published") from e
    if manifest is None:
        raise NothingPublished(f"{staging} holds no {MANIFEST}: the run did not finish, nothing "
                               "was published")
    new = sorted(set(_safe_names(kind.listed(manifest), FileSystems.join(staging, MANIFEST))))
    missing = [n for n in new if not _is_file(_path(staging, n))]
    if missing:
        raise NothingPublished(f"{_path(staging, missing[0])} is missing, though the run's "
                               f"{MANIFEST} lists it: nothing was published to {folder}")
    clashes = [n for n in [*new, MANIFEST] if n not in previous.replaceable
               and FileSystems.exists(_path(folder, n))]
    if clashes:
        raise NothingPublished(f"{_path(folder, clashes[0])} appeared during the run, and no "
                               f"manifest lists it (files no manifest lists are never "
                               f"replaced): nothing was published to {folder}; move it and run "
                               "again")
    old = [n for n in sorted(previous.replaceable) if _is_file(_path(folder, n))]
    journal = FileSystems.join(staging, JOURNAL)
    try:
        with naming_file(journal), FileSystems.create(journal) as f:
            f.write(json.dumps({"replaced": old, "new": [*new, MANIFEST]}).encode("utf-8"))
    except OSError as e:
        raise NothingPublished(f"{one_line(e)}: nothing was published to {folder}") from e
    try:
        _swap(staging, folder, old, new)
    except OSError as e:
        raise CommandError(f"the swap into {folder} was cut short ({one_line(e)}): it holds no "
                           "finished run now; the next run with --overwrite replaces what is "
                           "left") from e
    return [_path(folder, n) for n in old]


def _swap(staging: str, folder: str, old: list[str], new: list[str]) -> None:
    if MANIFEST in old:  # from here until the new manifest lands, no finished run is shown
        FileSystems.delete([_path(folder, MANIFEST)])
    rest = [n for n in old if n != MANIFEST]
    if rest:
        FileSystems.delete([_path(folder, n) for n in rest])
        _prune(folder, rest)
    if new:
        if not is_remote(folder):
            for parent in sorted({posixpath.dirname(n) for n in new} - {""}):
                os.makedirs(_path(folder, parent), exist_ok=True)
        FileSystems.rename([_path(staging, n) for n in new], [_path(folder, n) for n in new])
    FileSystems.rename([_path(staging, MANIFEST)], [_path(folder, MANIFEST)])
    _delete_folders([staging])
