"""The embedding job's output folder: its names, its manifest (written and read), and how a
new run claims the folder (the model's fingerprint is its encoder kind's: beam_embed.models.spec).

Every manifest.json is written and read through its typed class, `JobManifest` (`beam-embed
run`) or `PcaManifest` (`beam-embed pca`), each with its own format version; the output
folder's checks (beam_embed.pipeline.common.run_folder.staging) read any command's manifest leniently, through the
classes' `recognizes` and `listed_in`.

`manifest.json` is written last by a run, so its presence means the run finished; every reader
(pca, search, --reuse) finds the shards through it (beam_embed.pipeline.common.finished_run.embedding_set).
"This folder is not a job output" is answered here, once, for every command.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from apache_beam.io.filesystems import FileSystems

from beam_embed.pipeline.common.run_folder.buckets import refuse_missing_bucket
from beam_embed.pipeline.common.settings.errors import IncompleteInput, one_line

MANIFEST = "manifest.json"
PREFIX = "embeddings"
ERRORS_PREFIX = "errors"
SHARD_TEMPLATE = "-SSSSS-of-NNNNN"
JOB_OUTPUTS = (MANIFEST, f"{PREFIX}-*", f"{ERRORS_PREFIX}-*")  # names that look like outputs


@dataclass(frozen=True)
class OutputKind:
    """What one command writes into its output folder, for the checks that decide what a new
    run may replace there (beam_embed.pipeline.common.run_folder.staging): only the files a manifest of this kind
    lists are ever replaced or deleted."""
    command: str  # for messages: "beam-embed run"
    patterns: tuple[str, ...]  # globs: names that look like its outputs
    names: re.Pattern  # the names it writes (relative paths): an unlisted one would be clobbered
    listed: Callable[[dict], list[str]]  # a manifest's files, relative to the folder
    recognizes: Callable[[dict], bool]  # whether a manifest is one of this command's
    resumable: bool = False  # a killed run's work is kept for its --resume


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
# Version 2 added `vector_dtype`. A run storing float32 vectors writes version 1, without the
# key, so readers that predate it still read it; one storing float16, int8 or binary writes 2,
# which those readers refuse
# instead of reading int8 codes or packed bits as float vectors.
JOB_MANIFEST_VERSIONS = (1, 2)  # what JobManifest reads
PCA_MANIFEST_VERSION = 1  # `beam-embed pca`'s manifest.json (PcaManifest, "kind": "pca")
DUPLICATE_EXAMPLE = "duplicate_id_example"  # the job manifest's key: the smallest duplicated id


def _write_json(folder: str, data: dict) -> None:
    with FileSystems.create(FileSystems.join(folder, MANIFEST)) as f:
        f.write(json.dumps(data, indent=2).encode("utf-8"))


def _read_json(folder: str) -> tuple[dict, str]:
    """`folder`'s manifest as JSON, and the SHA-256 (hex) of the bytes it was read from; a
    ValueError in one line when the folder holds none; an IncompleteInput (a damaged input
    file) when it holds something that is not a JSON object."""
    path = FileSystems.join(folder, MANIFEST)
    if not FileSystems.exists(path):
        refuse_missing_bucket(folder)  # no manifest there: a bucket that does not exist says so
        raise ValueError(f"no {MANIFEST} in {folder!r}: expected the output folder of a finished "
                         f"`beam-embed run` (a run writes its {MANIFEST} last: a folder that holds "
                         f"no {MANIFEST} holds no finished run)")
    with FileSystems.open(path) as f:
        raw = f.read()
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise IncompleteInput(f"{path} is not valid JSON ({e}): it is damaged; rerun the job "
                              "that wrote it") from e
    if not isinstance(data, dict):
        raise IncompleteInput(f"{path} holds {_json_kind(data)}, not the JSON object a run "
                              "writes: it is damaged or not a manifest; rerun the job that "
                              "wrote it")
    return data, hashlib.sha256(raw).hexdigest()


def _json_kind(value) -> str:
    """What a JSON value is, for messages: 'a JSON list', 'null', ..."""
    if value is None:
        return "null"
    kinds = {bool: "a JSON boolean", str: "a JSON string", list: "a JSON list",
             dict: "a JSON object", int: "a JSON number", float: "a JSON number"}
    return kinds.get(type(value), type(value).__name__)


# The shapes of the job manifest's keys its readers index into: a key holding anything else
# (hand-edited, another tool's file) is said naming it, not met as an AttributeError later.
_SHAPES = {"model": dict, "poolings": list, "files": dict, "rows": dict, "counts": dict,
           "digests": dict, "errors_files": list, "metadata_columns": list}


def _check_shapes(path: str, data: dict) -> None:
    for key, kind in _SHAPES.items():
        value = data.get(key)
        if value is not None and not isinstance(value, kind):
            raise IncompleteInput(f"{path}: {key!r} holds {_json_kind(value)}, expected "
                                  f"{_json_kind(kind())}; the manifest is damaged: rerun the "
                                  "job that wrote it")
    for i, entry in enumerate(data.get("poolings") or ()):
        if not isinstance(entry, dict) or not isinstance(entry.get("width"), int) \
                or isinstance(entry.get("width"), bool) or entry["width"] < 1:
            raise IncompleteInput(f"{path}: poolings[{i}] is {json.dumps(entry)[:80]}, "
                                  "expected an object with a positive integer 'width'; the "
                                  "manifest is damaged: rerun the job that wrote it")
    for fmt, names in (data.get("files") or {}).items():
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise IncompleteInput(f"{path}: files[{fmt!r}] holds {_json_kind(names)}, "
                                  "expected a list of file names; the manifest is damaged: "
                                  "rerun the job that wrote it")


def manifest_sha256(folder: str) -> str | None:
    """The SHA-256 (hex) of `folder`'s manifest as it is now; None when there is none."""
    path = FileSystems.join(folder, MANIFEST)
    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path) as f:
        return hashlib.sha256(f.read()).hexdigest()


