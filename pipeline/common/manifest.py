"""The embedding job's output folder: its names, its manifest (written and read), and how a
new run claims the folder (the model's fingerprint is its encoder kind's: beam_embed.models.spec).

Every manifest.json is written and read through its typed class, `JobManifest` (`beam-embed
run`) or `PcaManifest` (`beam-embed pca`), each with its own format version; the output
folder's checks (beam_embed.pipeline.common.staging) read any command's manifest leniently, through the
classes' `recognizes` and `listed_in`.

`manifest.json` is written last by a run, so its presence means the run finished; every reader
(pca, search) finds the shards through it. "This folder is not a job output" is answered here,
once, for every command.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import pyarrow as pa
from apache_beam.io.filesystems import FileSystems

from beam_embed.pipeline.common import output_formats
from beam_embed.pipeline.common.errors import one_line
from beam_embed.pipeline.common.vector_dtypes import StoredVectors

MANIFEST = "manifest.json"
PREFIX = "embeddings"
ERRORS_PREFIX = "errors"
SHARD_TEMPLATE = "-SSSSS-of-NNNNN"
JOB_OUTPUTS = (MANIFEST, f"{PREFIX}-*", f"{ERRORS_PREFIX}-*")  # names that look like outputs


def existing_outputs(folder: str, patterns) -> list[str]:
    """Files in `folder` matching any of `patterns` (globs relative to it)."""
    matches = FileSystems.match([FileSystems.join(folder, p) for p in patterns])
    return [m.path for r in matches for m in r.metadata_list]


@dataclass(frozen=True)
class OutputKind:
    """What one command writes into its output folder, for the checks that decide what a new
    run may replace there (beam_embed.pipeline.common.staging): only the files a manifest of this kind
    lists are ever replaced or deleted."""
    command: str  # for messages: "beam-embed run"
    patterns: tuple[str, ...]  # globs: names that look like its outputs
    names: re.Pattern  # the names it writes (relative paths): an unlisted one would be clobbered
    listed: Callable[[dict], list[str]]  # a manifest's files, relative to the folder
    recognizes: Callable[[dict], bool]  # whether a manifest is one of this command's


def make_folder(folder: str, flag: str = "--output") -> bool:
    """Creates `folder` (and its parents) unless it exists; whether it did. A ValueError in one
    line when it cannot be."""
    try:
        if FileSystems.exists(folder):
            return False
        FileSystems.mkdirs(folder)
        return True
    except OSError as e:  # a parent is a regular file, no permission, ...
        raise ValueError(f"{flag} {folder!r} cannot be created ({one_line(e)})") from e


# Each manifest's own version, written as its `format_version`; a reader refuses any other, so a
# change that older readers would misread bumps it. One meaning per constant:
JOB_MANIFEST_VERSION = 2  # `beam-embed run`'s manifest.json (JobManifest): see below
# Version 2 added `vector_dtype`. A run storing float32 vectors still writes version 1, without
# the key, as before; one storing float16, int8 or binary writes 2, which older readers refuse
# instead of reading int8 codes or packed bits as float vectors.
JOB_MANIFEST_VERSIONS = (1, 2)  # what JobManifest reads
PCA_MANIFEST_VERSION = 1  # `beam-embed pca`'s manifest.json (PcaManifest, "kind": "pca")
DUPLICATE_EXAMPLE = "duplicate_id_example"  # the job manifest's key: the smallest duplicated id


def _write_json(folder: str, data: dict) -> None:
    with FileSystems.create(FileSystems.join(folder, MANIFEST)) as f:
        f.write(json.dumps(data, indent=2).encode("utf-8"))


def _read_json(folder: str) -> dict:
    """`folder`'s manifest as JSON; a ValueError in one line when the folder holds none."""
    path = FileSystems.join(folder, MANIFEST)
    if not FileSystems.exists(path):
        raise ValueError(f"no {MANIFEST} in {folder!r}: expected the output folder of a finished "
                         f"`beam-embed run` (a run writes its {MANIFEST} last: a folder that holds "
                         f"no {MANIFEST} holds no finished run)")
    with FileSystems.open(path) as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not valid JSON ({e})") from e


