"""`beam-embed run`'s manifest.json (JobManifest: the only code that writes and reads it), the
checks that a manifest read is a finished run's of a version this reads, and what the job's
output folder holds (JOB: the output kind the folder's checks apply; listed_files: the
manifest's `files` and `errors_files` from the paths a run wrote).

`manifest.json` is written last by a run, so its presence means the run finished; every reader
(pca, search, --reuse) finds the shards through it
(beam_embed.pipeline.common.finished_run.embedding_set). "This folder is not a job output" is
answered here, once, for every command.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass

from apache_beam.io.filesystems import FileSystems

from beam_embed.pipeline.common.run_folder.manifest.entries import (
    Counts,
    Digests,
    Files,
    InputsEntry,
    ModelEntry,
    PoolingEntry,
    ResumeEntry,
    ReuseEntry,
    ShardRows,
    TokensEntry,
)
from beam_embed.pipeline.common.run_folder.manifest.folder import (
    ERRORS_PREFIX,
    JOB_OUTPUTS,
    MANIFEST,
    PREFIX,
    OutputKind,
    json_kind,
    read_json,
    write_json,
)
from beam_embed.pipeline.common.run_folder.manifest.pca import PcaManifest
from beam_embed.pipeline.common.settings.errors import IncompleteInput

# Each manifest's own version, written as its `format_version`; a reader refuses any other, so a
# change that older readers would misread bumps it. One meaning per constant (the pca manifest's:
# pca.py's PCA_MANIFEST_VERSION):
JOB_MANIFEST_VERSION = 2  # `beam-embed run`'s manifest.json (JobManifest): see below
# Version 2 added `vector_dtype`. A run storing float32 vectors writes version 1, without the
# key, so readers that predate it still read it; one storing float16, int8 or binary writes 2,
# which those readers refuse
# instead of reading int8 codes or packed bits as float vectors.
JOB_MANIFEST_VERSIONS = (1, 2)  # what JobManifest reads
DUPLICATE_EXAMPLE = "duplicate_id_example"  # the job manifest's key: the smallest duplicated id


# The shapes of the job manifest's keys its readers index into: a key holding anything else
# (hand-edited, another tool's file) is said naming it, not met as an AttributeError later.
_SHAPES = {"model": dict, "poolings": list, "files": dict, "rows": dict, "counts": dict,
           "digests": dict, "errors_files": list, "metadata_columns": list}


def _check_shapes(path: str, data: dict) -> None:
    for key, kind in _SHAPES.items():
        value = data.get(key)
        if value is not None and not isinstance(value, kind):
            raise IncompleteInput(f"{path}: {key!r} holds {json_kind(value)}, expected "
                                  f"{json_kind(kind())}; the manifest is damaged: rerun the "
                                  "job that wrote it")
    for i, entry in enumerate(data.get("poolings") or ()):
        if not isinstance(entry, dict) or not isinstance(entry.get("width"), int) \
                or isinstance(entry.get("width"), bool) or entry["width"] < 1:
            raise IncompleteInput(f"{path}: poolings[{i}] is {json.dumps(entry)[:80]}, "
                                  "expected an object with a positive integer 'width'; the "
                                  "manifest is damaged: rerun the job that wrote it")
    for fmt, names in (data.get("files") or {}).items():
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise IncompleteInput(f"{path}: files[{fmt!r}] holds {json_kind(names)}, "
                                  "expected a list of file names; the manifest is damaged: "
                                  "rerun the job that wrote it")



# The job manifest's keys read into the typed entries above.
_ENTRIES = {"model": ModelEntry, "tokens": TokensEntry, "inputs": InputsEntry,
            "reused_from": ReuseEntry, "resumed": ResumeEntry, "counts": Counts, "files": Files, "rows": ShardRows,
            "digests": Digests}


@dataclass(frozen=True)
class JobManifest:
    """`beam-embed run`'s manifest.json: the only code that writes it and reads it.

    Its keys, in the order written: granularity, tokens (token granularity only),
    format_version, model, poolings, vector_dtype (only when not float32), formats,
    text_column, metadata_columns, inputs, versions, started_at, duplicate_id_example (only
    when ids repeat), reused_from (only with --reuse), resumed (only with --resume), counts, files, errors_files, rows,
    digests, finished_at, wall_time_s. A key an older run did not write reads as empty (`rows`
    and `digests` came later, readers of earlier versions skip `digests`; `vector_dtype` as
    float32). The nested entries are typed (ModelEntry, PoolingEntry,
    TokensEntry, InputsEntry, ReuseEntry, Counts; Files, ShardRows and Digests are typed
    read-only tables by name) and write back the keys they read, in the order read. The launcher makes
    one before the run (build.manifest_base); the last step of the run completes it with what
    only the run knows (sinks.WriteManifest) and writes it."""

    model: ModelEntry
    poolings: tuple[PoolingEntry, ...]  # () for token granularity
    granularity: str = "sentence"
    tokens: TokensEntry | None = None  # token granularity only
    vector_dtype: str = "float32"  # how the poolings' vectors are stored (absent before: float32)
    formats: list = dataclasses.field(default_factory=list)  # as --format gave them
    text_column: bool = False
    metadata_columns: list = dataclasses.field(default_factory=list)
    inputs: InputsEntry = InputsEntry()
    versions: dict = dataclasses.field(default_factory=dict)
    started_at: str = ""
    duplicate_id_example: str | None = None
    reused_from: ReuseEntry | None = None  # --reuse only
    resumed: ResumeEntry | None = None  # --resume only
    counts: Counts = Counts()
    files: Files = Files()  # format -> shard names
    errors_files: list = dataclasses.field(default_factory=list)
    rows: ShardRows = ShardRows()  # shard name -> rows
    digests: Digests = Digests()  # shard name -> Digest, taken as it was written (absent before)
    finished_at: str = ""
    wall_time_s: float = 0.0
    format_version: int = JOB_MANIFEST_VERSION  # as read; written: written_version
    started_unix: float | None = None  # the launcher's clock, for wall_time_s; never written

    def to_json(self) -> dict:
        out = {"granularity": self.granularity}
        if self.tokens is not None:
            out["tokens"] = self.tokens.to_json()
        out.update({"format_version": self.written_version, "model": self.model.to_json(),
                    "poolings": [p.to_json() for p in self.poolings]})
        if self.vector_dtype != "float32":  # float32 runs write what they always wrote
            out["vector_dtype"] = self.vector_dtype
        out.update({"formats": self.formats,
                    "text_column": self.text_column, "metadata_columns": self.metadata_columns,
                    "inputs": self.inputs.to_json(), "versions": self.versions,
                    "started_at": self.started_at})
        if self.duplicate_id_example is not None:
            out[DUPLICATE_EXAMPLE] = self.duplicate_id_example
        if self.reused_from is not None:
            out["reused_from"] = self.reused_from.to_json()
        if self.resumed is not None:
            out["resumed"] = self.resumed.to_json()
        out.update({"counts": self.counts.to_json(), "files": self.files.to_json(),
                    "errors_files": self.errors_files, "rows": self.rows.to_json()})
        if self.digests:  # runs of earlier versions recorded none
            out["digests"] = self.digests.to_json()
        out.update({"finished_at": self.finished_at, "wall_time_s": self.wall_time_s})
        return out

    @property
    def written_version(self) -> int:
        return 1 if self.vector_dtype == "float32" else JOB_MANIFEST_VERSION

    def write(self, folder: str) -> None:
        write_json(folder, self.to_json())

    @classmethod
    def from_json(cls, data: dict) -> JobManifest:
        keys = {f.name for f in dataclasses.fields(cls)} - {"started_unix"}
        fields = {k: v for k, v in data.items() if k in keys}
        for key, entry in _ENTRIES.items():
            if fields.get(key) is not None:
                fields[key] = entry.from_json(fields[key])
        fields["poolings"] = tuple(PoolingEntry.from_json(p) for p in fields.get("poolings", ()))
        return cls(**fields)

    @classmethod
    def read(cls, folder: str) -> JobManifest:
        """`folder`'s manifest, checked to be a finished run's of a version this reads; a
        ValueError in one line otherwise."""
        return cls.read_hashed(folder)[0]

    @classmethod
    def read_hashed(cls, folder: str) -> tuple[JobManifest, str]:
        """`read`, and the SHA-256 (hex) of the very bytes it read: a reader that names or
        checks the manifest it read hashes those, not the file again (another run may have
        replaced it since)."""
        data, sha256 = read_json(folder)
        path = FileSystems.join(folder, MANIFEST)
        if PcaManifest.recognizes(data):
            raise ValueError(f"{folder!r} is the output of `beam-embed pca`, not of `beam-embed "
                             f"run`; give the embedding job's output folder (this one's input "
                             f"was {data.get('input', {}).get('folder')!r})")
        if "poolings" not in data or "model" not in data:
            raise ValueError(f"{path} is not an embedding job's manifest (it has no poolings or "
                             "model); give the output folder of a finished `beam-embed run`")
        _check_shapes(path, data)
        version = data.get("format_version")
        if version not in JOB_MANIFEST_VERSIONS:
            raise ValueError(f"{path}: format_version {version!r} is not supported; "
                             f"expected one of {list(JOB_MANIFEST_VERSIONS)}")
        return cls.from_json(data), sha256

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


JOB = OutputKind("beam-embed run", JOB_OUTPUTS,
                 re.compile(rf"({PREFIX}|{ERRORS_PREFIX})-[0-9]+-of-[0-9]+(\..+)?"),
                 JobManifest.listed_in, JobManifest.recognizes, resumable=True)


def listed_files(paths, formats, output: str | None = None) -> dict:
    """The manifest's `files` (shard names per format, for each of the `formats` entries that
    writes files, in their order; a dataset format's files, named relative to the run's folder
    `output`, under its dataset folder) and `errors_files`, from written paths."""
    base = None if output is None else output.rstrip("/") + "/"
    names = sorted(p[len(base):] if base and p.startswith(base) else FileSystems.split(p)[1]
                   for p in paths)
    shards = [n for n in names if n.startswith(f"{PREFIX}-")]
    return {"files": Files.of({f.name: tuple(
                n for n in names if n.startswith(f"{f.dataset}/")) if f.dataset else tuple(
                n for n in shards if n.endswith(f.suffix))
                for f in formats if f.writes_files}),
            "errors_files": [n for n in names if n.startswith(ERRORS_PREFIX)]}
