"""Parquet: the job's batches encoded as Arrow tables under the run's schema (schema.py; the
token columns at token granularity), its shards of them (one row group per table written), and
every reader of them: the row count from the footer, pca's blocks of whole records, --reuse's
previous rows, search's column scan and its rows by number.

Writing: Beam's `WriteToParquetBatched` keeps pyarrow's default of dictionary-encoding every
column. Float columns (embeddings, PCA coordinates) never repeat: trying a dictionary on them
made each 512-row batch of 384-wide vectors ~5x slower to write (measured 18.8 vs 3.4 ms) and the
file ~1.5x larger; for 1M rows of 50 PCs 3.7 s of CPU against 0.7 s. So `use_dictionary` is
limited to the columns given (by default the string columns: ids, sources, metadata).

Beam, numpy and pyarrow are imported inside the functions: the registry lists this format without
them.
"""

from __future__ import annotations

from beam_embed.pipeline.common.output_formats.schema import CHUNK_COLUMNS, chunk_values
from beam_embed.pipeline.common.settings.errors import IncompleteInput, one_line

SUFFIX = ".parquet"
GROUPS_PER_SPLIT = 16  # pca: a split's row groups are read in order, one worker; splits spread
PREFETCH = 2  # pca: row groups read ahead: ~4 in memory at once (read, waiting, in use),
#               ~250 MB with the ~64 MB row groups the job writes


def arrow_schema(schema):
    """The Arrow schema of the run's rows (`schema`: an OutputSchema)."""
    import pyarrow as pa

    fields = [pa.field("id", pa.string(), nullable=False)]
    if schema.include_text:
        fields.append(pa.field("text", pa.string()))
    fields.append(pa.field("source", pa.string()))
    if schema.chunks:
        fields += [pa.field("parent_id", pa.string())] + [
            pa.field(c, pa.int64()) for c in CHUNK_COLUMNS[1:]]
    fields += [pa.field(column, pa.string()) for _, column in schema.metadata()]
    fields += _token_fields(schema) if schema.granularity == "token" else [
        pa.field(col, s.arrow_type()) for col, s in schema.storage()]
    fields += [pa.field("num_tokens", pa.int32()), pa.field("truncated", pa.bool_())]
    return pa.schema(fields)


def table(schema, batch):
    """One EmbeddedBatch as an Arrow table of the run's rows, built column-wise (no per-row
    dicts; the vectors converted in bulk)."""
    import numpy as np
    import pyarrow as pa

    records = batch.records
    columns = [pa.array([r.id for r in records], pa.string())]
    if schema.include_text:
        columns.append(pa.array([r.text for r in records], pa.string()))
    columns.append(pa.array([r.source for r in records], pa.string()))
    if schema.chunks:
        chunks = chunk_values(records)
        columns += [pa.array(chunks["parent_id"], pa.string())] + [
            pa.array(chunks[c], pa.int64()) for c in CHUNK_COLUMNS[1:]]
    metas = [dict(r.meta) for r in records]
    columns += [pa.array([m.get(k) for m in metas], pa.string()) for k, _ in schema.metadata()]
    columns += _token_columns(schema, batch) if schema.granularity == "token" else [
        s.arrow(batch.vectors[col]) for col, s in schema.storage()]
    columns += [pa.array(batch.num_tokens.astype(np.int32)), pa.array(batch.truncated)]
    return pa.Table.from_arrays(columns, schema=arrow_schema(schema))


def _token_type(schema):
    import pyarrow as pa

    return {"float32": pa.float32(), "float16": pa.float16()}[schema.dtype]


def _token_fields(schema) -> list:
    """`tokens list<string>`, `token_start`/`token_end list<int32>` (character offsets into
    `text`), `vectors list<fixed_size_list<float32|float16>[width]>`."""
    import pyarrow as pa

    vector = pa.list_(_token_type(schema), schema.width)
    return [pa.field("tokens", pa.list_(pa.string())),
            pa.field("token_start", pa.list_(pa.int32())),
            pa.field("token_end", pa.list_(pa.int32())),
            pa.field("vectors", pa.list_(vector))]


def _token_columns(schema, batch) -> list:
    import numpy as np
    import pyarrow as pa

    t = batch.tokens
    counts = np.array([len(v) for v in t.vectors], np.int32)
    offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
    flat = (np.concatenate(t.vectors) if counts.sum() else
            np.zeros((0, schema.width), schema.dtype)).astype(schema.dtype)
    vectors = pa.FixedSizeListArray.from_arrays(
        pa.array(flat.reshape(-1), _token_type(schema)), schema.width)
    return [pa.array(t.tokens, pa.list_(pa.string())),
            pa.array([s.tolist() for s in t.starts], pa.list_(pa.int32())),
            pa.array([e.tolist() for e in t.ends], pa.list_(pa.int32())),
            pa.ListArray.from_arrays(offsets, vectors)]


