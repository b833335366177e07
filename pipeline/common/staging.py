"""A run is written beside the previous one and swapped in when it is complete.

Everything a run writes goes to its own staging folder inside the output folder
(`STAGING_PREFIX<run id>/`), Beam's temporary `beam-temp-*` folders included. So a run never
writes over another run's files, and Beam's finalize step (which deletes existing files that
match its shard names) only ever sees the run's own. When the run is complete (its manifest
written in the staging folder), `publish` swaps it in: the old manifest goes first, then the old
run's files; the new files move in, the new manifest last. At every moment the output folder
holds either a manifest with exactly the files it lists, or no manifest, which readers refuse.
Local disks swap by renames (milliseconds); gs:// copies and deletes, and the old run stays
readable until the new one is complete there too.

Whatever a killed run left (its staging folder, `beam-temp-*` folders of older versions) is
removed by the next run that holds the folder's claim.
"""

from __future__ import annotations

import os

from apache_beam.io.filesystems import FileSystems

from models.hub_loader import is_remote
from pipeline.common.log import log
from pipeline.common.manifest import MANIFEST, existing_outputs

STAGING_PREFIX = ".beam-embed-staging-"
BEAM_TEMP_PREFIX = "beam-temp-"  # Beam's FileBasedSink: <output dir>/beam-temp-<prefix>-<uuid>/


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


def discard(staging: str) -> None:
    """Removes a failed run's staging folder (a later run would remove it otherwise)."""
    try:
        if FileSystems.exists(staging):
            _delete_folders([staging])
    except OSError as e:
        log(f"warning: could not remove {staging} ({e}); the next run into the folder will")


def publish(staging: str, folder: str, patterns) -> list[str]:
    """Swaps the complete run in `staging` into `folder` (see the module's docstring); returns
    the old run's files it replaced."""
    new = existing_outputs(staging, patterns)
    manifest = FileSystems.join(staging, MANIFEST)
    if manifest not in new:
        raise ValueError(f"{staging} holds no {MANIFEST}: the run did not finish, nothing was "
                         "published")
    old = existing_outputs(folder, patterns)
    old_manifest = FileSystems.join(folder, MANIFEST)
    if old_manifest in old:  # from here until the new manifest lands, no finished run is shown
        FileSystems.delete([old_manifest])
    if old:
        rest = [p for p in old if p != old_manifest]
        if rest:
            FileSystems.delete(rest)
    data = sorted(p for p in new if p != manifest)
    if data:
        FileSystems.rename(data, [FileSystems.join(folder, FileSystems.split(p)[1])
                                  for p in data])
    FileSystems.rename([manifest], [old_manifest])
    _delete_folders([staging])
    return old
