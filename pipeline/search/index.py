"""The search index: one pooling column's vectors, unit length, as one contiguous float32 .npy.

`beam-embed search --index` builds it during its first scan (the Parquet blocks are written out
as they are scored) at OUTPUT/search-index/COLUMN.npy, with COLUMN.json holding the manifest facts
it was built from; later searches memory-map it while those facts still match (same run, model
and shards), else rebuild it. It is exact, like the scan: a flat copy, no approximation.
Reading it skips Parquet's list decoding, the scan's main cost (benchmarks/search_index.py).
Local output folders only (it is memory-mapped).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import numpy as np
import pyarrow.parquet as pq

from models.hub_loader import is_remote
from models.pooling import l2_normalize
from pipeline.search.scan import parquet_blocks

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
            "fingerprint": corpus.model["fingerprint"],
            "shards": [os.path.basename(s) for s in corpus.shards]}


def open_index(corpus) -> np.ndarray | None:
    """The index as a read-only memory map, or None when missing or built from another run."""
    vectors, meta = _paths(corpus)
    if not (os.path.exists(vectors) and os.path.exists(meta)):
        return None
    with open(meta, encoding="utf-8") as f:
        if json.load(f) != stamp(corpus):
            return None
    return np.load(vectors, mmap_mode="r")


def index_blocks(index: np.ndarray, block_rows: int) -> Iterator[np.ndarray]:
    for start in range(0, len(index), block_rows):
        yield np.asarray(index[start:start + block_rows])


def building(corpus, block_rows: int) -> Iterator[np.ndarray]:
    """Unit-length Parquet blocks, each also written to a new index; the index (and its stamp)
    take their final names only once every block was written."""
    vectors, meta = _paths(corpus)
    os.makedirs(os.path.dirname(vectors), exist_ok=True)
    rows = sum(pq.ParquetFile(s).metadata.num_rows for s in corpus.shards)
    partial = f"{vectors}.partial-{os.getpid()}.npy"
    out = np.lib.format.open_memmap(partial, mode="w+", dtype=np.float32,
                                    shape=(rows, corpus.pooling.width))
    start = 0
    for block in parquet_blocks(corpus.shards, corpus.pooling.column, corpus.pooling.width,
                                block_rows):
        block = l2_normalize(block)
        out[start:start + len(block)] = block
        start += len(block)
        yield block
    out.flush()
    del out
    os.replace(partial, vectors)
    with open(meta, "w", encoding="utf-8") as f:
        json.dump(stamp(corpus), f, indent=2)
