"""--reuse PREVIOUS_OUTPUT: the previous run whose vectors a run may copy, checked before any
data is read, and its rows read back as (text key, stored vectors).

Rows are matched by their text as it was encoded (after the previous run's own cleaning and
splitting: the `text` column holds exactly what its encoder saw), so the previous run must have
written its text (`--include_text`, the default). The output schema gets no hash column: a
text's key is recomputed from the text on both sides. Everything else that decides a vector is
one value for the whole run, in the manifest: the model's fingerprint, its poolings (columns,
widths, normalization), max length, long-text policy and precision. Any difference is refused up
front (exit 2), so copied and newly encoded vectors never mix two settings.

The previous run's shards are checked before any data is read (each the file its manifest
lists: rows, size, SHA-256; beam_embed.pipeline.common.finished_run.shards), and again once the job
has read them (`PreviousRun.check_read`): a run replaced by another meanwhile stops this one,
publishing nothing, so no copied row is attributed to a manifest it does not come from.

A run that stored float32 vectors is copied from into a run of any --vector_dtype: its values are
the encoder's output bit for bit, and copied rows go through the same writer as encoded ones and
are converted alike. An int8 run is copied from into an int8 run only: the new run keeps its
ranges (calibration.vector_storage), so its rows are read back as values those ranges encode to
the codes stored (StoredVectors.recodable) and the new texts are coded on the same scale. Into
any other dtype its codes would be an int8 approximation stored as if exact, and float16 and
binary values are rounded too: those are refused.
"""

from __future__ import annotations

import dataclasses
import hashlib

import apache_beam as beam

from beam_embed.models.spec import recorded_fingerprint
from beam_embed.pipeline.common import output_formats
from beam_embed.pipeline.common.finished_run.embedding_set import EmbeddingSet
from beam_embed.pipeline.common.finished_run.shards import (
    CheckedShards,
    check_shards,
    check_unchanged,
    unverified,
)
from beam_embed.pipeline.common.rows.vector_dtypes import StoredVectors
from beam_embed.pipeline.common.run_folder.manifest.entries import ReuseEntry, model_differences
from beam_embed.pipeline.common.run_folder.manifest.job import JobManifest
from beam_embed.pipeline.common.settings.errors import IncompleteInput, one_line
from beam_embed.process.log import log

READER = "read_previous"  # the formats' reader of previous rows: a run's first such format is read