class ParquetFile:
    """One open Parquet file that tables are written into, a row group each."""

    def __init__(self, handle, schema, compression: str = "none",
                 dictionary: list[str] | None = None):
        import pyarrow as pa
        import pyarrow.parquet as pq

        if dictionary is None:
            dictionary = [f.name for f in schema if pa.types.is_string(f.type)]
        # use_compliant_nested_type=False: list items named "item", as Beam's sink writes them
        self._writer = pq.ParquetWriter(handle, schema, compression=compression,
                                        use_dictionary=dictionary,
                                        use_compliant_nested_type=False)

    def write(self, table) -> None:
        self._writer.write_table(table)

    def close(self) -> None:
        self._writer.close()


class ParquetBatches:
    """The job's batches written into one open Parquet shard (`open_batches`): their tables
    gathered into row groups of about `group_bytes` (a batch is often a few hundred rows, and a
    row group per batch made readers' per-group work dominate; search and pca read a row group at
    a time, so groups stay well under the shard's bound)."""

    def __init__(self, handle, schema, group_bytes: int):
        self._schema = schema
        self._file = ParquetFile(handle, arrow_schema(schema))
        self._group_bytes, self._tables, self._pending = group_bytes, [], 0

    def encode(self, batch):
        """The batch as an Arrow table (`nbytes`: about what it adds to the file)."""
        return table(self._schema, batch)

    def write(self, encoded) -> None:
        self._tables.append(encoded)
        self._pending += encoded.nbytes
        if self._pending >= self._group_bytes:
            self._flush()

    def pending_bytes(self) -> int:
        """Bytes gathered for the next row group, not yet in the file."""
        return self._pending

    def _flush(self) -> None:
        import pyarrow as pa

        if self._tables:
            self._file.write(pa.concat_tables(self._tables).combine_chunks())
        self._tables, self._pending = [], 0

    def close(self) -> None:
        self._flush()
        self._file.close()