@dataclass(frozen=True)
class JobManifest:
    """`beam-embed run`'s manifest.json: the only code that writes it and reads it.

    Its keys, in the order written: granularity, tokens (token granularity only),
    format_version, model, poolings, vector_dtype (only when not float32), formats,
    text_column, metadata_columns, inputs, versions, started_at, duplicate_id_example (only
    when ids repeat), reused_from (only with --reuse), counts, files, errors_files, rows,
    finished_at, wall_time_s. A key an older run did not write reads as empty (`rows` came
    later; `vector_dtype` as float32). The launcher makes one before the run
    (build.manifest_base); the last step of the run completes it with what only the run knows
    (sinks.WriteManifest) and writes it."""

    model: dict  # name, kind, encoder, preprocessor, fingerprint, max_seq_length, long_text
    # {"name", "column", "width", "normalize"} each, int8 adding "scale" and "offset" (value =
    # code * scale + offset, per dimension); [] for token granularity
    poolings: list
    granularity: str = "sentence"
    tokens: dict | None = None  # token granularity: layer, unit, dtype, width
    vector_dtype: str = "float32"  # how the poolings' vectors are stored (absent before: float32)
    formats: list = dataclasses.field(default_factory=list)  # as --format gave them
    text_column: bool = False
    metadata_columns: list = dataclasses.field(default_factory=list)
    inputs: dict = dataclasses.field(default_factory=dict)  # patterns, files, bytes, split
    versions: dict = dataclasses.field(default_factory=dict)
    started_at: str = ""
    duplicate_id_example: str | None = None
    reused_from: dict | None = None  # --reuse: output, started_at, finished_at, fingerprint, ...
    counts: dict = dataclasses.field(default_factory=dict)  # read, embedded, ...
    files: dict = dataclasses.field(default_factory=dict)  # format -> shard names
    errors_files: list = dataclasses.field(default_factory=list)
    rows: dict = dataclasses.field(default_factory=dict)  # shard name -> rows
    finished_at: str = ""
    wall_time_s: float = 0.0
    format_version: int = JOB_MANIFEST_VERSION  # as read; written: written_version
    started_unix: float | None = None  # the launcher's clock, for wall_time_s; never written

    def to_json(self) -> dict:
        out = {"granularity": self.granularity}
        if self.tokens is not None:
            out["tokens"] = self.tokens
        out.update({"format_version": self.written_version, "model": self.model,
                    "poolings": self.poolings})
        if self.vector_dtype != "float32":  # float32 runs write what they always wrote
            out["vector_dtype"] = self.vector_dtype
        out.update({"formats": self.formats,
                    "text_column": self.text_column, "metadata_columns": self.metadata_columns,
                    "inputs": self.inputs, "versions": self.versions,
                    "started_at": self.started_at})
        if self.duplicate_id_example is not None:
            out[DUPLICATE_EXAMPLE] = self.duplicate_id_example
        if self.reused_from is not None:
            out["reused_from"] = self.reused_from
        out.update({"counts": self.counts, "files": self.files,
                    "errors_files": self.errors_files, "rows": self.rows,
                    "finished_at": self.finished_at, "wall_time_s": self.wall_time_s})
        return out

    @property
    def written_version(self) -> int:
        return 1 if self.vector_dtype == "float32" else JOB_MANIFEST_VERSION

    def write(self, folder: str) -> None:
        _write_json(folder, self.to_json())

    @classmethod
    def from_json(cls, data: dict) -> JobManifest:
        keys = {f.name for f in dataclasses.fields(cls)} - {"started_unix"}
        return cls(**{k: v for k, v in data.items() if k in keys})

    @classmethod
    def read(cls, folder: str) -> JobManifest:
        """`folder`'s manifest, checked to be a finished run's of a version this reads; a
        ValueError in one line otherwise."""
        data = _read_json(folder)
        path = FileSystems.join(folder, MANIFEST)
        if PcaManifest.recognizes(data):
            raise ValueError(f"{folder!r} is the output of `beam-embed pca`, not of `beam-embed "
                             f"run`; give the embedding job's output folder (this one's input "
                             f"was {data.get('input', {}).get('folder')!r})")
        if "poolings" not in data or "model" not in data:
            raise ValueError(f"{path} is not an embedding job's manifest (it has no poolings or "
                             "model); give the output folder of a finished `beam-embed run`")
        version = data.get("format_version")
        if version not in JOB_MANIFEST_VERSIONS:
            raise ValueError(f"{path}: format_version {version!r} is not supported; "
                             f"expected one of {list(JOB_MANIFEST_VERSIONS)}")
        return cls.from_json(data)

    @staticmethod
    def recognizes(data: dict) -> bool:
        """Whether a manifest's JSON is one of these (for the output folder's checks, which
        read any command's manifest)."""
        return "kind" not in data and isinstance(data.get("files"), dict)

    @staticmethod
    def listed_in(data: dict) -> list[str]:
        """The files a manifest's JSON lists (shards of every format, dead letters), read
        leniently: whatever the rest of it holds."""
        files = data.get("files") or {}
        return [n for names in files.values() for n in names] + list(data.get("errors_files", []))