def text_key(text: str) -> bytes:
    """A text's key for matching and grouping: 16 bytes of BLAKE2b over its UTF-8 (a collision
    needs ~2^64 distinct texts), so the shuffle carries short keys, not whole texts."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


@dataclasses.dataclass(frozen=True)
class PreviousRun:
    """A finished run whose rows may be copied: its checked shards and what the new manifest
    records about it (`reused_from`)."""
    folder: str
    shards: tuple[str, ...]
    format: str  # the shards' format: the first the run wrote that reuse reads (Parquet first)
    columns: tuple[tuple[str, int], ...]  # (vector column, width), in the run's order
    reused_from: ReuseEntry
    checked: CheckedShards | None = None  # for check_read once its rows are read (None: a dry run)
    # an int8 run's storage of each column (in `columns`' order): the ranges its rows are read
    # back with and the new run keeps; () for a float32 run
    stored: tuple[StoredVectors, ...] = ()

    @property
    def int8(self) -> bool:
        return bool(self.stored) and self.stored[0].dtype == "int8"

    def check_read(self) -> None:
        """After the job read its rows: they were this run's, as checked (not those of a run
        that replaced it meanwhile); an IncompleteInput naming what changed otherwise."""
        if self.checked is not None:
            check_unchanged(self.checked)


def _refused(folder: str, why: str) -> ValueError:
    return ValueError(f"--reuse {folder!r}: {why}; nothing is reused (drop --reuse to embed "
                      "every record)")


FINGERPRINT = "model (fingerprint)"  # how model_differences names a fingerprint's difference


def _other_settings(folder: str, diffs: list[str]) -> ValueError:
    return _refused(folder, "it was embedded with other settings, and copied vectors must not "
                            "mix with new ones: " + "; ".join(diffs))


def _earlier_fingerprint(previous: JobManifest, base: JobManifest) -> str:
    """Why the previous run's fingerprint, not this model's, still names this model, in one
    line (an earlier version computed it over fewer of its files, or it was taken over an
    earlier export of the same checkpoint in the model cache); "" when it does not."""
    model = base.model
    if previous.model.fingerprint == model.fingerprint or model.kind is None:
        return ""
    found = recorded_fingerprint(previous.model.fingerprint, model.kind, model.encoder,
                                 model.preprocessor, previous.model.encoder)
    return found.note if found.earlier else ""


def _differences(previous: JobManifest, base: JobManifest, earlier: str) -> list[str]:
    theirs = previous.model
    if earlier:  # the same files, hashed as that version did
        theirs = dataclasses.replace(theirs, fingerprint=base.model.fingerprint)
    diffs = model_differences(theirs, base.model, "this run's")
    if vector_columns(previous) != vector_columns(base):
        diffs.append(f"poolings {_poolings(previous)}, this run's {_poolings(base)}")
    return diffs


def vector_columns(manifest: JobManifest) -> tuple:
    """What each pooling's vectors are (name, column, width, normalization), not how a run
    stores them: an int8 run's ranges are its own, and copied float32 rows are stored with them
    as its encoded rows are."""
    return tuple((p.name, p.column, p.width, p.normalize) for p in manifest.poolings)


def _poolings(manifest: JobManifest) -> str:
    return ", ".join(f"{p.name} ({p.width}{', normalized' if p.normalize else ''})"
                     for p in manifest.poolings) or "none"


def _unusable(folder: str, previous: JobManifest, granularity: str, vector_dtype: str) -> None:
    """The refusals a run's manifest alone decides (no model needed); `vector_dtype`: the new
    run's."""
    if previous.granularity != "sentence" or granularity != "sentence":
        raise _refused(folder, "reuse copies sentence vectors; token granularity has none "
                               "(the previous run's granularity is "
                               f"{previous.granularity!r})")
    if previous.vector_dtype == "int8" and vector_dtype != "int8":
        raise _refused(folder, "it stored its vectors as int8 codes, which copied into a "
                               f"--vector_dtype {vector_dtype} run would be an int8 "
                               "approximation beside exact vectors; expected --vector_dtype "
                               "int8 (its codes are copied and its ranges kept), or drop --reuse "
                               f"to embed every record as {vector_dtype}")
    if previous.vector_dtype not in ("float32", "int8"):
        raise _refused(folder, f"it stored its vectors as {previous.vector_dtype} "
                               "(--vector_dtype), not the encoder's float32 values, and rounded "
                               "vectors must not mix with exact ones; reuse copies from a float32 "
                               "run (into any --vector_dtype) or from an int8 run into an int8 "
                               "run")
    unranged = [p.column for p in previous.poolings if previous.vector_dtype == "int8" and (
        not p.scale or not p.offset or len(p.scale) != p.width or len(p.offset) != p.width)]
    if unranged:
        raise _refused(folder, f"its manifest gives no int8 ranges (scale and offset of its "
                               f"width) for {', '.join(unranged)}, so its codes cannot be read "
                               "back")
    if not previous.text_column:
        raise _refused(folder, "it was written with --no-include_text, so its rows hold no "
                               "text to match against this run's texts")


def check_reusable(folder: str, vector_dtype: str = "float32") -> None:
    """What the previous run's manifest alone refuses (no manifest, a float16 or binary run, an
    int8 run into another dtype than int8 (`vector_dtype`, the new run's), no texts, token
    vectors), checked before the model loads or int8 calibrates: a refusal costs no work.
    previous_run checks the rest once the model is known."""
    folder = folder.rstrip("/")
    try:
        previous = JobManifest.read(folder)
    except ValueError as e:
        raise _refused(folder, str(e)) from e
    _unusable(folder, previous, "sentence", vector_dtype)