def _later(default=None):
    """A key that some runs do not write (older runs; a dry run's reuse): it reads as None when
    absent, and is left out again when None."""
    return dataclasses.field(default=default, metadata={"later": True})


_HIDDEN = ("extra", "read_order")  # an entry's fields that are not keys of its JSON


@dataclass(frozen=True)
class _Entry:
    """An entry of a manifest: its keys typed and written in their order; a `_later` key that
    was absent stays absent, keys this code does not know are kept as they were read (`extra`),
    and the keys of an entry read back are written in the order they were read (`read_order`:
    older runs wrote some in another order), so an entry writes back what it read, byte for
    byte."""

    extra: dict = dataclasses.field(default_factory=dict, kw_only=True, hash=False, repr=False)
    read_order: tuple[str, ...] = dataclasses.field(default=(), kw_only=True, compare=False,
                                                    hash=False, repr=False)

    @classmethod
    def from_json(cls, data: dict):
        known = {f.name for f in dataclasses.fields(cls)} - set(_HIDDEN)
        return cls(**{k: cls._read_value(k, v) for k, v in data.items() if k in known},
                   extra={k: v for k, v in data.items() if k not in known},
                   read_order=tuple(data))

    @classmethod
    def _read_value(cls, key: str, value):
        """A key's JSON value as the field holds it (a list as a tuple; an entry overrides this
        for its nested entries)."""
        return tuple(value) if isinstance(value, list) else value

    def to_json(self) -> dict:
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name not in _HIDDEN and not (value is None and f.metadata.get("later")):
                out[f.name] = value.to_json() if hasattr(value, "to_json") else \
                    list(value) if isinstance(value, tuple) else value
        out.update(self.extra)
        ordered = {k: out.pop(k) for k in self.read_order if k in out}
        return {**ordered, **out}


@dataclass(frozen=True, eq=False)
class _Table(Mapping):
    """A manifest's table of names (shards, formats) to typed values: a read-only mapping (equal
    to any mapping with the same items), written back as the JSON object it was read from, in
    its order."""

    entries: tuple[tuple[str, Any], ...] = ()

    def __hash__(self) -> int:
        return hash(tuple(sorted(self)))

    @classmethod
    def from_json(cls, data: dict | None):
        return cls(tuple((k, cls._read_value(v)) for k, v in (data or {}).items()))

    @classmethod
    def of(cls, values: dict):
        """A table of `values` (name -> typed value), in their order."""
        return cls(tuple(values.items()))

    @staticmethod
    def _read_value(value):
        return value

    @staticmethod
    def _json_value(value):
        return value

    def to_json(self) -> dict:
        return {k: self._json_value(v) for k, v in self.entries}

    def __getitem__(self, name: str):
        for k, v in self.entries:
            if k == name:
                return v
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self.entries)

    def __len__(self) -> int:
        return len(self.entries)