@dataclass(frozen=True)
class PcaManifest:
    """`beam-embed pca`'s manifest.json: the only code that writes it.

    Its keys, in the order written: format_version, kind ("pca"), input, fit, projections,
    sample_file, sample, projector, html, png, plot (the last five: pca.exports)."""

    input: dict  # the embedding run read: folder, format, model
    fit: dict  # file, reused, and the fit's summary
    projections: dict  # files, rows, columns
    sample_file: str
    sample: dict
    projector: dict  # the projector bundle's files by role
    html: str
    png: str
    plot: dict  # method, dims, color_by
    format_version: int = PCA_MANIFEST_VERSION
    KIND: ClassVar[str] = "pca"

    def to_json(self) -> dict:
        return {"format_version": self.format_version, "kind": self.KIND, "input": self.input,
                "fit": self.fit, "projections": self.projections,
                "sample_file": self.sample_file, "sample": self.sample,
                "projector": self.projector, "html": self.html, "png": self.png,
                "plot": self.plot}

    def write(self, folder: str) -> None:
        _write_json(folder, self.to_json())

    @classmethod
    def recognizes(cls, data: dict) -> bool:
        return data.get("kind") == cls.KIND

    @staticmethod
    def listed_in(data: dict) -> list[str]:
        """The files a manifest's JSON lists, relative to its folder (the manifest aside), read
        leniently."""
        fit, projections = data.get("fit") or {}, data.get("projections") or {}
        named = [fit.get("file"), data.get("sample_file"), data.get("html"), data.get("png"),
                 *(data.get("projector") or {}).values(), *projections.get("files", [])]
        return [n for n in named if n]


JOB = OutputKind("beam-embed run", JOB_OUTPUTS,
                 re.compile(rf"({PREFIX}|{ERRORS_PREFIX})-[0-9]+-of-[0-9]+(\..+)?"),
                 JobManifest.listed_in, JobManifest.recognizes)


@dataclass(frozen=True)
class PoolingColumn:
    """One pooling's vector column in the embedding files, and how it is stored."""
    name: str
    column: str
    width: int
    normalize: bool
    dtype: str = "float32"
    scale: tuple = ()  # int8 only: beam_embed.pipeline.common.vector_dtypes
    offset: tuple = ()

    def __post_init__(self):  # lists from JSON (a saved PCA fit's spec) compare as tuples
        object.__setattr__(self, "scale", tuple(self.scale))
        object.__setattr__(self, "offset", tuple(self.offset))

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


@dataclass(frozen=True)
class EmbeddingSet:
    """What `manifest.json` says about an output folder of the embedding job."""
    folder: str
    model: dict
    poolings: tuple[PoolingColumn, ...]
    metadata_columns: tuple[str, ...]
    has_text: bool
    files: dict  # format -> tuple of full shard paths
    finished_at: str = ""
    counts: dict = dataclasses.field(default_factory=dict)  # read, embedded, ...
    rows: dict = dataclasses.field(default_factory=dict)  # shard name -> rows (newer runs)

    @property
    def manifest_path(self) -> str:
        return FileSystems.join(self.folder, MANIFEST)

    @property
    def columns(self) -> tuple[str, ...]:
        """The non-vector columns of every record, in file order."""
        text = ("text",) if self.has_text else ()
        return ("id",) + text + ("source",) + self.metadata_columns + ("num_tokens", "truncated")

    def column_type(self, column: str) -> pa.DataType:
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


def load_embedding_set(folder: str) -> EmbeddingSet:
    """Reads and checks `folder/manifest.json` (local or any Beam filesystem, e.g. gs://)."""
    manifest = JobManifest.read(folder)
    path = FileSystems.join(folder, MANIFEST)
    poolings = tuple(PoolingColumn(p["name"], p["column"], int(p["width"]),
                                   bool(p.get("normalize")), manifest.vector_dtype,
                                   p.get("scale", ()), p.get("offset", ()))
                     for p in manifest.poolings)
    if not poolings:
        raise ValueError(f"{path} lists no poolings (a token-granularity run has one vector per "
                         "token, not per record)")
    files = {fmt: tuple(FileSystems.join(folder, name) for name in names)
             for fmt, names in manifest.files.items()
             if fmt in output_formats.OUTPUT_FORMATS}
    return EmbeddingSet(folder=folder, model=dict(manifest.model), poolings=poolings,
                        metadata_columns=tuple(manifest.metadata_columns),
                        has_text=bool(manifest.text_column), files=files,
                        finished_at=manifest.finished_at, counts=dict(manifest.counts),
                        rows=dict(manifest.rows))


def listed_files(paths, formats) -> dict:
    """The manifest's `files` (shard names per format, for each of the `formats` entries that
    writes files, in their order) and `errors_files`, from written paths."""
    names = sorted(FileSystems.split(p)[1] for p in paths)
    shards = [n for n in names if n.startswith(f"{PREFIX}-")]
    return {"files": {f.name: [n for n in shards if n.endswith(f.suffix)]
                      for f in formats if f.writes_files},
            "errors_files": [n for n in names if n.startswith(ERRORS_PREFIX)]}