def previous_run(folder: str, base: JobManifest) -> PreviousRun:
    """The run in `folder`, checked against the new run's manifest `base` (made before the
    run: its model and poolings); a ValueError in one line naming what stands in the way."""
    folder = folder.rstrip("/")
    try:
        previous, manifest_sha256 = JobManifest.read_hashed(folder)
    except (ValueError, IncompleteInput) as e:  # refused as its damaged shards are
        raise _refused(folder, str(e)) from e
    if previous.granularity != "sentence" or base.granularity != "sentence":
        _unusable(folder, previous, base.granularity, base.vector_dtype)
    earlier = _earlier_fingerprint(previous, base)
    diffs = _differences(previous, base, earlier)
    # the fingerprint alone differs: its rows embedded again decide, once its shards are checked
    fingerprint_only = bool(diffs) and all(d.startswith(FINGERPRINT) for d in diffs)
    if diffs and not fingerprint_only:
        raise _other_settings(folder, diffs)
    _unusable(folder, previous, base.granularity, base.vector_dtype)
    try:
        es = EmbeddingSet(folder, previous, manifest_sha256)
    except ValueError as e:  # a shard name that leads out of the folder
        raise _refused(folder, str(e)) from e
    fmt = es.first_with(READER)
    if fmt is None:
        read = " or ".join(f.title for f in output_formats.readers(READER))
        raise _refused(folder, f"it has no {read} shards (formats {previous.formats}); reuse "
                               "reads one of them")
    try:
        # every shard present, the file the run wrote (its size and SHA-256) and holding the
        # rows the manifest counts, counted now (TFRecord by its records' framing): a damaged
        # or swapped run is refused before any data is read, not halfway through the job
        checked = check_shards(es, fmt.name, count_all=True)
    except IncompleteInput as e:
        raise _refused(folder, f"its shards are incomplete or changed: {one_line(e)}") from e
    if fingerprint_only:
        from beam_embed.pipeline.common.finished_run.rows_agree import rows_agree

        m = base.model
        earlier = rows_agree(previous.model, es.poolings[0], previous.text_column,
                             checked.paths[0], fmt, m.kind, m.encoder, m.preprocessor
                             ) if checked.paths and m.kind else None
        if earlier is None:
            raise _other_settings(folder, diffs)
    if earlier:
        log(f"--reuse {folder}: {earlier}")
    if not checked.verified:
        log(f"--reuse {folder}: {unverified(es)}")
    return PreviousRun(
        folder=folder, shards=checked.paths, format=fmt.name,
        columns=tuple((p.column, p.width) for p in es.poolings),
        reused_from=ReuseEntry(output=folder, started_at=previous.started_at,
                               finished_at=previous.finished_at,
                               fingerprint=previous.model.fingerprint,
                               manifest_sha256=manifest_sha256[:16],  # of what was read
                               rows=previous.counts.embedded),
        checked=checked,
        stored=tuple(p.stored() for p in es.poolings) if previous.vector_dtype == "int8" else ())


def unread_previous(folder: str, columns: tuple[tuple[str, int], ...]) -> PreviousRun:
    """The previous run as a dry run describes it, without reading it (no shards)."""
    return PreviousRun(folder=folder, shards=(), format=output_formats.readers(READER)[0].name,
                       columns=columns, reused_from=ReuseEntry(output=folder))


class ReadPreviousRows(beam.DoFn):
    """A previous run's shard -> (text key, (vectors per column, num_tokens, truncated)), the
    vectors as stored (float32, bit for bit; an int8 run's, `stored`, as values its ranges
    encode to the stored codes), read by its format's reader."""

    def __init__(self, columns: tuple[tuple[str, int], ...], fmt: str,
                 stored: tuple[StoredVectors, ...] = ()):
        self._columns, self._stored = columns, stored
        self._read = output_formats.output_format(fmt).read_previous  # looked up on the launcher

    def process(self, path: str):
        rows = (self._read(path, self._columns, self._stored) if self._stored
                else self._read(path, self._columns))
        for text, vectors, tokens, truncated in rows:
            yield text_key(text), (vectors, tokens, truncated)
