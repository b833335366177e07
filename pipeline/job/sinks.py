"""The job's outputs besides its shards: dead letters, the manifest.

The shards are written by the formats the run names, each under the one schema
(beam_embed.pipeline.common.output_formats: schema.py, and each format's module encoding a batch
and writing it); the job never encodes a format itself.
"""

from __future__ import annotations

import dataclasses
import json

import apache_beam as beam
from apache_beam.io.filebasedsink import FileBasedSink
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_embed.pipeline.common import output_formats
from beam_embed.pipeline.common.run_folder.bundle_write import (
    number_shards,
    shard_names,
    write_shards,
)
from beam_embed.pipeline.common.run_folder.literal_paths import ExactFinalize
from beam_embed.pipeline.common.run_folder.manifest.entries import Counts, Digests, ShardRows
from beam_embed.pipeline.common.run_folder.manifest.folder import ERRORS_PREFIX, SHARD_TEMPLATE
from beam_embed.pipeline.common.run_folder.manifest.job import JobManifest, listed_files
from beam_embed.pipeline.common.run_folder.shard_digests import SIDECAR, take_digests


def _line_bytes(line: str) -> int:
    return len(line.encode("utf-8")) + 1


class WriteDeadLetters(beam.PTransform):
    """The dead letters as JSON lines, `errors-*.jsonl`; in one in-process worker's bundles,
    each file rolled before `max_bytes` (--shard_mb; 0: unbounded)."""

    def __init__(self, output: str, in_bundles: bool = False, max_bytes: int = 0):
        super().__init__()
        self._output, self._in_bundles, self._max_bytes = output, in_bundles, max_bytes

    def expand(self, dead):
        sink = JsonLinesSink(FileSystems.join(self._output, ERRORS_PREFIX), ".jsonl",
                             SHARD_TEMPLATE)
        return (dead
                | "ToJson" >> beam.Map(lambda d: json.dumps(d.to_json(), ensure_ascii=False))
                | "WriteShards" >> write_shards(sink, self._in_bundles, self._max_bytes,
                                                _line_bytes))


class JsonLinesSink(ExactFinalize, FileBasedSink):
    """One JSON document a line, UTF-8 (what Beam's text sink writes for str elements)."""

    def __init__(self, file_path_prefix: str, file_name_suffix: str, shard_name_template: str):
        super().__init__(file_path_prefix, coder=None, file_name_suffix=file_name_suffix,
                         shard_name_template=shard_name_template, mime_type="text/plain",
                         compression_type=CompressionTypes.AUTO)

    def write_record(self, file_handle, value: str):
        file_handle.write(value.encode("utf-8") + b"\n")


def count(pcoll, label: str, sizes):
    """(name, n) pairs for the manifest's counts: `sizes(element)` lists an element's."""
    return pcoll | f"Count{label}" >> beam.FlatMap(sizes)


class _WriteManifest(beam.DoFn):
    def __init__(self, output: str, base: JobManifest, names: tuple, formats: tuple,
                 shard_sets=None):
        self._output, self._base, self._names = output, base, names
        self._formats = formats  # OutputFormat entries, looked up on the launcher
        self._sets = shard_sets  # ShardSets: the formats written in committed sets, or None

    def process(self, _, counts, files, commits=(), extras=()):
        import time

        totals = dict.fromkeys(self._names, 0)
        for k, v in sorted(counts):
            totals[k] = totals.get(k, 0) + int(v)
        files = [f for f in files if not f.endswith(SIDECAR)]
        known = self._sets.files(self._output, commits) if self._sets else {}
        names = shard_names([*files, *known], SHARD_TEMPLATE)
        written = number_shards([*files, *known], SHARD_TEMPLATE)
        listed = listed_files(written, self._formats, self._output)
        # each shard's rows and its size and hash, taken as it was written (a committed set's
        # from its commit; another format's rows read back): readers check them
        # (beam_embed.pipeline.common.finished_run.shards)
        committed = {names[p]: entry for p, entry in known.items()}
        paths = {name: FileSystems.join(self._output, name)
                 for fmt in self._formats for name in listed["files"].get(fmt.name, ())}
        rows = {name: committed[path][0] if path in committed else fmt.count_rows(path)
                for fmt in self._formats for name in listed["files"].get(fmt.name, ())
                for path in [paths[name]]}
        taken = take_digests([p for p in paths.values() if p not in committed])
        digests = {name: committed[path][1] if path in committed else taken[path]
                   for name, path in paths.items() if path in committed or path in taken}
        manifest = dataclasses.replace(
            self._base, **dict(extras), counts=Counts.from_json(totals), **listed,
            rows=ShardRows.of(rows), digests=Digests.from_json(digests),
            finished_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            wall_time_s=round(time.time() - self._base.started_unix, 3))
        manifest.write(self._output)
        yield manifest.to_json()


class WriteManifest(beam.PTransform):
    """Written last: waits for every shard (the written file names are its side input).

    `base`: the JobManifest made before the run; `counts`: PCollections of (name, n) pairs
    (see `count`), summed by name in one combine; `names`: every count the manifest lists, 0
    where nothing was counted; `extras`: a PCollection of (field, value) pairs of JobManifest
    fields known only once the data is read (duplicate_id_example). One combine, not one per
    count: each Beam transform costs pipeline build and runner time (measured on a
    200-sentence job, 2 cores: build 0.5-0.8 s -> 0.28 s, Pipeline.run 1.8 s -> 1.05 s with
    nine CombineGlobally replaced), and the pairs are small, so flattening them materializes
    nothing large (peak RSS +4.5% from 20,000 to 200,000 sentences)."""

    def __init__(self, output: str, base: JobManifest, counts: list, written: list,
                 names: tuple, extras=None, commits=None, shard_sets=None):
        super().__init__()
        self._output, self._base, self._names = output, base, names
        self._counts, self._written, self._extras = counts, written, extras
        self._commits, self._sets = commits, shard_sets
        # in registry order, as the manifest lists them
        self._formats = tuple(output_formats.OUTPUT_FORMATS[f] for f in output_formats.names()
                              if f in base.formats)

    def expand(self, pbegin):
        counts, written, p = self._counts, self._written, pbegin
        totals = (tuple(counts) | "MergeCounts" >> beam.Flatten()
                  | "SumCounts" >> beam.CombinePerKey(sum))
        files = tuple(written) | "MergeFiles" >> beam.Flatten()
        extras = {} if self._extras is None else {"extras": beam.pvalue.AsList(self._extras)}
        if self._commits is not None:
            extras["commits"] = beam.pvalue.AsList(self._commits)
        return (p
                | "Start" >> beam.Create([None])
                | "Write" >> beam.ParDo(_WriteManifest(self._output, self._base, self._names,
                                                       self._formats, self._sets),
                                        counts=beam.pvalue.AsList(totals),
                                        files=beam.pvalue.AsList(files), **extras))

