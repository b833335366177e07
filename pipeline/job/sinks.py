"""The job's outputs: its shards in every format with one schema, dead letters, the manifest.

The schema is defined once (`OutputSchema`): a batch as an Arrow table (Parquet) or as
serialized Examples (TFRecord), built from whole inference batches (Arrow arrays column-wise, no
per-row dicts). Each format's writer is its module's (beam_embed.pipeline.common.output_formats).
"""

from __future__ import annotations

import dataclasses
import json

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.io.filebasedsink import FileBasedSink
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_embed.pipeline.common import output_formats
from beam_embed.pipeline.common.bundle_write import number_shards, write_shards
from beam_embed.pipeline.common.literal_paths import ExactFinalize
from beam_embed.pipeline.common.manifest import (
    ERRORS_PREFIX,
    SHARD_TEMPLATE,
    Counts,
    Digests,
    JobManifest,
    ShardRows,
    listed_files,
)
from beam_embed.pipeline.common.output_formats.tfrecord import (
    bytes_feature,
    examples_of,
    float_features,
    int64_feature,
    raw_features,
)
from beam_embed.pipeline.common.records import EmbeddedBatch
from beam_embed.pipeline.common.shard_digests import SIDECAR, take_digests
from beam_embed.pipeline.common.vector_dtypes import StoredVectors


@dataclasses.dataclass(frozen=True)
class OutputSchema:
    """One row per record: shared columns, then one vector column per pooling."""

    widths: tuple[tuple[str, int], ...]  # (column, width) per pooling, in order
    metadata_fields: tuple[str, ...]
    include_text: bool
    stored: tuple[StoredVectors, ...] = ()  # per pooling, in order (--vector_dtype); (): float32

    def storage(self) -> list[tuple[str, StoredVectors]]:
        """(column, how its vectors are stored) per pooling."""
        return [(col, self.stored[i] if self.stored else StoredVectors("float32", width))
                for i, (col, width) in enumerate(self.widths)]

    def arrow(self) -> pa.Schema:
        fields = [pa.field("id", pa.string(), nullable=False)]
        if self.include_text:
            fields.append(pa.field("text", pa.string()))
        fields.append(pa.field("source", pa.string()))
        fields += [pa.field(name, pa.string()) for name in self.metadata_fields]
        fields += self.vector_fields()
        fields += [pa.field("num_tokens", pa.int32()), pa.field("truncated", pa.bool_())]
        return pa.schema(fields)

    def vector_fields(self) -> list[pa.Field]:
        return [pa.field(col, s.arrow_type()) for col, s in self.storage()]

    def vector_columns(self, batch: EmbeddedBatch) -> list[pa.Array]:
        return [s.arrow(batch.vectors[col]) for col, s in self.storage()]

    def table(self, batch: EmbeddedBatch) -> pa.Table:
        records = batch.records
        columns = [pa.array([r.id for r in records], pa.string())]
        if self.include_text:
            columns.append(pa.array([r.text for r in records], pa.string()))
        columns.append(pa.array([r.source for r in records], pa.string()))
        metas = [dict(r.meta) for r in records]
        columns += [pa.array([m.get(k) for m in metas], pa.string()) for k in self.metadata_fields]
        columns += self.vector_columns(batch)
        columns += [pa.array(batch.num_tokens.astype(np.int32)), pa.array(batch.truncated)]
        return pa.Table.from_arrays(columns, schema=self.arrow())

    def vector_rows(self, batch: EmbeddedBatch):
        """The batch's vectors as Python lists, converted once per batch: FloatList reads a list
        of floats ~4x faster than a numpy row (measured 23 vs 89 us per 384-wide vector)."""
        return {col: np.asarray(batch.vectors[col], np.float32).tolist() if s.dtype == "float32"
                else list(s.encode(batch.vectors[col])) for col, s in self.storage()}

    def vector_features(self, rows, i: int) -> dict:
        import tensorflow as tf

        return {col: tf.train.Feature(float_list=tf.train.FloatList(value=rows[col][i]))
                if s.dtype == "float32" else
                tf.train.Feature(bytes_list=tf.train.BytesList(value=[rows[col][i].tobytes()]))
                for col, s in self.storage()}

    def feature_columns(self, batch: EmbeddedBatch, text, ints) -> dict[str, list]:
        """Each feature other than the vectors, for every record (None where a record has no
        value), the one list both TFRecord routes write: `text` encodes a str, `ints` a list of
        integers. A batch's sources and token counts repeat: each value is encoded once."""
        records = batch.records
        source, tokens, truncated = _once(text), _once(lambda n: ints([n])), \
            _once(lambda t: ints([t]))
        columns = {"id": [text(r.id) for r in records],
                   "source": [source(r.source) for r in records],
                   "num_tokens": [tokens(n) for n in batch.num_tokens.tolist()],
                   "truncated": [truncated(t) for t in batch.truncated.tolist()]}
        if self.include_text:
            columns["text"] = [text(r.text) for r in records]
        if self.metadata_fields:
            metas = [dict(r.meta) for r in records]
            for k in self.metadata_fields:
                columns[k] = [None if m.get(k) is None else text(m[k]) for m in metas]
        return columns

    def serialized(self, batch: EmbeddedBatch) -> list[bytes]:
        """The batch's records as serialized `tf.train.Example`s (the features `examples`
        builds, in key order), encoded a column at a time by the TFRecord format's module
        (beam_embed.pipeline.common.output_formats.tfrecord)."""
        columns = self.feature_columns(batch, _wire_text, int64_feature)
        columns.update({col: float_features(batch.vectors[col]) if s.dtype == "float32"
                        else raw_features(s.encode(batch.vectors[col]))
                        for col, s in self.storage()})
        return examples_of(columns)

    def examples(self, batch: EmbeddedBatch):
        """The same records through protobuf's API (token-level rows, which are ragged)."""
        import tensorflow as tf

        columns = self.feature_columns(batch, _bytes, _ints)
        rows = self.vector_rows(batch)
        for i in range(len(batch.records)):
            f = {k: values[i] for k, values in columns.items() if values[i] is not None}
            f.update(self.vector_features(rows, i))
            yield tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString()


