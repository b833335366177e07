"""--reuse PREVIOUS_OUTPUT: the previous run whose vectors a run may copy, checked before any
data is read, and its rows read back as (text key, stored vectors).

Rows are matched by their text as it was encoded (after the previous run's own cleaning and
splitting: the `text` column holds exactly what its encoder saw), so the previous run must have
written its text (`--include_text`, the default). The output schema gets no hash column: a
text's key is recomputed from the text on both sides. Everything else that decides a vector is
one value for the whole run, in the manifest: the model's fingerprint, its poolings (columns,
widths, normalization), max length, long-text policy and precision. Any difference is refused up
front (exit 2), so copied and newly encoded vectors never mix two settings.

Only a run that stored float32 vectors is copied from: its values are the encoder's output bit for
bit. float16, int8 and binary values are not (and int8 codes are calibrated per run), so copying
them would put rounded vectors beside exact ones. The new run may store any --vector_dtype: copied
rows go through the same writer as encoded ones and are converted alike.
"""

from __future__ import annotations

import dataclasses
import hashlib

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from beam_embed.pipeline.common.errors import IncompleteInput, one_line
from beam_embed.pipeline.common.manifest import MANIFEST, JobManifest, load_embedding_set
from beam_embed.pipeline.common.shards import check_shards

PARQUET, TFRECORD = "parquet", "tfrecord"
READ = (PARQUET, TFRECORD)  # the formats reuse reads, the first one a run wrote
# What decides a stored vector besides its text, per key of the manifest's `model`; the
# poolings (names, columns, widths, normalization) are compared whole.
MODEL_KEYS = {"fingerprint": "model (fingerprint)", "max_seq_length": "max length",
              "long_text": "long-text policy", "precision": "precision"}


