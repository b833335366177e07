"""The embedding job's output folder: its names, its manifest (written and read), and how a
new run claims the folder (the model's fingerprint is its encoder kind's: models.spec).

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

import pyarrow as pa
from apache_beam.io.filesystems import FileSystems

from pipeline.common import output_formats
from pipeline.common.errors import one_line

MANIFEST = "manifest.json"
FORMAT_VERSION = 1
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
    run may replace there (pipeline.common.staging): only the files a manifest of this kind
    lists are ever replaced or deleted."""
    command: str  # for messages: "beam-embed run"
    patterns: tuple[str, ...]  # globs: names that look like its outputs
    names: re.Pattern  # the names it writes (relative paths): an unlisted one would be clobbered
    listed: Callable[[dict], list[str]]  # a manifest's files, relative to the folder
    recognizes: Callable[[dict], bool]  # whether a manifest is one of this command's


def job_files(manifest: dict) -> list[str]:
    """The files an embedding job's manifest lists (shards of every format, dead letters)."""
    files = manifest.get("files") or {}
    return [n for names in files.values() for n in names] + list(manifest.get("errors_files", []))


JOB = OutputKind("beam-embed run", JOB_OUTPUTS,
                 re.compile(rf"({PREFIX}|{ERRORS_PREFIX})-[0-9]+-of-[0-9]+(\..+)?"), job_files,
                 lambda m: "kind" not in m and isinstance(m.get("files"), dict))


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


def write_manifest(folder: str, manifest: dict) -> None:
    with FileSystems.create(FileSystems.join(folder, MANIFEST)) as f:
        f.write(json.dumps(manifest, indent=2).encode("utf-8"))


def read_manifest(folder: str) -> dict:
    """`folder`'s manifest; a ValueError in one line when the folder holds none."""
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
class PoolingColumn:
    """One pooling's vector column in the embedding files."""
    name: str
    column: str
    width: int
    normalize: bool


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
    manifest = read_manifest(folder)
    path = FileSystems.join(folder, MANIFEST)
    if manifest.get("kind") == "pca":
        raise ValueError(f"{folder!r} is the output of `beam-embed pca`, not of `beam-embed "
                         f"run`; give the embedding job's output folder (this one's input was "
                         f"{manifest.get('input', {}).get('folder')!r})")
    if "poolings" not in manifest or "model" not in manifest:
        raise ValueError(f"{path} is not an embedding job's manifest (it has no poolings or "
                         "model); give the output folder of a finished `beam-embed run`")
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise ValueError(f"{path}: format_version {version!r} is not supported; "
                         f"expected {FORMAT_VERSION}")
    poolings = tuple(PoolingColumn(p["name"], p["column"], int(p["width"]),
                                   bool(p.get("normalize"))) for p in manifest["poolings"])
    if not poolings:
        raise ValueError(f"{path} lists no poolings (a token-granularity run has one vector per "
                         "token, not per record)")
    files = {fmt: tuple(FileSystems.join(folder, name) for name in names)
             for fmt, names in manifest.get("files", {}).items()
             if fmt in output_formats.OUTPUT_FORMATS}
    return EmbeddingSet(folder=folder, model=dict(manifest["model"]), poolings=poolings,
                        metadata_columns=tuple(manifest.get("metadata_columns", [])),
                        has_text=bool(manifest.get("text_column", False)), files=files,
                        finished_at=manifest.get("finished_at", ""),
                        counts=dict(manifest.get("counts", {})),
                        rows=dict(manifest.get("rows", {})))


def listed_files(paths, formats) -> dict:
    """The manifest's `files` (shard names per format, for each of the `formats` entries that
    writes files, in their order) and `errors_files`, from written paths."""
    names = sorted(FileSystems.split(p)[1] for p in paths)
    shards = [n for n in names if n.startswith(f"{PREFIX}-")]
    return {"files": {f.name: [n for n in shards if n.endswith(f.suffix)]
                      for f in formats if f.writes_files},
            "errors_files": [n for n in names if n.startswith(ERRORS_PREFIX)]}
