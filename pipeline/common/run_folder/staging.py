"""A run is written beside the previous one and swapped in when it is complete; it only ever
replaces or deletes files that a manifest lists.

Everything a run writes goes to its own staging folder inside the output folder
(`STAGING_PREFIX<run id>/`, marked as a run's by `STAGING_MARKER`, its first file), Beam's
temporary `beam-temp-*` folders included. So a run never writes over another run's files, and
Beam's finalize step (which deletes existing files that match its shard names) only ever sees
the run's own. When the run is complete (its manifest written in the staging folder),
`publish` swaps it in: the old manifest goes first, then the files it listed; the files the new
manifest lists move in, the new manifest last. At every moment the output folder holds either
a manifest with exactly the files it lists, or no manifest, which readers refuse. Local disks
swap by renames (milliseconds); gs:// copies and deletes, one object at a time, and the old run
stays readable until the new one is complete there too.

What a run may delete in the output folder is decided by `check_output`, before it starts:
the files the folder's manifest lists, and the manifest. Nothing else, however much its name
looks like an output: a user's `embeddings-final-v2.parquet` stays where it is. A listed name
that leads out of the folder through a link is refused, as "../x" is. A folder with look-alikes
and no manifest that lists them is refused, and so is an unlisted file under a name the new
run writes. Before the swap changes anything, `publish` records in the staging
folder which files it replaces and which it moves in (`JOURNAL`): a swap cut short (a killed
process, a lost machine) leaves that record, and the next run counts those files as a run's.

A killed run's staging folder is removed by the next run that holds the folder's claim, when
it is provably a run's: its marker is inside, or it is the run whose claim the next one took
over. Nothing else is taken for a leftover, whatever its name (a user's
`.beam-embed-staging-backup/`, another tool's `beam-temp-*` folder).

Every path here is used as the name it is, never as a glob pattern (literal_paths.py).
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
from beam_embed.pipeline.common.run_folder.literal_paths import (
    delete_files,
    delete_folders,
    matching,
    objects_under,
)
from beam_embed.pipeline.common.run_folder.manifest.folder import MANIFEST, OutputKind
from beam_embed.pipeline.common.settings.errors import CommandError, one_line
from beam_embed.process.log import log

STAGING_PREFIX = ".beam-embed-staging-"
STAGING_MARKER = ".beam-embed-staging.json"  # {"run_id": ...}: the first file of a staging folder
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


def staging_folder(folder: str, run_id: str) -> str:
    return FileSystems.join(folder, STAGING_PREFIX + run_id)


def make_staging(folder: str, run_id: str) -> str:
    """Creates the run's staging folder in `folder`, its marker first: the mark by which a
    later run tells it from a user's folder of a similar name. Returns its path. The folder of
    this run id may exist already (a Beam write step of the run's own pipeline made it; the id
    is the run's alone): it is marked all the same."""
    staging = staging_folder(folder, run_id)
    marker = FileSystems.join(staging, STAGING_MARKER)
    with naming_file(marker):
        if not FileSystems.exists(staging):
            FileSystems.mkdirs(staging)
        with FileSystems.create(marker) as f:
            f.write(json.dumps({"run_id": run_id}).encode("utf-8"))
    return staging


def _children(folder: str, prefix: str) -> set[str]:
    """Paths of the entries of `folder` whose name starts with `prefix`, files or folders (a
    killed run's folders may be empty). Object stores have no folders: they are found through
    the objects under them."""
    if not is_remote(folder):
        names = os.listdir(folder) if os.path.isdir(folder) else []
        return {os.path.join(folder, n) for n in names if n.startswith(prefix)}
    base = folder.rstrip("/") + "/"
    return {base + path[len(base):].split("/", 1)[0]
            for path in matching(folder, [prefix + "*", prefix + "*/**"])
            if path.startswith(base)}


def _run_staging(path: str, taken_over: str | None = None) -> bool:
    """Whether `path` is the staging folder of a run: the run whose claim this one took over
    (`taken_over`, its run id), or one whose marker inside names it. A local link never is."""
    if not is_remote(path) and (os.path.islink(path) or not os.path.isdir(path)):
        return False
    run_id = path.rstrip("/").rsplit("/", 1)[-1][len(STAGING_PREFIX):]
    if run_id == taken_over:
        return True
    try:
        marker = _read_json(FileSystems.join(path, STAGING_MARKER))
    except (ValueError, OSError):
        return False
    return marker is not None and marker.get("run_id") == run_id


def _run_stagings(folder: str, taken_over: str | None = None) -> list[str]:
    return sorted(p for p in _children(folder, STAGING_PREFIX) if _run_staging(p, taken_over))


def run_stagings(folder: str) -> list[str]:
    """The staging folders of runs (their markers inside name them) in `folder`."""
    return _run_stagings(folder)


def remove_leftovers(folder: str, taken_over: str | None = None,
                     keep: str | None = None) -> list[str]:
    """Deletes the staging folders that earlier (killed) runs left in `folder`: those their
    markers name, and that of the run `taken_over` (the run id of the claim this run took
    over), but `keep` (a resumed run's own). Call it only while holding the folder's claim,
    before making this run's: then no other run is writing them. Returns those removed; one that stays is a warning (a run need
    not wait on what another left)."""
    return [path for path in _run_stagings(folder, taken_over)
            if path.rstrip("/") != (keep or "").rstrip("/") and _removed(path)]


def _removed(staging: str) -> bool:
    """Deletes a run's staging folder; False, with a warning naming what stayed and why, when
    something did (an object under a hold, a file without permission)."""
    try:
        delete_folders([staging])
        return True
    except OSError as e:
        again = ("the next run into the folder tries again" if _run_staging(staging)
                 else "remove it by hand")
        log(f"warning: could not remove {staging}: {one_line(e)}; {again}")
        return False


def _holds_anything(folder: str) -> bool:
    """Whether `folder` exists: on object stores, whether any object is under its name."""
    if not is_remote(folder):
        return os.path.exists(folder)
    return bool(objects_under(folder, limit=1))


def discard(staging: str) -> None:
    """Removes a failed run's staging folder (a later run would remove it otherwise)."""
    try:
        there = _holds_anything(staging)
    except OSError as e:
        log(f"warning: could not look for {staging} ({one_line(e)}); the next run into the "
            "folder removes it")
        return
    if there:
        _removed(staging)


def _path(folder: str, name: str) -> str:
    return FileSystems.join(folder, *name.split("/"))


def _is_file(path: str) -> bool:
    """A file (not a folder: a folder is never deleted on a manifest's word)."""
    return os.path.isfile(path) if not is_remote(path) else FileSystems.exists(path)


def _link_out(folder: str, name: str) -> str | None:
    """The link through which `folder/name` leads out of the local `folder` ("lnk -> /x", the
    first such of its parts); None when it stays inside."""
    if is_remote(folder):
        return None
    root = os.path.realpath(folder)
    parts = name.split("/")
    for i in range(1, len(parts) + 1):
        path = os.path.join(folder, *parts[:i])
        if os.path.islink(path) and os.path.commonpath(
                [root, os.path.realpath(path)]) != root:
            return f"{'/'.join(parts[:i])} -> {os.readlink(path)}"
    return None


def safe_names(names, source: str, folder: str | None = None,
               done: str = "replaced") -> list[str]:
    """`names` (paths relative to a folder, "/"-separated), each checked to stay inside it: a
    manifest that names "../x" or "/x" is refused rather than followed, and so is one whose
    name leads out of the local `folder` through a link. Readers check the names they read
    here too (`done`: what is never done on such a manifest's word, for the message)."""
    out = []
    for name in names:
        clean = posixpath.normpath(name) if isinstance(name, str) else ""
        if (not clean or clean in (".", "..") or clean.startswith(("/", "../")) or "\\" in clean
                or clean != name):
            raise ValueError(f"{source} lists {name!r}, which is not a file name inside its "
                             f"folder; nothing there is {done} on its word")
        link = _link_out(folder, clean) if folder is not None else None
        if link:
            raise ValueError(f"{source} lists {name!r}, which is not a file name inside its "
                             f"folder: it leads out of it through a link ({link}); nothing "
                             f"there is {done} on its word")
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
    return {MANIFEST, *safe_names(kind.listed(manifest), path, folder)}


def _cut_short(folder: str) -> set[str]:
    """The names the journals of swaps cut short (in the staging folders killed runs left)
    list: the old run's files and the new run's, both a run's to replace."""
    names: set[str] = set()
    for staging in _run_stagings(folder):
        path = FileSystems.join(staging, JOURNAL)
        try:
            journal = _read_json(path)
        except (ValueError, OSError):  # a journal cut short: its swap had not begun
            continue
        if journal is not None:
            names |= set(safe_names([*journal.get("replaced", []), *journal.get("new", [])],
                                     path, folder))
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
    file under a name the new run writes; a sub-folder the run writes into, or a name a manifest
    lists, leads out of it through a link. Cheap, so commands check it before loading a model,
    and again under the folder's claim."""
    if not _holds_anything(folder):
        return Previous(folder)
    _check_writable(folder, flag)
    for sub in sorted({p.split("/", 1)[0] for p in kind.patterns if "/" in p}):
        link = _link_out(folder, sub)
        if link:
            raise ValueError(f"{flag} {folder!r} holds {link}, a link out of it; a run writes "
                             f"into {sub}/ and never through a link out of its folder: remove "
                             f"the link or choose another {flag}")
    listed, cut_short = _listed(folder, kind, flag), _cut_short(folder)
    known = (listed or set()) | cut_short
    unknown = [n for n in _relative(folder, matching(folder, kind.patterns)) if n not in known]
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
    new = sorted(set(safe_names(kind.listed(manifest), FileSystems.join(staging, MANIFEST))))
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
    for name in [*old, *new]:
        link = _link_out(folder, name)
        if link:
            raise NothingPublished(f"{_path(folder, name)} leads out of {folder} through a link "
                                   f"({link}), which a run never writes or deletes through: "
                                   f"nothing was published to {folder}; remove the link and "
                                   "run again")
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
        delete_files([_path(folder, MANIFEST)])
    rest = [n for n in old if n != MANIFEST]
    if rest:
        delete_files([_path(folder, n) for n in rest])
        _prune(folder, rest)
    if new:
        if not is_remote(folder):
            for parent in sorted({posixpath.dirname(n) for n in new} - {""}):
                os.makedirs(_path(folder, parent), exist_ok=True)
        FileSystems.rename([_path(staging, n) for n in new], [_path(folder, n) for n in new])
    FileSystems.rename([_path(staging, MANIFEST)], [_path(folder, MANIFEST)])
    _removed(staging)  # the run is published: what stays of its staging folder is a warning
