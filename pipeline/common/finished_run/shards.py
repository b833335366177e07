"""The manifest's shards as readers get them: every listed file present, undamaged and the very
file the run wrote, with row counts adding up to the manifest's; and, once read, still the run
the manifest describes.

A run records each shard's row count (`rows`), counted by its format
(beam_embed.pipeline.common.output_formats): Parquet from the file's footer, TFRecord from its
records; and each shard's size and SHA-256 (`digests`), hashed as it was written
(beam_embed.pipeline.common.run_folder.shard_digests). Before any data is read, a reader checks each
shard's rows where they are cheap to count (Parquet: one footer per file; every format with
`count_all`: --reuse refuses a damaged run before the job starts), its size and its SHA-256:
a missing, truncated, swapped or edited shard is named at once, even one with the same rows (a
shard of a --no-normalize run of the same texts). Each local file's hash is remembered under the
file's identity (beam_embed.models.file_digests), so a run searched again is not hashed again;
a shard on gs:// is read once more to hash it.

What the check saw of each file (size, times, inode; on an object store size and update time)
and the manifest's hash are kept (`CheckedShards`); after reading, `check_unchanged` finds any
file replaced or changed since (another run's --overwrite of the folder between the check and
the read), so vectors read from one run are never reported as another's. A damaged, missing or
replaced shard is an IncompleteInput: one line naming the file, never fewer or other records
read without a word. A manifest of an earlier version records no digests: its shards are
checked by their rows only, and readers say so (`unverified`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_embed.models.file_digests import file_sha256
from beam_embed.models.hub_loader import is_remote
from beam_embed.pipeline.common.output_formats import output_format
from beam_embed.pipeline.common.run_folder.literal_paths import escape
from beam_embed.pipeline.common.run_folder.manifest.folder import manifest_sha256
from beam_embed.pipeline.common.settings.errors import IncompleteInput


@dataclasses.dataclass(frozen=True)
class CheckedShards:
    """The shards a reader reads (`paths`), as checked against their run's manifest (`es`, an
    EmbeddingSet): `verified` when each one's content matched its recorded SHA-256 (False: the
    manifest records none); `seen`: what each file was when checked, for check_unchanged."""
    es: object
    paths: tuple[str, ...]
    seen: tuple
    verified: bool


def _seen(path: str) -> tuple:
    """What the file `path` is now: local, its size, modification and change times, inode and
    device (a replaced or rewritten file differs); on an object store, its size and update
    time."""
    if not is_remote(path):
        st = os.stat(path)
        return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev
    found = FileSystems.match([escape(path)])[0].metadata_list
    return (found[0].size_in_bytes, found[0].last_updated_in_seconds) if found else None


def _sha256(path: str) -> str:
    if not is_remote(path):
        return file_sha256(path)  # remembered for an unchanged file
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def unverified(es) -> str:
    """The line a reader says of a run whose manifest records no digests."""
    return (f"{es.manifest_path} records no checksums of its shards (a run of an earlier "
            "version): they are checked by their sizes and row counts only")


def check_shards(es, fmt: str, count_all: bool = False) -> CheckedShards:
    """`es`'s shards of `fmt`, checked: each exists; where rows are counted up front (Parquet's
    footers, or every format with `count_all`) is readable and holds the manifest's rows, per
    file and in total; has the size the manifest records and the content the run wrote (its
    SHA-256). Raises IncompleteInput naming the first bad one."""
    paths = es.files.get(fmt, ())
    listed = f"{es.manifest_path} lists it among the {len(paths)} {fmt} shards of that run"
    digests = es.manifest.digests
    for path in paths:
        if not FileSystems.exists(path):
            raise IncompleteInput(f"{path} is missing: {listed}; restore it or rerun the job")
    entry = output_format(fmt)
    if entry.rows_up_front or count_all:  # a damaged file is named by its format's reader
        _check_rows(es, entry, paths)
    seen = [_seen(path) for path in paths]
    for path, now in zip(paths, seen):
        expected = getattr(digests.of_shard(FileSystems.split(path)[1]), "bytes", None)
        if expected is not None and now is not None and now[0] != expected:
            raise IncompleteInput(f"{path} holds {now[0]} bytes, but {es.manifest_path} "
                                  f"records {expected}: it was replaced or cut short since the "
                                  "run wrote it; restore it or rerun the job")
    verified = bool(paths) and all(digests.of_shard(FileSystems.split(p)[1]) for p in paths)
    for path in paths:
        recorded = getattr(digests.of_shard(FileSystems.split(path)[1]), "sha256", None)
        if recorded is not None and _sha256(path) != recorded:
            raise IncompleteInput(f"{path} is not the file {es.manifest_path} lists: its "
                                  "SHA-256 differs from the one recorded as the run wrote it "
                                  "(it was replaced or changed since); restore it or rerun the "
                                  "job")
    return CheckedShards(es, tuple(paths), tuple(seen), verified)


def _check_rows(es, entry, paths) -> None:
    total = 0
    for path in paths:
        n = entry.count_rows(path)
        expected = es.rows.get(FileSystems.split(path)[1])
        if expected is not None and n != expected:
            raise IncompleteInput(f"{path} holds {n} rows, but {es.manifest_path} counts "
                                  f"{expected}; it was replaced: restore it or rerun the job")
        total += n
    embedded = es.counts.embedded
    if embedded is not None and total != embedded:
        raise IncompleteInput(f"the {entry.title} shards listed in {es.manifest_path} hold "
                              f"{total} rows, but it counts {embedded} embedded records; rerun "
                              "the job")


def check_unchanged(checked: CheckedShards) -> None:
    """After reading: each shard and the manifest are still what `check_shards` checked; an
    IncompleteInput naming the first that is not (what was read may be another run's)."""
    es = checked.es
    for path, before in zip(checked.paths, checked.seen):
        now = _seen(path) if FileSystems.exists(path) else None
        if now != before:
            raise IncompleteInput(f"{path} was replaced or changed while it was read (another "
                                  f"run writing into {es.folder}?): what was read is not "
                                  f"the run {es.manifest_path} describes; run again")
    if es.manifest_sha256 is not None and manifest_sha256(es.folder) != es.manifest_sha256:
        raise IncompleteInput(f"{es.manifest_path} was replaced while its run was read "
                              f"(another run writing into {es.folder}?): what was read may be "
                              "either run's; run again")
