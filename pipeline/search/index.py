"""The search index: one pooling column's vectors, unit length, as one contiguous float32 .npy.

`beam-embed search --index` builds it during its first scan (the shards' blocks are written out
as they are scored) at OUTPUT/search-index/COLUMN.npy, with COLUMN.json holding the manifest facts
it was built from; later searches memory-map it while those facts still match (same run, model
and shards), else rebuild it. It is exact, like the scan: a flat copy, no approximation.
Reading it skips Parquet's list decoding, the scan's main cost (benchmarks/search_index.py).
Local output folders only (it is memory-mapped).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator

import numpy as np

from beam_embed.models.hub_loader import is_remote
from beam_embed.models.pooling import l2_normalize
from beam_embed.pipeline.search.scan import vector_blocks

INDEX_DIR = "search-index"


def check_local(folder: str) -> None:
    if is_remote(folder):
        raise ValueError(f"--index needs a local output folder; {folder!r} is remote "
                         "(copy it locally, or search without --index)")


def _paths(corpus) -> tuple[str, str]:
    base = os.path.join(corpus.folder, INDEX_DIR, corpus.pooling.column)
    return base + ".npy", base + ".json"


def stamp(corpus) -> dict:
    """What the index must have been built from to be reused."""
    return {"column": corpus.pooling.column, "finished_at": corpus.finished_at,
            "fingerprint": corpus.model.fingerprint,
            "shards": [os.path.basename(s) for s in corpus.shards],
            "manifest_sha256": corpus.manifest_sha256}


def open_index(corpus) -> np.ndarray | None:
    """The index as a read-only memory map, or None when missing, built from another run, or
    unreadable (then it is rebuilt, never used)."""
    vectors, meta = _paths(corpus)
    if not (os.path.exists(vectors) and os.path.exists(meta)):
        return None
    try:
        with open(meta, encoding="utf-8") as f:
            if json.load(f) != stamp(corpus):
                return None
        index = np.load(vectors, mmap_mode="r")
    except (OSError, ValueError):  # ValueError: JSON or .npy header that does not parse
        return None
    if index.ndim != 2 or index.shape[1] != corpus.pooling.width or index.dtype != np.float32:
        return None
    return index


def index_blocks(index: np.ndarray, block_rows: int) -> Iterator[np.ndarray]:
    for start in range(0, len(index), block_rows):
        yield np.asarray(index[start:start + block_rows])


def _remove_stale_partials(final: str) -> None:
    """Partial files of `final` that searches killed while building left behind (their process
    is gone)."""
    folder, name = os.path.split(final)
    for entry in os.listdir(folder):
        if not entry.startswith(f"{name}.partial-"):
            continue
        pid = entry[len(name) + len(".partial-"):].split(".", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            with contextlib.suppress(OSError):
                os.remove(os.path.join(folder, entry))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def building(corpus, block_rows: int) -> Iterator[np.ndarray]:
    """Unit-length Parquet blocks, each also written to a new index. The index and its stamp
    are written under temporary names and take their final names only once every block was
    written, the old stamp removed before the new index takes its name: a search stopped at
    any point leaves the previous index with its own stamp, an index without a stamp (which
    is rebuilt), or the complete new one with its stamp; never a partial index that a later
    search would use, and no temporary file (those of killed searches go on the next build)."""
    vectors, meta = _paths(corpus)
    os.makedirs(os.path.dirname(vectors), exist_ok=True)
    for path in (vectors, meta):
        _remove_stale_partials(path)
    rows = sum(corpus.format.count_rows(s) for s in corpus.shards)
    partial = f"{vectors}.partial-{os.getpid()}.npy"
    partial_meta = f"{meta}.partial-{os.getpid()}.json"
    try:
        out = np.lib.format.open_memmap(partial, mode="w+", dtype=np.float32,
                                        shape=(rows, corpus.pooling.width))
        start = 0
        for block in vector_blocks(corpus.format, corpus.shards, corpus.pooling.column,
                                   corpus.pooling.width, block_rows, corpus.pooling.stored()):
            block = l2_normalize(block)
            out[start:start + len(block)] = block
            start += len(block)
            yield block
        out.flush()
        del out
        with open(partial_meta, "w", encoding="utf-8") as f:
            json.dump(stamp(corpus), f, indent=2)
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileNotFoundError):
            os.remove(meta)  # the old stamp never describes the new vectors
        os.replace(partial, vectors)
        os.replace(partial_meta, meta)
    finally:  # stopped early, failed, or done: no partial file stays behind
        for path in (partial, partial_meta):
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