@dataclass(frozen=True)
class ModelEntry(_Entry):
    """The model that embedded the run; a run that --reuse copies from must have the same
    fingerprint, max length, long-text policy, precision, truncation and prompt."""
    name: str | None = None
    kind: str | None = None
    encoder: str | None = None
    preprocessor: str | None = None  # None: the kind takes none
    fingerprint: str | None = None
    max_seq_length: int | None = None  # None: the whole text (text-in embedders)
    long_text: str | None = _later()
    precision: str | None = _later()  # absent before --reuse
    truncate_dim: int | None = _later()  # --truncate_dim: absent when vectors are whole
    prompt: str | None = _later()  # prepended to each text: absent when none
    prompt_name: str | None = _later()  # the model's prompt it is, when named


@dataclass(frozen=True)
class PoolingEntry(_Entry):
    """One pooling's vector column; int8 adds its ranges (value = code * scale + offset, per
    dimension: beam_embed.pipeline.common.rows.vector_dtypes)."""
    name: str
    column: str
    width: int
    normalize: bool = False
    scale: tuple[float, ...] | None = _later()
    offset: tuple[float, ...] | None = _later()


@dataclass(frozen=True)
class TokensEntry(_Entry):
    """Token granularity: which layer's vectors, per which unit, stored how."""
    layer: str | None = None
    unit: str | None = None
    dtype: str | None = None
    width: int | None = None


@dataclass(frozen=True)
class InputsEntry(_Entry):
    """What the run read (an older run's manifest may lack any of it)."""
    patterns: tuple[str, ...] | None = _later()
    files: int | None = _later()
    bytes: int | None = _later()
    split: str | None = _later()


@dataclass(frozen=True)
class ReuseEntry(_Entry):
    """--reuse: the previous run copied from (a dry run names only its folder)."""
    output: str
    started_at: str | None = _later()
    finished_at: str | None = _later()
    fingerprint: str | None = _later()
    manifest_sha256: str | None = _later()
    rows: int | None = _later()


@dataclass(frozen=True)
class ResumeEntry(_Entry):
    """--resume: the records the killed attempts' committed shards held, kept, and how many
    attempts the run took (the first one included)."""
    records_kept: int
    attempts: int


@dataclass(frozen=True)
class Counts(_Entry):
    """The run's counts of records (and tokens): those of every run, 0 when nothing was counted,
    then those only some runs count (None and not written when not counted)."""
    read: int = 0
    embedded: int = 0
    skipped_empty: int = 0
    dead_lettered: int = 0
    truncated: int = 0
    tokens: int = 0
    files_incomplete: int | None = _later()  # input files cut short or corrupt (absent before)
    duplicate_ids: int | None = _later()  # --id_field values on more than one record
    distinct_texts: int | None = _later()  # --dedupe, --reuse: the texts among those embedded
    encoded: int | None = _later()  # --dedupe, --reuse: the texts the encoder was given
    reused: int | None = _later()  # --reuse: the records whose vectors were copied
    split_records: int | None = _later()  # --split: the records the texts were split into


class Files(_Table):
    """The run's shard names (relative to its folder) per format, in the registry's order."""

    @staticmethod
    def _read_value(value):
        return tuple(value)

    @staticmethod
    def _json_value(value):
        return list(value)

    def names(self, fmt: str) -> tuple[str, ...]:
        """The shard names of format `fmt`; none when it wrote none."""
        return self.get(fmt, ())


class ShardRows(_Table):
    """Rows per shard name, counted as the run wrote the shards (absent before)."""


@dataclass(frozen=True)
class Digest(_Entry):
    """A shard's size and SHA-256 (hex), taken as the run wrote it."""
    bytes: int | None = _later()
    sha256: str | None = _later()


class Digests(_Table):
    """A Digest per shard name (absent before); a value that is not an object is kept as read
    and is no digest."""

    @staticmethod
    def _read_value(value):
        return Digest.from_json(value) if isinstance(value, dict) else value

    @staticmethod
    def _json_value(value):
        return value.to_json() if isinstance(value, Digest) else value

    def of_shard(self, name: str) -> Digest | None:
        found = self.get(name)
        return found if isinstance(found, Digest) else None


# What decides a stored vector besides its text and pooling, per key of the manifest's `model`,
# as messages name it: vectors that differ in any of these must not mix (--reuse copies rows only
# from a run with the same values, pca --fit applies a fit only to one).
VECTOR_SETTINGS = {"fingerprint": "model (fingerprint)", "max_seq_length": "max length",
                   "long_text": "long-text policy", "precision": "precision",
                   "truncate_dim": "truncate_dim", "prompt": "prompt"}


