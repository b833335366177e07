"""A deterministic, bounded sample of projected records, for the projector and the plots.

Every record gets a 64-bit key, a seeded hash of its id computed in bulk over the Arrow id buffer;
the sample is the `size` records with the smallest keys (bottom-k sampling). That is a uniform
sample without replacement that depends only on the ids and the seed, never on sharding, worker
count or order, and the same ids are picked for every model and pooling of one corpus. Workers
keep at most `size` rows each; merging keeps the smallest keys of the union.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

KEY = "_sample_key"
TEXT_CHARS = 500  # texts are cut to this many characters in the sample (hover, metadata.tsv)
METADATA_KEY = b"beam_embed.sample"
METHOD = "bottom-k of a seeded 64-bit hash of id"


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, elementwise on uint64 (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def id_keys(ids, seed: int) -> np.ndarray:
    """uint64 hash of each id string under `seed`: a sum of mixed (position, byte) terms per
    string, computed with cumulative sums over the whole buffer, then mixed with the length."""
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    arr = pc.cast(ids, pa.large_binary())
    offsets = np.frombuffer(arr.buffers()[1], np.int64)[arr.offset:arr.offset + len(arr) + 1]
    buf = arr.buffers()[2]
    data = np.frombuffer(buf, np.uint8) if buf is not None else np.zeros(0, np.uint8)
    data = data[offsets[0]:offsets[-1]].astype(np.uint64)
    starts, lengths = offsets[:-1] - offsets[0], np.diff(offsets)
    positions = (np.arange(len(data)) - np.repeat(starts, lengths)).astype(np.uint64)
    salt = _mix(np.uint64(seed % 2**64))
    terms = _mix(((positions << np.uint64(8)) | data) + salt)
    sums = np.concatenate([[np.uint64(0)], np.cumsum(terms, dtype=np.uint64)])
    return _mix((sums[starts + lengths] - sums[starts]) ^ _mix(lengths.astype(np.uint64) ^ salt))


class _Kept:
    """Accumulator: how many records were seen, and the smallest-key rows among them."""

    def __init__(self, table: pa.Table):
        self.seen = 0
        self.table = table


@dataclass(frozen=True, eq=False)
class Sample:
    table: pa.Table  # ordered by key
    seen: int  # records the sample was drawn from


class SampleCombineFn(beam.CombineFn):
    """pa.Table blocks shaped by `schema` -> a Sample of at most `size` rows."""

    def __init__(self, size: int, seed: int, schema: pa.Schema):
        super().__init__()
        self.size, self.seed = size, seed
        self.schema = schema.append(pa.field(KEY, pa.uint64()))

    def _keep_smallest(self, table: pa.Table) -> pa.Table:
        if table.num_rows <= self.size:
            return table
        keys = table.column(KEY).to_numpy()
        return table.take(np.argpartition(keys, self.size - 1)[:self.size])

    def create_accumulator(self) -> _Kept:
        return _Kept(self.schema.empty_table())

    def add_input(self, acc: _Kept, block: pa.Table) -> _Kept:
        acc.seen += block.num_rows
        keys = id_keys(block.column("id"), self.seed)
        if acc.table.num_rows >= self.size:
            below = keys < pc.max(acc.table.column(KEY)).as_py()
            block, keys = block.filter(pa.array(below)), keys[below]
        if "text" in block.column_names:
            text = pc.utf8_slice_codeunits(block.column("text"), 0, TEXT_CHARS)
            block = block.set_column(block.schema.get_field_index("text"), "text", text)
        block = block.append_column(KEY, pa.array(keys, pa.uint64())).cast(self.schema)
        acc.table = self._keep_smallest(pa.concat_tables([acc.table, block]))
        return acc

    def merge_accumulators(self, accs) -> _Kept:
        accs = list(accs)
        merged = _Kept(self._keep_smallest(pa.concat_tables([a.table for a in accs])))
        merged.seen = sum(a.seen for a in accs)
        return merged

    def extract_output(self, acc: _Kept) -> Sample:
        return Sample(acc.table.sort_by(KEY).drop_columns([KEY]).combine_chunks(), acc.seen)


class SampleRows(beam.PTransform):
    """PCollection[pa.Table] -> a single Sample of at most `size` rows."""

    def __init__(self, size: int, seed: int, schema: pa.Schema):
        super().__init__()
        self.fn = SampleCombineFn(size, seed, schema)

    def expand(self, blocks):
        return blocks | "KeepSmallestKeys" >> beam.CombineGlobally(self.fn)


def write_sample(sample: Sample, path: str, seed: int) -> str:
    """Writes the sample as one Parquet file, its provenance in the schema metadata."""
    info = {"size": sample.table.num_rows, "of": sample.seen, "seed": seed, "method": METHOD,
            "text_chars": TEXT_CHARS}
    table = sample.table.replace_schema_metadata({METADATA_KEY: json.dumps(info).encode()})
    with FileSystems.create(path) as f:
        pq.write_table(table, f)
    return path


def read_sample(path: str) -> tuple[pa.Table, dict]:
    """(table, provenance) of a sample written by `write_sample`."""
    with FileSystems.open(path) as f:
        table = pq.read_table(f)
    return table, json.loads(table.schema.metadata[METADATA_KEY])
