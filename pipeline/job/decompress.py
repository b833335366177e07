"""Input files opened for the readers: compressed ones read to their end-of-stream marker or
reported as cut short, and the lines handed out counted.

Beam's CompressedFile stops quietly at the end of a truncated gzip stream (the part before the
cut is read, its last line cut in the middle) and fails with an IndexError on a truncated bzip2
stream. Python's gzip, bz2 and lzma readers raise EOFError when the data ends before the
end-of-stream marker, and their buffered readers hand out only whole lines before that, so
those read compressed inputs here; Beam's FileSystems still opens the raw bytes (local, gs://,
...). Other compressions Beam knows by extension (.deflate, .zst) are left to Beam.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import zlib

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

DECOMPRESSORS = {".gz": gzip.GzipFile, ".bz2": bz2.BZ2File, ".xz": lzma.LZMAFile,
                 ".lzma": lzma.LZMAFile}
# What a cut-short or corrupt file raises while it is read (gzip.BadGzipFile is an OSError).
READ_ERRORS = (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError)


def compression_of(path: str) -> str | None:
    return next((ext for ext in DECOMPRESSORS if path.lower().endswith(ext)), None)


class CountedLines(io.BufferedIOBase):
    """A readable binary stream that counts the newlines it has handed out: the number of whole
    lines a reader got before the stream broke."""

    def __init__(self, stream, also_close=()):
        super().__init__()
        self._stream = stream
        self._also_close = also_close  # the raw file under a decompressor (it leaves it open)
        self.lines = 0

    def _counted(self, data: bytes) -> bytes:
        self.lines += data.count(b"\n")
        return data

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        return self._counted(self._stream.read(-1 if size is None else size))

    def read1(self, size: int = -1) -> bytes:
        read1 = getattr(self._stream, "read1", self._stream.read)
        return self._counted(read1(size))

    def readline(self, size: int | None = -1) -> bytes:
        return self._counted(self._stream.readline(-1 if size is None else size))

    def seekable(self) -> bool:  # Parquet readers seek; a line count means nothing there
        return self._stream.seekable()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._stream.seek(offset, whence)

    def tell(self) -> int:
        return self._stream.tell()

    def close(self) -> None:
        if not self.closed:
            self._stream.close()
            for f in self._also_close:
                f.close()
        super().close()


def open_input(path: str) -> CountedLines:
    """`path` (any Beam filesystem) opened for reading, decompressed by its extension."""
    ext = compression_of(path)
    if ext is None:
        return CountedLines(FileSystems.open(path, compression_type=CompressionTypes.AUTO))
    raw = FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
    opener = DECOMPRESSORS[ext]
    return CountedLines(opener(fileobj=raw) if opener is gzip.GzipFile else opener(raw), (raw,))


def why_incomplete(error: BaseException) -> str:
    """What happened to a file that broke off, in words: "is cut short (...)", ..."""
    if isinstance(error, EOFError):
        return "is cut short (the compressed stream ends before its end-of-stream marker)"
    if isinstance(error, (zlib.error, lzma.LZMAError, gzip.BadGzipFile)) or \
            "Invalid data stream" in str(error):
        return f"is corrupt ({error})"
    if isinstance(error, OSError) and error.strerror:
        return f"cannot be read ({error.strerror})"
    return f"cannot be read ({type(error).__name__}: {error})"
