"""How the run stores its sentence vectors (`--vector_dtype`), decided on the launcher.

int8 needs each dimension's range before the first shard is written. The launcher embeds a sample
of the input, the first records of each file, up to CALIBRATION_ROWS, cleaned and split as the
job does, with the model it has already loaded to learn the widths, and the ranges become
constants of the sinks and of the manifest. Computing them inside the pipeline instead (a
sample of the embeddings as a side input of the writers) would make every write wait for the
whole corpus to be embedded, and the runner hold all of its vectors meanwhile (in memory, on the
local runner); calibrating on each worker's first rows would give each shard its own ranges.
"""

from __future__ import annotations

import itertools

import numpy as np

from beam_embed.pipeline.common.records import Record
from beam_embed.pipeline.common.vector_dtypes import CALIBRATION_ROWS, StoredVectors, int8_ranges
from beam_embed.pipeline.job.cleaning import SentenceSplitter, clean_text
from beam_embed.pipeline.job.formats import detect_format
from beam_embed.pipeline.job.sources import read_file

BATCH = 64


def sample_texts(run, limit: int = CALIBRATION_ROWS) -> list[str]:
    """Up to `limit` texts as the job would embed them: the first records of each of the run's
    files, spread over up to `limit` files."""
    s = run.settings
    shown = run.files[:limit]
    per_file = -(-limit // max(len(shown), 1))
    splitter = SentenceSplitter() if s.split == "sentences" else None
    texts = []
    for path, _ in shown:
        fmt = s.input_format or detect_format(path)
        records = (r for r in read_file(path, fmt, run.fields()) if isinstance(r, Record))
        for record in itertools.islice(records, per_file):
            text = clean_text(record.text) if s.clean else record.text
            if not text.strip():
                continue
            record = Record(record.id, text, record.source, record.meta)
            texts += [r.text for r in (splitter(record) if splitter else [record])]
    return texts[:limit]


def vector_storage(run, calibrate: bool = True) -> tuple[StoredVectors, ...]:
    """Each pooling column's storage, in the run's widths' order. int8 is calibrated on a sample
    of the run's files (a ValueError when they hold no text to calibrate on); not `calibrate`
    (a dry run, which reads no data): int8 without its ranges, which only describes the job."""
    dtype = run.settings.vector_dtype
    if dtype != "int8" or not calibrate:
        return tuple(StoredVectors(dtype, width) for _, width in run.widths)
    texts = sample_texts(run)
    if not texts:
        raise ValueError("--vector_dtype int8 calibrates its ranges on the input's first "
                         "records, and the input holds no text to embed; expected at least one")
    embedder = run.encoder.build()  # loaded already, to learn the widths
    texts.sort(key=len)  # batches of alike lengths pack short
    parts = [embedder.embed(texts[i:i + BATCH]).vectors for i in range(0, len(texts), BATCH)]
    stored = []
    for column, width in run.widths:
        scale, offset = int8_ranges(np.concatenate([p[column] for p in parts]))
        stored.append(StoredVectors("int8", width, scale, offset))
    return tuple(stored)
