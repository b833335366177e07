"""Paths the user named, used as the names they are, never as glob patterns.

Beam reads `[`, `]`, `*` and `?` in a path as a pattern wherever it matches: `FileSystems.match`,
the deletes of its local and gs:// filesystems (each matches its argument first), and the
finalize step of its file sinks (which finds what it wrote through patterns made from the sink's
path). An output folder named `runs/exp[1]` then meant `runs/exp1`, and `runs/a*b` meant
`runs/axb` too: deleting a file of the one deleted the other's. Here
- a local path goes to os and shutil as it is, and a local folder is listed with its name
  escaped for `glob`;
- an object store's folder is listed through Beam with its name escaped (`escape`: Beam's
  patterns have no escape character, but a class of one character matches just that one), and
  its objects are deleted by their names;
- the sinks written through Beam's Write step find the files they wrote by their names
  (`ExactFinalize`).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
from http import HTTPStatus

from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystems import FileSystems

from beam_embed.models.hub_loader import is_remote
from beam_embed.pipeline.common.run_folder.buckets import refuse_if_listing_found_no_bucket
from beam_embed.process.private_apis.beam import FinalizeHooks

_PATTERN_CHARACTERS = re.compile(r"[\[*?]")  # what Beam's patterns give a meaning; "]" only after "["
_DELETE_MATCHES = ("gs://",)  # Beam's gs:// delete matches a path (without a trailing "/");
# its s3://, azfs:// and hdfs:// deletes take the name as it is


def escape(path: str) -> str:
    """`path` as a Beam pattern that matches itself and nothing else."""
    return _PATTERN_CHARACTERS.sub(lambda m: f"[{m.group()}]", path)


def matching(folder: str, patterns) -> list[str]:
    """The files in `folder` (its name taken as it is) whose names relative to it match one of
    `patterns` (`*` and `?` within one folder's names, as Beam's and glob's)."""
    if not is_remote(folder):
        base = glob.escape(folder)
        return [p for pattern in patterns
                for p in glob.glob(os.path.join(base, pattern), include_hidden=True)
                if os.path.isfile(p)]
    found = FileSystems.match([FileSystems.join(escape(folder), p) for p in patterns])
    return [m.path for r in found for m in r.metadata_list]


def objects_under(folder: str, limit: int | None = None) -> list[str]:
    """The objects under the object-store folder `folder` (its name taken as it is): every
    one, or the first `limit`."""
    try:
        found = FileSystems.match([escape(folder.rstrip("/")) + "/**"], limits=[limit])
    except BeamIOError as e:  # the folders the commands write and read are listed here first
        refuse_if_listing_found_no_bucket(folder, e)
        raise
    return [m.path for r in found for m in r.metadata_list]


def existing(paths) -> set[str]:
    """Those of `paths` that name a file (on object stores each folder listed once)."""
    folders: dict[str, set[str]] = {}
    for path in paths:
        folders.setdefault(FileSystems.split(path)[0], set()).add(path)
    found = set()
    for folder, wanted in folders.items():
        if is_remote(folder):
            listed = set(matching(folder, ["*"]))
        else:
            listed = {p for p in wanted if os.path.isfile(p)}
        found |= wanted & listed
    return found


def size(path: str) -> int | None:
    """The size of the file `path` names; None when there is none."""
    if not is_remote(path):
        return os.path.getsize(path) if os.path.isfile(path) else None
    found = FileSystems.match([escape(path)])[0].metadata_list
    return found[0].size_in_bytes if found else None


def delete_files(paths) -> None:
    """Deletes the files `paths` name: those, and nothing that their names would match."""
    paths = list(paths)
    for path in paths:
        if not is_remote(path):
            os.remove(path)
    remote = [escape(p) if p.startswith(_DELETE_MATCHES) else p for p in paths if is_remote(p)]
    if remote:
        FileSystems.delete(remote)


class NotDeleted(OSError):
    """Objects an object store kept when asked to delete them (under a hold, no permission)."""


def delete_folders(paths) -> None:
    """Deletes folders with everything in them: a local one by its own path (shutil.rmtree,
    which never follows a link out of it); on object stores every object under the name (a
    trailing "/" makes it a prefix, not a pattern). Raises an OSError when something stays:
    NotDeleted, naming an object kept and why, on object stores."""
    for path in paths:
        if not is_remote(path):
            shutil.rmtree(path)
    remote = [p.rstrip("/") + "/" for p in paths if is_remote(p)]
    if remote:
        FileSystems.delete(remote)  # gs://: what this cannot delete is only logged, so look
        left = [o for p in remote for o in objects_under(p)]
        if left:
            _delete_by_name(left)


def _delete_by_name(objects: list[str]) -> None:
    """Deletes `objects` by their names, whose deletes report each failure; NotDeleted names
    those kept."""
    try:
        delete_files(objects)
    except BeamIOError as e:  # its dict of paths and status codes, said in words
        kept = sorted(map(str, e.exception_details or {})) or objects
        why = (e.exception_details or {}).get(kept[0], e)
        raise NotDeleted(f"{len(kept)} object(s) could not be deleted, e.g. {kept[0]} "
                         f"({_status(why) if isinstance(why, int) else why})") from None


def _status(code: int) -> str:
    """gs://: the HTTP status an object's delete answered, as `403 Forbidden`."""
    try:
        return f"{code} {HTTPStatus(code).phrase}"
    except ValueError:
        return f"HTTP {code}"


class ExactFinalize(FinalizeHooks):
    """Mixed into a FileBasedSink (before it): its Write step's finalize finds the files it
    wrote, and those it replaces, by their names. Beam's finds them through patterns made from
    the sink's path, which match other files, or none ("src and dst files do not exist"), when
    a folder of that path has `[ ] * ?` in its name."""

    def pre_finalize(self, init_result, writer_results):
        """Deletes files already named as this write's shards (Beam: every match of the
        pattern of their names)."""
        n = len(list(writer_results))
        delete_files(sorted(existing(self.final_name(i, n) for i in range(n))))

    def files_to_rename(self, writer_results, num_shards, window=None):
        """As Beam's, each file looked up by its name: a temporary file whose shard has the
        same checksum is a copy an earlier attempt left, deleted here by its name."""
        finals = [self.final_name(i, num_shards, window) for i in range(len(writer_results))]
        there = existing([*writer_results, *finals])
        sources, destinations, copies, skipped = [], [], [], 0
        for src, dst in zip(writer_results, finals):
            if src not in there and dst not in there:
                raise BeamIOError(f"src and dst files do not exist. src: {src}, dst: {dst}")
            if src not in there:  # renamed by an earlier attempt
                skipped += 1
            elif dst in there and FileSystems.checksum(src) == FileSystems.checksum(dst):
                copies.append(src)
            else:
                sources.append(src)
                destinations.append(dst)
        delete_files(copies)
        return sources, destinations, [], skipped + len(copies)
