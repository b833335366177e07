"""How the run stores its sentence vectors (`--vector_dtype`), decided on the launcher.

int8 needs each dimension's range before the first shard is written. The launcher embeds a sample
of the input's distinct texts, cleaned and split as the job does, with the model it has already
loaded to learn the widths, and the ranges become constants of the sinks and of the manifest.
Computing them inside the pipeline instead (a sample of the embeddings as a side input of the
writers) would make every write wait for the whole corpus to be embedded, and the runner hold all
of its vectors meanwhile (in memory, on the local runner); calibrating on each worker's first
rows would give each shard its own ranges.

The sample represents the input, not its first records (1,000 copies of one sentence ahead of
the rest would fit the ranges to that sentence alone, 1,000 empty lines would leave nothing to
calibrate on): an input of up to WHOLE_BYTES in up to WHOLE_FILES files is read whole; a larger
one is read at WINDOWS places spread evenly over its bytes (a plain text or JSON-lines file from
that byte on, at the next line; a compressed, CSV, Parquet or TFRecord file, which cannot be
entered in the middle, from its start, as far as its windows reach together), each window ending
after WINDOW_TEXTS new distinct texts or WINDOW_RECORDS records. Of the distinct texts read, up
to CALIBRATION_ROWS are embedded, evenly spaced in the order read. When the sample is not every
distinct text of the input, a fifth of it is held out: decoded with the ranges of the rest, it
says how the unseen rows will fare, and a low fidelity is a warning.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from beam_embed.pipeline.common.rows.records import Record
from beam_embed.pipeline.common.rows.vector_dtypes import (
    CALIBRATION_ROWS,
    StoredVectors,
    int8_ranges,
)
from beam_embed.pipeline.job.cleaning import SentenceSplitter
from beam_embed.pipeline.job.decompress import READ_ERRORS, compression_of, open_input
from beam_embed.pipeline.job.formats import READERS, detect_format
from beam_embed.pipeline.job.sources import prepared, read_file, readable_before_the_run
from beam_embed.process.log import log

BATCH = 64
WHOLE_BYTES = 32 << 20  # an input this small, in at most WHOLE_FILES files, is read whole
WHOLE_FILES = 128  # (each file opened is a request on an object store)
WINDOWS = 32  # places a larger input is read at
WINDOW_RECORDS = 8192  # records a window reads at most (a run of duplicates or empty texts)
WINDOW_TEXTS = 2 * CALIBRATION_ROWS // WINDOWS  # distinct texts that end a window
ENTERED = ("text", "jsonl")  # formats read from any line on (uncompressed)
HELD_OUT = 5  # every 5th text of the sample is held out to measure the ranges on
HELD_OUT_LEAST = 100  # texts a sample needs for that measure (20 held out)
LOW_COSINE = 0.99  # a held-out median cosine to float32 below this is a warning


@dataclasses.dataclass(frozen=True)
class Sample:
    """The calibration texts; `whole`: they are every distinct text of the input."""

    texts: list[str]
    whole: bool = False


def sample_texts(run, limit: int = CALIBRATION_ROWS) -> Sample:
    """Up to `limit` distinct texts of the run's files as the job would embed them, spread over
    the input (see the module's notes)."""
    s = run.settings
    splitter = SentenceSplitter() if s.split == "sentences" else None
    if s.split == "chunks":  # the launcher has the model's tokenizer loaded by now
        from beam_embed.pipeline.job.chunking import Chunker, chunking

        splitter = Chunker(run.chunks or chunking(s, run.encoder))
    fields = run.fields()
    seen: dict[str, None] = {}
    whole = sum(size for _, size in run.files) <= WHOLE_BYTES and len(run.files) <= WHOLE_FILES
    for path, offsets in _plan(list(run.files), whole):
        fmt = s.input_format or detect_format(path)
        try:
            if not readable_before_the_run(path):
                whole = False
                continue
        except OSError:
            continue  # the run says why it cannot read it
        entered = fmt in ENTERED and compression_of(path) is None
        reads = ([(0, 0)] if whole else [(o, 1) for o in offsets] if entered
                 else [(0, len(offsets))])
        for offset, windows in reads:
            cut = _read(_records(path, fmt, fields, offset), seen, s.clean, splitter, windows)
            whole = whole and not cut
    texts = list(seen)
    if len(texts) > limit:
        whole = False
        texts = [texts[i] for i in np.linspace(0, len(texts) - 1, limit).round().astype(int)]
    return Sample(texts, whole)


def _plan(files: list[tuple[str, int]], whole: bool) -> list[tuple[str, list[int]]]:
    """(path, the byte offsets of its windows) for each file read: every file when the input
    is read whole, else the files that WINDOWS places evenly spaced over the bytes fall in."""
    if whole:
        return [(path, [0]) for path, _ in files]
    total = sum(size for _, size in files)
    plan: dict[str, list[int]] = {}
    start, i = 0, 0
    for w in range(WINDOWS):
        place = (w + 0.5) * total / WINDOWS
        while start + files[i][1] <= place:
            start += files[i][1]
            i += 1
        plan.setdefault(files[i][0], []).append(int(place - start))
    return list(plan.items())


def _records(path: str, fmt: str, fields, offset: int):
    """The records of a file from the line after byte `offset` on (the whole file from 0); a
    file that cannot be read ends them (the run says what broke)."""
    if not offset:
        yield from (r for r in read_file(path, fmt, fields) if isinstance(r, Record))
        return
    try:
        with open_input(path) as f:
            f.seek(offset)
            f.readline()  # the rest of the line the offset fell in
            yield from (r for r in READERS[fmt](path, f, fields) if isinstance(r, Record))
    except READ_ERRORS:
        return


def _read(records, seen: dict, clean: bool, splitter, windows: int) -> bool:
    """Adds the distinct texts of `records` to `seen`; with `windows`, stops after as many
    windows' records or new texts. Whether it stopped before the records' end."""
    most = (WINDOW_RECORDS * windows, len(seen) + WINDOW_TEXTS * windows) if windows else None
    for n, record in enumerate(records, start=1):
        for r in prepared(record, clean, splitter) or ():
            seen.setdefault(r.text)
        if most and (n >= most[0] or len(seen) >= most[1]):
            return True
    return False


def vector_storage(run, calibrate: bool = True, texts: list[str] | None = None,
                   replaced=None) -> tuple[StoredVectors, ...]:
    """Each pooling column's storage, in the run's widths' order. int8 is calibrated on `texts`
    (the Python API's sample), else on a sample of the run's files (a ValueError when they hold
    no text to calibrate on); not `calibrate` (a dry run, which reads no data): int8 without its
    ranges, which only describes the job. `replaced`: this run's manifest as far as it is known
    before the run (build.manifest_base), when it replaces a run in its output folder: that
    run's ranges are kept when it stored int8 vectors of the same model and poolings. A
    --reuse of an int8 run (checked: the same model and poolings) keeps that run's ranges
    before any other: the rows copied from it are its codes."""
    dtype = run.settings.vector_dtype
    if dtype != "int8" or not calibrate:
        return tuple(StoredVectors(dtype, width) for _, width in run.widths)
    if run.previous is not None and run.previous.int8:
        return reused_ranges(run)
    if replaced is not None and (kept := kept_ranges(run, replaced)) is not None:
        return kept
    began = time.monotonic()
    if texts is None:
        log("--vector_dtype int8: calibrating each dimension's range on a sample of the input "
            "(reading it, then embedding up to "
            f"{CALIBRATION_ROWS:,} of its distinct texts) before the run starts")
    sample = sample_texts(run) if texts is None else Sample(
        list(dict.fromkeys(texts))[:CALIBRATION_ROWS])
    if not sample.texts:
        raise ValueError("--vector_dtype int8 calibrates its ranges on a sample of the input's "
                         "texts, and the input holds no text to embed; expected at least one")
    embedder = run.encoder.build()  # loaded already, to learn the widths
    ordered = sorted(sample.texts, key=len)  # batches of alike lengths pack short
    parts = [embedder.embed(ordered[i:i + BATCH]).vectors for i in range(0, len(ordered), BATCH)]
    if texts is None:
        log(f"--vector_dtype int8: calibrated on {len(ordered):,} distinct texts in "
            f"{time.monotonic() - began:.1f}s")
    stored = []
    for column, width in run.widths:
        vectors = np.concatenate([p[column] for p in parts])
        scale, offset = int8_ranges(vectors)
        stored.append(StoredVectors("int8", width, scale, offset))
        if not sample.whole:
            _warn_if_unfit(column, vectors, of_input=texts is None)
    return tuple(stored)


def kept_ranges(run, base) -> tuple[StoredVectors, ...] | None:
    """The int8 ranges of the run in this run's output folder, which this one replaces, when
    it stored the same vectors (model and its settings, poolings: as --reuse compares them) as
    int8 with ranges for each; None otherwise (this run calibrates). Calibrating costs a sample
    of the input embedded (~30 s for MiniLM on 2 cores); a re-run of the same corpus with a few
    new documents gets the same ranges back, and its rows stay comparable with the old ones'."""
    from beam_embed.pipeline.common.run_folder.manifest.entries import model_differences
    from beam_embed.pipeline.common.run_folder.manifest.job import JobManifest
    from beam_embed.pipeline.job.reuse import vector_columns

    try:
        previous = JobManifest.read(run.output)
    except ValueError:  # none there, or not one this version reads
        return None
    if previous.vector_dtype != "int8" or previous.granularity != base.granularity or \
            model_differences(previous.model, base.model, "this run's") or \
            vector_columns(previous) != vector_columns(base):
        return None
    entries = {p.column: p for p in previous.poolings}
    if any(entries[c].scale is None or entries[c].offset is None for c, _ in run.widths):
        return None
    log(f"--vector_dtype int8: kept the ranges of the run this one replaces in {run.output} "
        f"(same model and poolings, calibrated for its run of {previous.started_at}); no "
        "calibration needed (another --output calibrates afresh on this input)")
    return tuple(StoredVectors("int8", width, tuple(entries[c].scale), tuple(entries[c].offset))
                 for c, width in run.widths)


def reused_ranges(run) -> tuple[StoredVectors, ...]:
    """The ranges of the int8 run --reuse copies from (its model and poolings are this run's,
    checked by reuse.previous_run), in this run's widths' order: its rows keep their codes,
    and new texts are coded on the same scale, without a calibration sample."""
    previous = run.previous
    by_column = dict(zip((c for c, _ in previous.columns), previous.stored))
    log(f"--vector_dtype int8: keeping the calibration of {previous.folder} (same model and "
        "poolings): its rows keep their int8 codes and new texts are coded on its ranges; no "
        "calibration needed")
    return tuple(by_column[c] for c, _ in run.widths)


def held_out_fidelity(vectors: np.ndarray) -> tuple[float, float]:
    """(median cosine to float32, share of values outside the ranges) of every HELD_OUT-th
    vector decoded with the int8 ranges of the others."""
    held = np.zeros(len(vectors), bool)
    held[HELD_OUT - 1::HELD_OUT] = True
    stored = StoredVectors("int8", vectors.shape[1], *int8_ranges(vectors[~held]))
    exact = vectors[held]
    decoded = stored.decode(stored.encode(exact))
    norms = np.linalg.norm(exact, axis=1) * np.linalg.norm(decoded, axis=1)
    cosines = np.sum(exact * decoded, axis=1) / np.maximum(norms, 1e-12)
    low, high = stored.decode(np.array([[-128], [127]], np.int8).repeat(stored.width, 1))
    outside = np.mean((exact < low) | (exact > high))
    return float(np.median(cosines)), float(outside)


def _warn_if_unfit(column: str, vectors: np.ndarray, of_input: bool) -> None:
    """A warning when the sample's held-out part decodes badly, or when a sample of the input
    (`of_input`, not the caller's own texts) is too small to measure: the rest of the input may
    vary more than the sample."""
    if len(vectors) < HELD_OUT_LEAST:
        if of_input:
            log(f"warning: --vector_dtype int8: the {column!r} ranges come from {len(vectors)} "
                "distinct texts, too few to check them against the rest of the input (it "
                "repeats texts where it was sampled); the vectors of other texts may be "
                "clipped: --vector_dtype float16 keeps them all")
        return
    cosine, outside = held_out_fidelity(vectors)
    if cosine < LOW_COSINE:
        log(f"warning: --vector_dtype int8: texts held out of the calibration sample decode "
            f"from the {column!r} ranges of the rest at median cosine {cosine:.3f} to float32 "
            f"({outside:.1%} of their values clipped); the input varies more than the sample "
            "shows: --vector_dtype float16 keeps every vector")
