"""The job's shards: bounded in size, each committed once it is complete, so a killed run keeps
what it finished (--resume).

A worker writes its batches into one open *shard set* (one file per format, the same rows in
each) and rolls to a new set when a file reaches the shard bound (`--shard_mb`). Closing a set
commits it: its files are closed, then the keys of the records it holds are written
(`commits/<set>.keys`, one 64-bit hash a record), then the commit record itself
(`commits/<set>.json`: its files, their sizes and SHA-256 as written, rows and counts). A set
counts as done only once its commit record exists: a kill leaves at most the one open set per
worker uncommitted, and those files are removed by the resume.

The commits are written in the run's staging folder (staging.py), like everything a run writes,
and the manifest's step numbers the committed files into shard names. The record key is the
record's source, id and text, hashed: what a resumed run reads again decides by it whether a
committed shard holds the record already (records alike in all three are one to it).

This is the pattern of restartable batch jobs (deterministic units, a commit record written
only once the unit's output is durable, skip what is committed, publish once); Beam's own file
sinks are all-or-nothing (their files are renamed into place at the end, so a kill keeps none).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_embed.pipeline.common.run_folder.bundle_write import unnumbered_name
from beam_embed.pipeline.common.run_folder.manifest.folder import PREFIX
from beam_embed.pipeline.common.run_folder.shard_digests import HashingFile
from beam_embed.pipeline.common.run_folder.staging import naming_file
from beam_embed.process.private_apis.beam import bundle_output

COMMITS = "commits"  # in the staging folder: <set>.json and <set>.keys for each committed set
KEYS = ".keys"
COUNTED = ("embedded", "truncated", "tokens")  # what a commit counts of its rows


def record_key(record) -> int:
    """The record's key: its source, id and text, hashed to 64 bits (10 million records collide
    with odds of about 3 in a million)."""
    data = "\0".join((record.source or "", record.id or "", record.text)).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def record_keys(records) -> np.ndarray:
    return np.fromiter((record_key(r) for r in records), np.uint64, len(records))


def _nbytes(encoded) -> int:
    size = getattr(encoded, "nbytes", None)
    return int(size) if size is not None else len(encoded)


class _ShardFile:
    """One format's file of a shard set: written through the format's `open_batches`, hashed
    as it is written."""

    def __init__(self, output: str, fmt, set_name: str, schema, shard_bytes: int):
        self.path = FileSystems.join(output, unnumbered_name(PREFIX, set_name, fmt.suffix))
        with naming_file(self.path):
            self.handle = HashingFile(FileSystems.create(
                self.path, "application/octet-stream", CompressionTypes.UNCOMPRESSED))
            self.writer = fmt.open_batches(self.handle, schema, shard_bytes)

    def encode(self, batch):
        return self.writer.encode(batch)

    def size(self) -> int:
        return self.handle.bytes + self.writer.pending_bytes()

    def write(self, encoded) -> None:
        with naming_file(self.path):  # a full disk's error names no file
            self.writer.write(encoded)

    def close(self, rows: int) -> dict:
        """{file name: {"rows", "digest"}} of what it wrote."""
        with naming_file(self.path):
            self.writer.close()
            self.handle.close()
        return {FileSystems.split(self.path)[1]: {"rows": rows, "digest": self.handle.digest()}}


class _ShardSet:
    """One open file per format (a dataset format's part of the set: its `open_part`), the
    same rows in each."""

    def __init__(self, output: str, formats: tuple, schema, shard_bytes: int):
        self.name = uuid.uuid4().hex
        self.output, self.rows, self.keys = output, 0, []
        self.counts = dict.fromkeys(COUNTED, 0)
        self.files = [(f.name, f.open_part(output, self.name, schema, shard_bytes)
                       if f.open_part is not None else
                       _ShardFile(output, f, self.name, schema, shard_bytes)) for f in formats]

    def encode(self, batch) -> list:
        """The batch in each format, before it is written."""
        return [part.encode(batch) for _, part in self.files]

    def fits(self, encoded: list, shard_bytes: int) -> bool:
        """Whether the encoded batch fits under the bound (an empty set takes any batch)."""
        return not self.rows or all(part.size() + _nbytes(e) <= shard_bytes
                                    for (_, part), e in zip(self.files, encoded))

    def write(self, batch, encoded: list) -> None:
        for (_, part), e in zip(self.files, encoded):
            part.write(e)
        self.keys.append(record_keys(batch.records))
        self.rows += len(batch)
        self.counts["embedded"] += len(batch)
        self.counts["truncated"] += int(np.sum(batch.truncated))
        self.counts["tokens"] += int(np.sum(batch.num_tokens))

    def commit(self) -> dict:
        """Closes the files, then writes the keys, then the commit record (the commit)."""
        files, written, parts = {}, {}, {}
        for fmt, part in self.files:
            closed = part.close(self.rows)
            files[fmt] = sorted(closed)
            written.update(closed)
            if getattr(part, "metadata", None) is not None:
                parts[fmt] = part.metadata
        keys = np.concatenate(self.keys) if self.keys else np.zeros(0, np.uint64)
        base = FileSystems.join(self.output, COMMITS, self.name)
        with naming_file(base + KEYS), FileSystems.create(base + KEYS) as f:
            f.write(keys.astype("<u8").tobytes())
        commit = {"set": self.name, "rows": self.rows, "counts": self.counts, "files": files,
                  "written": written, "parts": parts}
        with naming_file(base + ".json"), FileSystems.create(base + ".json") as f:
            f.write(json.dumps(commit).encode("utf-8"))
        return commit


class _WriteShardSets(beam.DoFn):
    def __init__(self, output: str, formats: tuple, schema, shard_bytes: int):
        self._output, self._formats, self._schema = output, formats, schema
        self._shard_bytes = shard_bytes
        self._open: _ShardSet | None = None

    def start_bundle(self):
        self._open = None

    def process(self, batch):
        """Rolls to a new set before a batch the open one cannot hold whole (a file exceeds
        the bound only by a single batch larger than it)."""
        if self._open is None:
            self._open = self._new()
        encoded = self._open.encode(batch)
        if not self._open.fits(encoded, self._shard_bytes):
            yield self._open.commit()
            self._open = self._new()
        self._open.write(batch, encoded)

    def _new(self) -> _ShardSet:
        return _ShardSet(self._output, self._formats, self._schema, self._shard_bytes)

    def finish_bundle(self):
        if self._open is not None:
            done, self._open = self._open, None
            yield bundle_output(done.commit())


class WriteShardSets(beam.PTransform):
    """The job's EmbeddedBatches written into committed shard sets of `formats` (OutputFormat
    entries with `open_batches`) under `schema`, each file rolled at `shard_bytes`; the output
    is each set's commit record (a dict, as `commits/<set>.json` holds it)."""

    def __init__(self, output: str, formats: tuple, schema, shard_bytes: int):
        super().__init__()
        self._args = (output, tuple(formats), schema, shard_bytes)

    def expand(self, batches):
        return batches | beam.ParDo(_WriteShardSets(*self._args))