def model_differences(theirs: ModelEntry, ours: ModelEntry, whose: str) -> list[str]:
    """Each VECTOR_SETTINGS value that differs, in words: "max length 64, this run's 32"
    (`whose`: how the message names `ours`)."""
    return [f"{what} {getattr(theirs, key)!r}, {whose} {getattr(ours, key)!r}"
            for key, what in VECTOR_SETTINGS.items()
            if getattr(theirs, key) != getattr(ours, key)]


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
        _write_json(folder, self.to_json())

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
        data, sha256 = _read_json(folder)
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


@dataclass(frozen=True)
class PcaInput(_Entry):
    """The embedding run a pca job read: its folder, the format read, its model."""
    folder: str = ""
    format: str = ""
    model: ModelEntry = ModelEntry()

    @classmethod
    def _read_value(cls, key: str, value):
        return ModelEntry.from_json(value) if key == "model" else super()._read_value(key, value)


@dataclass(frozen=True)
class PcaFitEntry(_Entry):
    """The fit's file, whether it was reused (--fit), and its summary (pca.fit.PcaFit.summary)."""
    file: str = ""
    reused: bool = False
    pooling: str | None = _later()
    column: str | None = _later()
    width: int | None = _later()
    components: int | None = _later()
    count: int | None = _later()  # the vectors the fit was made from
    center: bool | None = _later()
    whiten: bool | None = _later()
    source: str | None = _later()  # the embedding manifest the fit was made from
    model: ModelEntry | None = _later()  # that run's model
    explained_variance_ratio: tuple[float, ...] | None = _later()

    @classmethod
    def _read_value(cls, key: str, value):
        if key == "model" and isinstance(value, dict):
            return ModelEntry.from_json(value)
        return super()._read_value(key, value)


@dataclass(frozen=True)
class PcaProjections(_Entry):
    """The projection shards, the records projected, their columns."""
    files: tuple[str, ...] = ()
    rows: int = 0
    columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class PcaSample(_Entry):
    """The sample the projector and the plots show (pca.sample): `size` of `of` records."""
    size: int = 0
    of: int = 0
    seed: int | None = _later()
    method: str | None = _later()
    text_chars: int | None = _later()
    note: str | None = _later()  # in words, as the plots' captions say it


@dataclass(frozen=True)
class PcaProjector(_Entry):
    """The projector bundle's files by role, relative to the output folder."""
    tensors: str | None = _later()
    metadata: str | None = _later()
    config: str | None = _later()


@dataclass(frozen=True)
class PcaPlot(_Entry):
    """What the plots map: the method, its dimensions, the column coloring them (or none)."""
    method: str = "pca"
    dims: int = 2
    color_by: str | None = None


# The pca manifest's keys read into the typed entries above.
_PCA_ENTRIES = {"input": PcaInput, "fit": PcaFitEntry, "projections": PcaProjections,
                "sample": PcaSample, "projector": PcaProjector, "plot": PcaPlot}


@dataclass(frozen=True)
class PcaManifest:
    """`beam-embed pca`'s manifest.json: the only code that writes it.

    Its keys, in the order written: format_version, kind ("pca"), input, fit, projections,
    sample_file, sample, projector, html, png, plot (the last five: pca.exports). The entries
    are typed (PcaInput, PcaFitEntry, PcaProjections, PcaSample, PcaProjector, PcaPlot) and
    write back the keys they read."""

    input: PcaInput
    fit: PcaFitEntry
    projections: PcaProjections
    sample_file: str
    sample: PcaSample
    projector: PcaProjector
    html: str
    png: str
    plot: PcaPlot
    format_version: int = PCA_MANIFEST_VERSION
    KIND: ClassVar[str] = "pca"

    def to_json(self) -> dict:
        return {"format_version": self.format_version, "kind": self.KIND,
                "input": self.input.to_json(), "fit": self.fit.to_json(),
                "projections": self.projections.to_json(), "sample_file": self.sample_file,
                "sample": self.sample.to_json(), "projector": self.projector.to_json(),
                "html": self.html, "png": self.png, "plot": self.plot.to_json()}

    @classmethod
    def from_json(cls, data: dict) -> PcaManifest:
        keys = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: _PCA_ENTRIES[k].from_json(v) if k in _PCA_ENTRIES else v
                      for k, v in data.items() if k in keys})

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