def text_key(text: str) -> bytes:
    """A text's key for matching and grouping: 16 bytes of BLAKE2b over its UTF-8 (a collision
    needs ~2^64 distinct texts), so the shuffle carries short keys, not whole texts."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


@dataclasses.dataclass(frozen=True)
class PreviousRun:
    """A finished run whose rows may be copied: its checked Parquet shards and what the new
    manifest records about it (`reused_from`)."""
    folder: str
    shards: tuple[str, ...]
    format: str  # the shards' format: Parquet when the run wrote it, else TFRecord
    columns: tuple[tuple[str, int], ...]  # (vector column, width), in the run's order
    reused_from: dict


def _refused(folder: str, why: str) -> ValueError:
    return ValueError(f"--reuse {folder!r}: {why}; nothing is reused (drop --reuse to embed "
                      "every record)")


def _differences(previous: JobManifest, base: JobManifest) -> list[str]:
    diffs = [f"{what} {previous.model.get(key)!r}, this run's {base.model.get(key)!r}"
             for key, what in MODEL_KEYS.items()
             if previous.model.get(key) != base.model.get(key)]
    if previous.poolings != base.poolings:
        diffs.append(f"poolings {_poolings(previous)}, this run's {_poolings(base)}")
    return diffs


def _poolings(manifest: JobManifest) -> str:
    return ", ".join(f"{p['name']} ({p['width']}{', normalized' if p['normalize'] else ''})"
                     for p in manifest.poolings) or "none"


def _checked(es, fmt: str) -> tuple[str, ...]:
    """The shards, each present and holding the rows the manifest counts (an IncompleteInput
    naming the first that does not): Parquet by its footer, TFRecord by its records' framing,
    so a damaged run is refused before any data is read, not halfway through the job."""
    from beam_embed.pipeline.common.shards import expected_rows, tfrecord_rows

    shards = check_shards(es, fmt)
    if fmt == TFRECORD:
        total = 0
        for path in shards:
            n, expected = tfrecord_rows(path), expected_rows(es, path)
            if expected is not None and n != expected:
                raise IncompleteInput(f"{path} holds {n} records, but {es.manifest_path} "
                                      f"counts {expected}")
            total += n
        if total != es.counts.get("embedded", total):
            raise IncompleteInput(f"the TFRecord shards listed in {es.manifest_path} hold "
                                  f"{total} records, but it counts {es.counts['embedded']}")
    return shards


def previous_run(folder: str, base: JobManifest) -> PreviousRun:
    """The run in `folder`, checked against the new run's manifest `base` (made before the
    run: its model and poolings); a ValueError in one line naming what stands in the way."""
    folder = folder.rstrip("/")
    try:
        previous = JobManifest.read(folder)
    except ValueError as e:
        raise _refused(folder, str(e)) from e
    if previous.granularity != "sentence" or base.granularity != "sentence":
        raise _refused(folder, "reuse copies sentence vectors; token granularity has none "
                               "(the previous run's granularity is "
                               f"{previous.granularity!r})")
    diffs = _differences(previous, base)
    if diffs:
        raise _refused(folder, "it was embedded with other settings, and copied vectors must not "
                               "mix with new ones: " + "; ".join(diffs))
    if previous.vector_dtype != "float32":
        raise _refused(folder, f"it stored its vectors as {previous.vector_dtype} "
                               "(--vector_dtype), not the encoder's float32 values, and rounded "
                               "vectors must not mix with exact ones; reuse copies from a float32 "
                               "run")
    if not previous.text_column:
        raise _refused(folder, "it was written with --no-include_text, so its rows hold no "
                               "text to match against this run's texts")
    fmt = next((f for f in READ if previous.files.get(f)), None)
    if fmt is None:
        raise _refused(folder, f"it has no Parquet or TFRecord shards (formats "
                               f"{previous.formats}); reuse reads one of them")
    es = load_embedding_set(folder)
    try:
        shards = _checked(es, fmt)
    except IncompleteInput as e:
        raise _refused(folder, f"its shards are incomplete: {one_line(e)}") from e
    with FileSystems.open(FileSystems.join(folder, MANIFEST)) as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    return PreviousRun(
        folder=folder, shards=shards, format=fmt,
        columns=tuple((p.column, p.width) for p in es.poolings),
        reused_from={"output": folder, "started_at": previous.started_at,
                     "finished_at": previous.finished_at,
                     "fingerprint": previous.model.get("fingerprint"),
                     "manifest_sha256": digest,
                     "rows": int(previous.counts.get("embedded", 0))})


def unread_previous(folder: str, columns: tuple[tuple[str, int], ...]) -> PreviousRun:
    """The previous run as a dry run describes it, without reading it (no shards)."""
    return PreviousRun(folder=folder, shards=(), format=PARQUET, columns=columns,
                       reused_from={"output": folder})


class ReadPreviousRows(beam.DoFn):
    """A previous run's shard -> (text key, (vectors per column, num_tokens, truncated)), the
    vectors as stored (float32, bit for bit)."""

    def __init__(self, columns: tuple[tuple[str, int], ...], fmt: str = PARQUET):
        self._columns, self._format = columns, fmt

    def process(self, path: str):
        if self._format == TFRECORD:
            yield from self._tfrecord(path)
            return
        import pyarrow.parquet as pq

        from beam_embed.pipeline.common.vectors import vector_matrix

        names = [c for c, _ in self._columns]
        with FileSystems.open(path) as f:
            shard = pq.ParquetFile(f)
            for group in range(shard.num_row_groups):
                table = shard.read_row_group(group, ["text", *names, "num_tokens", "truncated"])
                vectors = [vector_matrix(table.column(c), w, c) for c, w in self._columns]
                tokens = table.column("num_tokens").to_pylist()
                truncated = table.column("truncated").to_pylist()
                for i, text in enumerate(table.column("text").to_pylist()):
                    yield text_key(text), (tuple(v[i].copy() for v in vectors), tokens[i],
                                           truncated[i])

    def _tfrecord(self, path: str):
        import numpy as np
        import tensorflow as tf

        from beam_embed.pipeline.common.shards import tfrecord_records

        for record in tfrecord_records(path):  # CRC-checked
            f = tf.train.Example.FromString(record).features.feature
            vectors = tuple(np.array(f[c].float_list.value, np.float32) for c, _ in self._columns)
            yield text_key(f["text"].bytes_list.value[0].decode("utf-8")), (
                vectors, int(f["num_tokens"].int64_list.value[0]),
                bool(f["truncated"].int64_list.value[0]))