def open_batches(handle, schema, shard_bytes: int) -> ParquetBatches:
    """A shard of the job's rows being written (run_folder/committed_shards.py): row groups of
    at most 64 MiB, and at least four to a shard."""
    return ParquetBatches(handle, schema, max(1, min(64 << 20, shard_bytes // 4)))


def sink(prefix: str, schema, num_shards: int = 0, suffix: str = SUFFIX,
         template: str | None = None, compression: str = "none",
         dictionary: list[str] | None = None, digests: bool = False):
    """Beam's file-based sink of pyarrow Tables into Parquet shards named prefix + template +
    suffix (`dictionary`: the dictionary-encoded columns; None: the string columns; `digests`:
    each shard's hash for the job's manifest, sink.FormatSink)."""
    import functools

    from apache_beam.io.filesystem import CompressionTypes

    from beam_embed.pipeline.common.output_formats.sink import FormatSink

    return FormatSink(prefix, suffix, num_shards, template,
                      functools.partial(ParquetFile, schema=schema, compression=compression,
                                        dictionary=dictionary),
                      "application/x-parquet",
                      CompressionTypes.UNCOMPRESSED,  # Parquet compresses itself
                      digests=digests)


def write_tables(prefix: str, schema, num_shards: int = 0, suffix: str = SUFFIX,
                 template: str | None = None, **options):
    """The PTransform writing a PCollection of pyarrow Tables (`options`: compression,
    dictionary)."""
    from apache_beam.io.iobase import Write

    return Write(sink(prefix, schema, num_shards, suffix, template, **options))


def write(output: str, schema, num_shards: int, in_bundles: bool = False):
    """The job's Parquet shards in `output`: its batches as Arrow tables (`table`, one row group
    each), the paths written out."""
    import functools

    import apache_beam as beam
    from apache_beam.io.filesystems import FileSystems

    from beam_embed.pipeline.common.run_folder.bundle_write import write_shards
    from beam_embed.pipeline.common.run_folder.manifest.folder import PREFIX, SHARD_TEMPLATE

    shards = sink(FileSystems.join(output, PREFIX), arrow_schema(schema), num_shards, SUFFIX,
                  SHARD_TEMPLATE, digests=True)
    return ("ToArrow" >> beam.Map(functools.partial(table, schema))
            | "WriteShards" >> write_shards(shards, in_bundles))


def _open(path: str):
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def count_rows(path: str) -> int:
    """Rows in a Parquet file, from its footer; IncompleteInput when it is missing or damaged."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        with _open(path) as f:
            return pq.ParquetFile(f).metadata.num_rows
    except (OSError, pa.ArrowException) as e:
        raise IncompleteInput(f"{path} is damaged: not a readable Parquet file ({one_line(e)}); "
                              "it was cut short or overwritten: restore it or rerun the job"
                              ) from e


def row_groups(path: str, columns: list[str]):
    """The file's row groups in order, each a pyarrow Table of `columns`."""
    import pyarrow.parquet as pq

    with _open(path) as f:
        shard = pq.ParquetFile(f)
        for group in range(shard.num_row_groups):
            yield shard.read_row_group(group, columns)


# pca: shard paths -> one block per row group, in splits of up to GROUPS_PER_SPLIT row groups
# spread over the workers, each split's next row groups read on a thread while the current block
# is worked on (a 1M-row PCA spends about as long decoding Parquet as in BLAS; see
# beam_embed.pipeline.common.output_formats.prefetch).

def row_group_splits(path: str):
    """(path, first, stop) row-group ranges of one Parquet shard, GROUPS_PER_SPLIT at most."""
    import pyarrow.parquet as pq

    with _open(path) as f:
        groups = pq.ParquetFile(f).num_row_groups
    for first in range(0, groups, GROUPS_PER_SPLIT):
        yield path, first, min(groups, first + GROUPS_PER_SPLIT)


def read_row_groups(split, columns: list[str]):
    """(path, first, stop) -> one block per row group, read ahead on a thread. Arrow's own
    column threads stay off: the read is one column or a few, and the prefetch thread is the
    parallelism (measured: the same speed or slower with them on)."""
    import pyarrow.parquet as pq

    from beam_embed.pipeline.common.output_formats.prefetch import prefetched

    path, first, stop = split
    with _open(path) as f:
        shard = pq.ParquetFile(f)
        yield from prefetched((shard.read_row_group(i, columns, use_threads=False)
                               for i in range(first, stop)), PREFETCH)


def read_blocks(files, columns: tuple[str, ...], pooling, rows: dict):
    """Shard paths -> one block per row group (the rows were checked against the manifest from
    the footers before: beam_embed.pipeline.common.finished_run.shards.check_shards)."""
    import apache_beam as beam
    import pyarrow as pa

    return (files
            | "SplitRowGroups" >> beam.FlatMap(row_group_splits)
            | "SpreadSplits" >> beam.Reshuffle()
            | "ReadRowGroups" >> beam.FlatMap(read_row_groups, list(columns) + [pooling.column]
                                              ).with_output_types(pa.Table))


def read_previous(path: str, columns: tuple[tuple[str, int], ...], stored=None):
    """--reuse: (text, float32 vectors per (column, width), num_tokens, truncated) per row.
    `stored`: how the run stored each column (StoredVectors, in `columns`' order; None:
    float32); an int8 run's codes read back as values its ranges encode to the same codes."""
    from beam_embed.pipeline.common.rows.vector_dtypes import StoredVectors, read_back

    names = [c for c, _ in columns]
    stored = stored or tuple(StoredVectors("float32", w) for _, w in columns)
    for table in row_groups(path, ["text", *names, "num_tokens", "truncated"]):
        vectors = [read_back(table.column(c), st, c, recodable=True)
                   for (c, _), st in zip(columns, stored)]
        tokens = table.column("num_tokens").to_pylist()
        truncated = table.column("truncated").to_pylist()
        for i, text in enumerate(table.column("text").to_pylist()):
            yield text, tuple(v[i].copy() for v in vectors), tokens[i], truncated[i]


def read_table(path: str, columns: tuple[str, ...], pooling, rows: dict):
    """read_embeddings: the shard's `columns` and the pooling's column (its rows were checked
    against the manifest from the footers before:
    beam_embed.pipeline.common.finished_run.shards)."""
    import pyarrow.parquet as pq

    with _open(path) as f:
        return pq.ParquetFile(f).read([*columns, pooling.column], use_threads=False)


def read_column(path: str, column: str):
    """search: the column a row group at a time (the job's writer keeps them near 64 MB):
    pyarrow's iter_batches was measured holding a whole 250,000-row shard's column instead."""
    for table in row_groups(path, [column]):
        yield table.column(0)


def fetch_rows(paths: list[str], rows: set[int], columns: list[str]) -> dict[int, list]:
    """search: row -> its values of `columns`, for rows numbered across `paths` in order,
    reading only the row groups that hold them."""
    import bisect

    import numpy as np
    import pyarrow.parquet as pq

    found, first = {}, 0
    for path in paths:
        with _open(path) as f:
            parquet = pq.ParquetFile(f)
            meta = parquet.metadata
            wanted = sorted(r - first for r in rows if first <= r < first + meta.num_rows)
            if wanted:
                ends = np.cumsum([meta.row_group(g).num_rows for g in range(meta.num_row_groups)])
                for group in sorted({bisect.bisect_right(ends, r) for r in wanted}):
                    table = parquet.read_row_group(group, columns=columns)
                    base = int(ends[group]) - table.num_rows
                    for r in (r for r in wanted if base <= r < base + table.num_rows):
                        found[first + r] = [table[c][r - base].as_py() for c in columns]
            first += meta.num_rows
    return found
