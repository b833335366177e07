"""A file-based sink written inside the bundles that produce its elements, for one in-process
worker: each bundle writes one file through the sink's own open/write_record/close, and the
files are numbered into shard names by the step that lists them (the job's manifest).

Beam's `iobase.Write` runs a sink as five more steps: a one-off initialization, the bundles'
writes to temporary files, a group-by-key of their names, pre-finalize and finalize (renames).
Each step is a bundle of its own for the runner (~10-40 ms apiece on 2 cores, measured in a
20,000-sentence job: the job's three sinks ran twelve such steps, ~0.3 s before its first batch
and after its last). Those steps make a sink safe when a runner retries or splits bundles over
workers: only the files of bundles that succeeded are renamed. With one in-process worker a
failed bundle fails the whole run, and the job writes into a staging folder that is published
whole or discarded (beam_embed.pipeline.common.run_folder.staging), so the files can be written
where they stay.
"""

from __future__ import annotations

import re
import uuid

import apache_beam as beam
from apache_beam.io.filebasedsink import FileBasedSink
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.iobase import Write

from beam_embed.pipeline.common.run_folder.literal_paths import existing
from beam_embed.pipeline.common.run_folder.shard_digests import sidecar, with_sidecars
from beam_embed.pipeline.common.run_folder.staging import naming_file
from beam_embed.process.private_apis.beam import bundle_output

_UNNUMBERED = "-unnumbered-"  # prefix + this + a bundle's uuid + suffix, until number_shards
_UNNUMBERED_NAME = re.compile(rf"^(?P<prefix>.*){_UNNUMBERED}[0-9a-f]{{32}}(?P<suffix>.*)$")


def unnumbered_name(prefix: str, unique: str, suffix: str) -> str:
    """A file's name until `number_shards` gives it its shard name (`unique`: 32 hex digits)."""
    return f"{prefix}{_UNNUMBERED}{unique}{suffix}"


class _WriteBundle(beam.DoFn):
    def __init__(self, sink: FileBasedSink, max_bytes: int = 0, size=None):
        self._sink = sink
        self._max_bytes, self._size = max_bytes, size
        self._path = self._handle = None
        self._written = 0

    def start_bundle(self):
        # opened even for a bundle without elements: an empty shard, as Beam's sink writes one
        self._open()

    def _open(self):
        sink = self._sink
        self._path = unnumbered_name(sink.file_path_prefix.get(), uuid.uuid4().hex,
                                     sink.file_name_suffix.get())
        with naming_file(self._path):
            self._handle = sink.open(self._path)
        self._written = 0

    def _close(self) -> str:
        with naming_file(self._path):
            self._sink.close(self._handle)
        path, self._handle = self._path, None
        return path

    def process(self, element):
        size = self._size(element) if self._max_bytes else 0
        if self._written and self._written + size > self._max_bytes > 0:
            yield self._close()  # a file rolls before the element that would pass the bound
            self._open()
        with naming_file(self._path):  # a full disk's error names no file
            self._sink.write_record(self._handle, element)
        self._written += size

    def finish_bundle(self):
        yield bundle_output(self._close())


class WriteEachBundle(beam.PTransform):
    """Writes a PCollection through `sink`: one file per bundle, named the sink's prefix + a
    unique part + its suffix, its path the output. `number_shards` gives them shard names.
    With `max_bytes`, a file is rolled before an element that would take it past the bound
    (`size(element)`: the bytes it writes); only a single larger element passes it."""

    def __init__(self, sink: FileBasedSink, max_bytes: int = 0, size=None):
        super().__init__()
        self._sink, self._max_bytes, self._size = sink, max_bytes, size

    def expand(self, pcoll):
        return pcoll | beam.ParDo(_WriteBundle(self._sink, self._max_bytes, self._size))


def write_shards(sink: FileBasedSink, in_bundles: bool, max_bytes: int = 0,
                 size=None) -> beam.PTransform:
    """Beam's sink steps, or, for one in-process worker (`in_bundles`) with the shard count left
    to the runner, each bundle's files written where they stay (rolled at `max_bytes` when
    given, `size(element)` the bytes an element writes)."""
    if in_bundles and sink.num_shards == 0:
        return WriteEachBundle(sink, max_bytes, size)
    return Write(sink)


def number_shards(paths: list[str], template: str) -> list[str]:
    """`paths` with the files WriteEachBundle wrote renamed to shard names: prefix +
    `template` ("-SSSSS-of-NNNNN", numbered in the order of their unique parts) + suffix. Other
    paths (a sink that named its shards) are returned as they are. A file's digest sidecar
    (beam_embed.pipeline.common.run_folder.shard_digests) takes its new name with it."""
    names = shard_names(paths, template)
    renamed = [p for p in paths if names[p] != p]
    present = existing([sidecar(p) for p in renamed])
    if renamed:
        FileSystems.rename(*with_sidecars(renamed, [names[p] for p in renamed], present))
    return [p for p in paths if names[p] == p] + sorted(names[p] for p in renamed)


def shard_names(paths: list[str], template: str) -> dict[str, str]:
    """Each of `paths` -> its shard name (unnumbered files numbered per prefix and suffix, in
    the order of their unique parts; other paths -> themselves). Renames nothing."""
    groups: dict[tuple[str, str], list[str]] = {}
    names = {}
    for path in paths:
        found = _UNNUMBERED_NAME.match(path)
        if found:
            groups.setdefault((found["prefix"], found["suffix"]), []).append(path)
        else:
            names[path] = path
    for (prefix, suffix), written in groups.items():
        written.sort()
        for i, path in enumerate(written):
            names[path] = prefix + _shard(template, i, len(written)) + suffix
    return names


def _shard(template: str, index: int, count: int) -> str:
    """Beam's shard name template: a run of S is the index, a run of N the count."""
    out = re.sub("S+", lambda m: f"{index:0{len(m.group())}d}", template)
    return re.sub("N+", lambda m: f"{count:0{len(m.group())}d}", out)