def _once(encode):
    """`encode`, computing each distinct value's result once."""
    done = {}

    def encoded(value):
        found = done.get(value)
        if found is None:
            found = done[value] = encode(value)
        return found
    return encoded


def _wire_text(value: str) -> bytes:
    return bytes_feature([value.encode("utf-8")])


def _ints(values):
    import tensorflow as tf

    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))


def _bytes(value: str):
    return _bytes_list([value])


def _bytes_list(values: list[str]):
    import tensorflow as tf

    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v.encode("utf-8") for v in values]))


class WriteDeadLetters(beam.PTransform):
    def __init__(self, output: str, in_bundles: bool = False):
        super().__init__()
        self._output, self._in_bundles = output, in_bundles

    def expand(self, dead):
        sink = JsonLinesSink(FileSystems.join(self._output, ERRORS_PREFIX), ".jsonl",
                             SHARD_TEMPLATE)
        return (dead
                | "ToJson" >> beam.Map(lambda d: json.dumps(d.to_json(), ensure_ascii=False))
                | "WriteShards" >> write_shards(sink, self._in_bundles))


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
    def __init__(self, output: str, base: JobManifest, names: tuple, formats: tuple):
        self._output, self._base, self._names = output, base, names
        self._formats = formats  # OutputFormat entries, looked up on the launcher

    def process(self, _, counts, files, extras=()):
        import time

        totals = dict.fromkeys(self._names, 0)
        for k, v in sorted(counts):
            totals[k] = totals.get(k, 0) + int(v)
        written = number_shards([f for f in files if not f.endswith(SIDECAR)], SHARD_TEMPLATE)
        listed = listed_files(written, self._formats)
        # each shard's rows, read back, and its size and hash, taken as it was written: readers
        # check them (beam_embed.pipeline.common.shards)
        rows = {name: fmt.count_rows(FileSystems.join(self._output, name))
                for fmt in self._formats for name in listed["files"].get(fmt.name, ())}
        paths = {name: FileSystems.join(self._output, name) for name in rows}
        taken = take_digests(list(paths.values()))
        digests = {name: taken[path] for name, path in paths.items() if path in taken}
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
                 names: tuple, extras=None):
        super().__init__()
        self._output, self._base, self._names = output, base, names
        self._counts, self._written, self._extras = counts, written, extras
        # in registry order, as the manifest lists them
        self._formats = tuple(output_formats.OUTPUT_FORMATS[f] for f in output_formats.names()
                              if f in base.formats)

    def expand(self, pbegin):
        counts, written, p = self._counts, self._written, pbegin
        totals = (tuple(counts) | "MergeCounts" >> beam.Flatten()
                  | "SumCounts" >> beam.CombinePerKey(sum))
        files = tuple(written) | "MergeFiles" >> beam.Flatten()
        extras = {} if self._extras is None else {"extras": beam.pvalue.AsList(self._extras)}
        return (p
                | "Start" >> beam.Create([None])
                | "Write" >> beam.ParDo(_WriteManifest(self._output, self._base, self._names,
                                                       self._formats),
                                        counts=beam.pvalue.AsList(totals),
                                        files=beam.pvalue.AsList(files), **extras))

