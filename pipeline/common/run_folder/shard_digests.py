"""Each shard's size and SHA-256, computed as the shard is written, for the manifest's `digests`
(readers check what they read against them: beam_embed.pipeline.common.finished_run.shards).

The job's sink hashes the bytes on their way into the file (`HashingFile`), so the output is
never read back just to hash it. The hash is found by the step that writes the manifest, which
knows each shard only by the name it ends with, while the writer knows its temporary name: the
writer leaves the hash beside the file (`<file>` + SIDECAR), the renames that give the shards
their names move it along (`with_sidecars`), and the manifest's step takes it (`take_digests`),
leaving no sidecar behind. Everything happens inside the run's staging folder.
"""

from __future__ import annotations

import hashlib
import json

from apache_beam.io.filesystems import FileSystems

SIDECAR = ".sha256.json"  # {"bytes": n, "sha256": hex}, beside the file it describes


class HashingFile:
    """A file being written, hashing every byte written through it; otherwise the file itself
    (its other methods are the file's)."""

    def __init__(self, handle):
        self._handle = handle
        self._hash = hashlib.sha256()
        self.bytes = 0

    def write(self, data) -> int | None:
        self._hash.update(data)
        self.bytes += len(data)
        return self._handle.write(data)

    def __getattr__(self, name):
        return getattr(self._handle, name)

    def digest(self) -> dict:
        return {"bytes": self.bytes, "sha256": self._hash.hexdigest()}


def sidecar(path: str) -> str:
    return path + SIDECAR


def write_sidecar(path: str, digest: dict) -> None:
    with FileSystems.create(sidecar(path)) as f:
        f.write(json.dumps(digest).encode("utf-8"))


def with_sidecars(sources: list[str], destinations: list[str], present: set[str]
                  ) -> tuple[list[str], list[str]]:
    """The renames (`sources` -> `destinations`) plus those of the sources' sidecars that are
    `present`, each to its destination's sidecar."""
    pairs = [(sidecar(s), sidecar(d)) for s, d in zip(sources, destinations)
             if sidecar(s) in present]
    return [*sources, *(s for s, _ in pairs)], [*destinations, *(d for _, d in pairs)]


def take_digests(paths: list[str]) -> dict[str, dict]:
    """{path: its digest} for those of `paths` that have a sidecar, each sidecar read and
    deleted."""
    from beam_embed.pipeline.common.run_folder.literal_paths import delete_files, existing

    there = existing([sidecar(p) for p in paths])
    found = {}
    for path in paths:
        if sidecar(path) in there:
            with FileSystems.open(sidecar(path)) as f:
                found[path] = json.load(f)
    delete_files(sorted(there))
    return found