def empty_set(output: str, formats: tuple, schema) -> dict:
    """A committed set of no rows: a run that embedded nothing still has a shard of each format
    (its schema, for readers)."""
    return _ShardSet(output, tuple(formats), schema, 1).commit()


def read_commits(output: str) -> list[dict]:
    """The commit records in `output` (a staging folder), in the order of their set names;
    one that cannot be read (cut short by a kill as it was written) is not a commit."""
    from beam_embed.pipeline.common.run_folder.literal_paths import matching

    found = []
    for path in sorted(matching(FileSystems.join(output, COMMITS), ["*.json"])):
        try:
            with FileSystems.open(path) as f:
                commit = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(commit, dict) and {"set", "rows", "files", "written"} <= set(commit):
            found.append(commit)
    return found


def read_keys(output: str, commit: dict) -> np.ndarray:
    """The keys of the records a commit's set holds."""
    path = FileSystems.join(output, COMMITS, commit["set"] + KEYS)
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        return np.frombuffer(f.read(), "<u8").astype(np.uint64)


@dataclasses.dataclass(frozen=True)
class ShardSets:
    """How a run writes its committed shards: `formats` (OutputFormat entries with
    `open_batches`), their `schema`, the bound `shard_bytes`, and the commits `kept` from a
    killed attempt of the run (--resume)."""

    formats: tuple
    schema: object
    shard_bytes: int
    kept: tuple = ()
    finish: tuple = ()  # (name, value) keywords of a dataset format's finish_parts

    def write(self, output: str) -> WriteShardSets:
        return WriteShardSets(output, self.formats, self.schema, self.shard_bytes)

    def files(self, output: str, commits) -> dict[str, tuple[int, dict]]:
        """path -> (rows, digest) of every committed file: the kept sets' and `commits` (this
        attempt's); one empty set when there are none. A dataset format (Lance) is completed
        here, from its parts (its version files among the files)."""
        commits = [*self.kept, *commits]
        if not commits:
            commits = [empty_set(output, self.formats, self.schema)]
        found = {FileSystems.join(output, name): (w["rows"], w["digest"])
                 for c in commits for name, w in c["written"].items()}
        for f in self.formats:
            if f.finish_parts is not None:
                parts = [c["parts"][f.name] for c in commits if f.name in c.get("parts", {})]
                for name, w in f.finish_parts(output, parts, self.schema,
                                              **dict(self.finish)).items():
                    found[FileSystems.join(output, name)] = (w["rows"], w["digest"])
        return found
