"""The typed entries a manifest is made of: a keyed entry (`Entry`: its keys typed and written
back in the order read, unknown ones kept) and a read-only table by name (`Table`), the job
manifest's entries (the model, a pooling, token granularity, the inputs, --reuse, --resume, the
counts, the files per format, rows and digests per shard), and what makes two runs' vectors
differ (VECTOR_SETTINGS, model_differences). Imports nothing of the project's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any


def later(default=None):
    """A key that some runs do not write (older runs; a dry run's reuse): it reads as None when
    absent, and is left out again when None."""
    return dataclasses.field(default=default, metadata={"later": True})


_HIDDEN = ("extra", "read_order")  # an entry's fields that are not keys of its JSON


@dataclass(frozen=True)
class Entry:
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
class Table(Mapping):
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
class ModelEntry(Entry):
    """The model that embedded the run; a run that --reuse copies from must have the same
    fingerprint, max length, long-text policy, precision, truncation and prompt."""
    name: str | None = None
    kind: str | None = None
    encoder: str | None = None
    preprocessor: str | None = None  # None: the kind takes none
    fingerprint: str | None = None
    max_seq_length: int | None = None  # None: the whole text (text-in embedders)
    long_text: str | None = later()
    precision: str | None = later()  # absent before --reuse
    truncate_dim: int | None = later()  # --truncate_dim: absent when vectors are whole
    prompt: str | None = later()  # prepended to each text: absent when none
    prompt_name: str | None = later()  # the model's prompt it is, when named
    hub: str | None = later()  # ORG/NAME@COMMIT of a Hugging Face Hub model: absent otherwise


@dataclass(frozen=True)
class PoolingEntry(Entry):
    """One pooling's vector column; int8 adds its ranges (value = code * scale + offset, per
    dimension: beam_embed.pipeline.common.rows.vector_dtypes)."""
    name: str
    column: str
    width: int
    normalize: bool = False
    scale: tuple[float, ...] | None = later()
    offset: tuple[float, ...] | None = later()


@dataclass(frozen=True)
class TokensEntry(Entry):
    """Token granularity: which layer's vectors, per which unit, stored how."""
    layer: str | None = None
    unit: str | None = None
    dtype: str | None = None
    width: int | None = None


@dataclass(frozen=True)
class InputsEntry(Entry):
    """What the run read (an older run's manifest may lack any of it)."""
    patterns: tuple[str, ...] | None = later()
    files: int | None = later()
    bytes: int | None = later()
    split: str | None = later()


@dataclass(frozen=True)
class ReuseEntry(Entry):
    """--reuse: the previous run copied from (a dry run names only its folder)."""
    output: str
    started_at: str | None = later()
    finished_at: str | None = later()
    fingerprint: str | None = later()
    manifest_sha256: str | None = later()
    rows: int | None = later()


@dataclass(frozen=True)
class ResumeEntry(Entry):
    """--resume: the records the killed attempts' committed shards held, kept, and how many
    attempts the run took (the first one included)."""
    records_kept: int
    attempts: int


@dataclass(frozen=True)
class Counts(Entry):
    """The run's counts of records (and tokens): those of every run, 0 when nothing was counted,
    then those only some runs count (None and not written when not counted)."""
    read: int = 0
    embedded: int = 0
    skipped_empty: int = 0
    dead_lettered: int = 0
    truncated: int = 0
    tokens: int = 0
    files_incomplete: int | None = later()  # input files cut short or corrupt (absent before)
    duplicate_ids: int | None = later()  # --id_field values on more than one record
    distinct_texts: int | None = later()  # --dedupe, --reuse: the texts among those embedded
    encoded: int | None = later()  # --dedupe, --reuse: the texts the encoder was given
    reused: int | None = later()  # --reuse: the records whose vectors were copied
    split_records: int | None = later()  # --split: the records the texts were split into


class Files(Table):
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


class ShardRows(Table):
    """Rows per shard name, counted as the run wrote the shards (absent before)."""


@dataclass(frozen=True)
class Digest(Entry):
    """A shard's size and SHA-256 (hex), taken as the run wrote it."""
    bytes: int | None = later()
    sha256: str | None = later()


class Digests(Table):
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
