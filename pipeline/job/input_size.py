"""How many records the encoder will get, estimated on the launcher: the denominator of the
progress lines' percentage.

Counting records would mean reading the input, so the first SAMPLED_FILES files of each kind
(format and compression) are sampled: a Parquet file's footer gives its rows; another file's
first PREFIX_BYTES on disk are decompressed and parsed as the job reads them (cleaned, empty
texts left out, split into sentences with --split), which gives records per byte on disk.
The other files, and the rest of the sampled ones, are estimated by their size at that rate; a
file read whole is counted exactly. Text bytes against file bytes, the measure before this, ran
behind twice over: markup (JSON keys, ids, metadata) is input but not text, and batches are
sorted by length, so the longest texts of each window come last.
"""

from __future__ import annotations

import bz2
import io
import lzma
import os
import stat
import struct
import zlib

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_embed.pipeline.common.rows.records import Record
from beam_embed.pipeline.job.cleaning import SentenceSplitter, clean_text
from beam_embed.pipeline.job.decompress import READ_ERRORS, CountedLines, compression_of
from beam_embed.pipeline.job.formats import LINE_FORMATS, READERS, Fields, detect_format

SAMPLED_FILES = 8
PREFIX_BYTES = 256 << 10
SPLIT_SAMPLE = 200  # records whose sentences are counted, with --split sentences
DECOMPRESSORS = {".gz": lambda: zlib.decompressobj(zlib.MAX_WBITS | 16),
                 ".bz2": bz2.BZ2Decompressor, ".xz": lzma.LZMADecompressor,
                 ".lzma": lzma.LZMADecompressor}


def expected_records(settings, fields: Fields, files, chunks=None) -> float:
    """The records the encoder will get from `files` ((path, size) each), read with `settings`
    (a RunSettings: the input format, cleaning and splitting; `chunks`, --split chunks'
    beam_embed.pipeline.job.chunking.Chunking) and `fields`, estimated; 0 when some kind of
    file could not be sampled (no percentage then, rather than a wrong one)."""
    kinds: dict[tuple[str, str | None], list[tuple[str, int]]] = {}
    for path, size in files:
        fmt = settings.input_format or detect_format(path)
        kinds.setdefault((fmt, compression_of(path)), []).append((path, size))
    total = 0.0
    for (fmt, _), group in kinds.items():
        sampled = [(size, _count(path, size, fmt, settings, fields, chunks))
                   for path, size in group[:SAMPLED_FILES]]
        counted = [(size, c) for size, c in sampled if c is not None]
        covered = sum(c[1] for _, c in counted)
        if not covered:
            return 0.0
        rate = sum(c[0] for _, c in counted) / covered
        total += sum(c[0] + rate * (size - c[1]) for size, c in counted)
        total += rate * sum(size for size, c in sampled if c is None)
        total += rate * sum(size for _, size in group[SAMPLED_FILES:])
    return total


def _count(path: str, size: int, fmt: str, settings, fields: Fields,
           chunks=None) -> tuple[float, int] | None:
    """(records, bytes on disk they came from) for the start of one file, or None."""
    try:
        if FileSystems.get_scheme(path) is None and not stat.S_ISREG(os.stat(path).st_mode):
            return None  # a named pipe: what is read here would be lost to the run
        if fmt == "parquet":
            import pyarrow.parquet as pq

            with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
                return float(pq.ParquetFile(f).metadata.num_rows), size
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            raw = f.read(PREFIX_BYTES)
    except READ_ERRORS:
        return None
    whole = len(raw) >= size
    data = _decompressed(raw, compression_of(path))
    if data is None:
        return None
    if fmt == "tfrecord":
        return float(_framed_records(data)), len(raw)
    if fmt not in LINE_FORMATS:
        return None
    if not whole:  # the last line may be cut by the prefix
        data = data[:data.rfind(b"\n") + 1]
    texts = [r.text for r in READERS[fmt](path, CountedLines(io.BytesIO(data)), fields)
             if isinstance(r, Record)]
    texts = [t for t in (clean_text(t) if settings.clean else t for t in texts) if t.strip()]
    return len(texts) * _sentences_per_text(texts, settings.split, chunks), len(raw)


def _decompressed(raw: bytes, compression: str | None) -> bytes | None:
    """`raw` (the start of a file) decompressed as far as it goes; None when it is corrupt."""
    if compression is None:
        return raw
    out = []
    try:
        while raw:  # a file may hold several compressed streams one after the other
            stream = DECOMPRESSORS[compression]()
            out.append(stream.decompress(raw))
            raw = stream.unused_data if stream.eof else b""
    except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError):
        return None
    return b"".join(out)


def _framed_records(data: bytes) -> int:
    """The whole TFRecord records (8-byte length, 4-byte CRC, data, 4-byte CRC) in `data`."""
    n = pos = 0
    while pos + 12 <= len(data):
        pos += 16 + struct.unpack_from("<Q", data, pos)[0]
        if pos > len(data):
            break
        n += 1
    return n


def _sentences_per_text(texts: list[str], split: str, chunks=None) -> float:
    """The records a text becomes: its sentences, or its chunks (the model's tokenizer is
    loaded on the launcher by now), on average over a sample."""
    if split not in ("sentences", "chunks") or not texts:
        return 1.0
    if split == "chunks":
        from beam_embed.pipeline.job.chunking import Chunker

        splitter = Chunker(chunks)
    else:
        splitter = SentenceSplitter()
    sample = texts[:SPLIT_SAMPLE]
    return sum(sum(1 for _ in splitter(Record(str(i), t, ""))) for i, t in enumerate(sample)) \
        / len(sample)
