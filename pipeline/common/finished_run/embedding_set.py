"""A finished run's output folder as its readers (pca, search, --reuse) see it: a view of its
JobManifest with each pooling's vector column and how it is stored, the shards' full paths, and
the format to read them in."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import pyarrow as pa
from apache_beam.io.filesystems import FileSystems

from beam_embed.pipeline.common import output_formats
from beam_embed.pipeline.common.rows.vector_dtypes import StoredVectors
from beam_embed.pipeline.common.run_folder.manifest.entries import (
    Counts,
    ModelEntry,
    PoolingEntry,
    ShardRows,
)
from beam_embed.pipeline.common.run_folder.manifest.folder import MANIFEST
from beam_embed.pipeline.common.run_folder.manifest.job import JobManifest
from beam_embed.pipeline.common.run_folder.staging import safe_names


@dataclass(frozen=True)
class PoolingColumn:
    """One pooling's vector column in the embedding files, and how it is stored."""
    name: str
    column: str
    width: int
    normalize: bool
    dtype: str = "float32"
    scale: tuple = ()  # int8 only: beam_embed.pipeline.common.rows.vector_dtypes
    offset: tuple = ()

    def __post_init__(self):  # lists from JSON (a saved PCA fit's spec) compare as tuples
        object.__setattr__(self, "scale", tuple(self.scale))
        object.__setattr__(self, "offset", tuple(self.offset))

    @classmethod
    def of(cls, entry: PoolingEntry, dtype: str) -> PoolingColumn:
        """The manifest's pooling entry, its vectors stored as `dtype`."""
        return cls(entry.name, entry.column, int(entry.width), bool(entry.normalize), dtype,
                   entry.scale or (), entry.offset or ())

    def stored(self) -> StoredVectors:
        return StoredVectors(self.dtype, self.width, self.scale, self.offset)

    @property
    def unit_length(self) -> bool:
        """The vectors read back are unit length (normalized and stored exactly)."""
        return self.normalize and self.dtype == "float32"


# The non-vector columns of every record and their Arrow types (`text` when the manifest says
# so; metadata columns are strings).
BASE_TYPES = {"id": pa.string(), "text": pa.string(), "source": pa.string(),
              "num_tokens": pa.int32(), "truncated": pa.bool_()}
# --split chunks: each row's place in its document, after `source`
CHUNK_TYPES = {"parent_id": pa.string(), "chunk_index": pa.int64(), "char_start": pa.int64(),
               "char_end": pa.int64()}


@dataclass(frozen=True)
class EmbeddingSet:
    """What `manifest.json` says about an output folder of the embedding job, as readers ask."""
    folder: str
    manifest: JobManifest
    manifest_sha256: str | None = None  # of the bytes `manifest` was read from
    # Format -> full shard paths, for the formats registered here; made when the set is: a name
    # that leads out of the folder ("../x", "/x", or through a link) is refused as the writing
    # side refuses it (a ValueError naming it), before anything reads a shard.
    files: dict[str, tuple[str, ...]] = dataclasses.field(init=False)

    def __post_init__(self):
        source = FileSystems.join(self.folder, MANIFEST)
        object.__setattr__(self, "files", {
            fmt: tuple(FileSystems.join(self.folder, *name.split("/"))
                       for name in safe_names(names, source, self.folder, "read"))
            for fmt, names in self.manifest.files.items() if fmt in output_formats.OUTPUT_FORMATS})

    @property
    def manifest_path(self) -> str:
        return FileSystems.join(self.folder, MANIFEST)

    @property
    def model(self) -> ModelEntry:
        return self.manifest.model

    @functools.cached_property
    def poolings(self) -> tuple[PoolingColumn, ...]:
        return tuple(PoolingColumn.of(p, self.manifest.vector_dtype)
                     for p in self.manifest.poolings)

    @property
    def metadata_columns(self) -> tuple[str, ...]:
        return tuple(self.manifest.metadata_columns)

    @property
    def has_text(self) -> bool:
        return bool(self.manifest.text_column)

    @property
    def finished_at(self) -> str:
        return self.manifest.finished_at

    @property
    def counts(self) -> Counts:
        return self.manifest.counts

    @property
    def rows(self) -> ShardRows:  # shard name -> rows (newer runs)
        return self.manifest.rows

    @property
    def columns(self) -> tuple[str, ...]:
        """The non-vector columns of every record, in file order."""
        text = ("text",) if self.has_text else ()
        chunks = tuple(CHUNK_TYPES) if self.chunks else ()
        return ("id",) + text + ("source",) + chunks + self.metadata_columns + \
            ("num_tokens", "truncated")

    @property
    def chunks(self) -> bool:
        """Whether the rows are chunks of documents (--split chunks: CHUNK_TYPES' columns)."""
        return self.manifest.inputs.split == "chunks"

    def column_type(self, column: str) -> pa.DataType:
        if self.chunks and column in CHUNK_TYPES:
            return CHUNK_TYPES[column]
        return BASE_TYPES.get(column, pa.string())

    def pooling(self, name: str | None) -> PoolingColumn:
        """The pooling named `name` (its name or its column); the first one when `name` is None."""
        if name is None:
            return self.poolings[0]
        for p in self.poolings:
            if name in (p.name, p.column):
                return p
        choices = sorted({p.name for p in self.poolings} | {p.column for p in self.poolings})
        raise ValueError(f"unknown pooling {name!r} in {self.manifest_path}; "
                         f"expected one of {choices}")

    def shards(self, fmt: str | None) -> tuple[str, tuple[str, ...]]:
        """(format, shard paths) to read: `fmt`, else the first format with a reader that has
        shards here, in registry order (Parquet, then TFRecord)."""
        listed = [f for f in output_formats.readable() if self.files.get(f)]
        if fmt is None:
            if not listed:
                raise ValueError(f"{self.manifest_path} lists no shards; expected files in one "
                                 f"of {output_formats.readable()}")
            fmt = listed[0]
        if fmt not in listed and self.files.get(fmt):
            raise ValueError(f"the {fmt} shards of {self.manifest_path} cannot be read here (no "
                             f"reader for that format); expected one of {listed}")
        if fmt not in listed:
            raise ValueError(f"format {fmt!r} has no shards in {self.manifest_path}; "
                             f"expected one of {listed}")
        return fmt, self.files[fmt]

    def first_with(self, reader: str) -> output_formats.OutputFormat | None:
        """The first format, in registry order, that has `reader` and shards here."""
        return next((f for f in output_formats.readers(reader) if self.files.get(f.name)), None)


def load_embedding_set(folder: str) -> EmbeddingSet:
    """Reads and checks `folder/manifest.json` (local or any Beam filesystem, e.g. gs://)."""
    es = EmbeddingSet(folder, *JobManifest.read_hashed(folder))
    if not es.poolings:
        raise ValueError(f"{es.manifest_path} lists no poolings (a token-granularity run has one "
                         "vector per token, not per record)")
    return es
