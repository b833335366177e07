"""Exact top-k cosine search over blocks of vectors, in bounded memory.

Records are numbered in scan order (shard after shard, as the manifest lists them). `top_k`
scores each block against every query at once ([rows, width] @ [width, queries]) and keeps, per
query, the k best (score, row) pairs; ties go to the earlier row, so the result is the exact,
deterministic brute-force top k. Blocks come from the Parquet shards (`parquet_blocks`, vectors
only) or from a search index (index.py); `fetch` then reads the ids and texts of the few
rows that won, one row group at a time. Memory: one row group plus k hits per query.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from beam_embed.models.pooling import l2_normalize
from beam_embed.pipeline.common.vector_dtypes import StoredVectors, read_back
from beam_embed.pipeline.search.limits import DEFAULT_BLOCK_ROWS
from beam_embed.process.blas import blas_threads


@dataclasses.dataclass(frozen=True)
class Hit:
    score: float
    id: str
    text: str | None


def parquet_blocks(shards: list[str], column: str, width: int,
                   block_rows: int = DEFAULT_BLOCK_ROWS,
                   stored: StoredVectors | None = None) -> Iterator[np.ndarray]:
    """[rows, width] float32 blocks of the vector column, shard after shard (local or gs://),
    read back from how it is `stored` (--vector_dtype; None: float32).
    Read one row group at a time (the job's writer keeps them near 64 MB): pyarrow's
    iter_batches was measured holding a whole 250,000-row shard's column instead."""
    for path in shards:
        with FileSystems.open(path) as f:
            parquet = pq.ParquetFile(f)
            for group in range(parquet.num_row_groups):
                table = parquet.read_row_group(group, columns=[column])
                vectors = read_back(table.column(0), stored or StoredVectors("float32", width),
                                    column)
                for start in range(0, len(vectors), block_rows):
                    yield vectors[start:start + block_rows]


# Candidates are picked with float32 BLAS scores, then ranked by scores recomputed in float64
# row by row. BLAS sums a row's products in an order that depends on where the row falls in its
# block (seen on AVX2: two identical vectors in different blocks scored one ulp apart), so equal
# vectors could rank out of row order; the float64 recomputation scores every row the same way.
# Rows within this margin of the running k-th score stay candidates (float32's error on a
# cosine is ~1e-7).
CANDIDATE_MARGIN = 1e-4


def _exact_scores(rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Cosine of each row with the unit float64 `query`, computed identically for every row
    (einsum's own loops, not BLAS)."""
    rows = rows.astype(np.float64)
    norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
    return np.einsum("ij,j->i", rows, query) / np.maximum(norms, 1e-12)


def top_k(blocks: Iterable[np.ndarray], queries: np.ndarray, k: int,
          normalized: bool) -> tuple[list[list[tuple[float, int]]], int]:
    """(per query, the k best (score, row) pairs best first; rows scanned). Scores are cosine
    similarities; `normalized`: the blocks are unit vectors already (a dot product suffices
    to find the candidates).

    BLAS runs on one thread here: OpenBLAS's idle threads spin, and took the cores from Arrow's
    Parquet decoding threads (measured: the scan ran at half speed on two cores)."""
    q = l2_normalize(np.asarray(queries, np.float32)).T
    q64 = np.asarray(queries, np.float64)
    q64 = (q64 / np.maximum(np.linalg.norm(q64, axis=1, keepdims=True), 1e-12)).T
    best: list[list[tuple[float, int]]] = [[] for _ in range(q.shape[1])]
    start = 0
    with blas_threads(1):
        for block in blocks:
            scores = (block if normalized else l2_normalize(block)) @ q  # [rows, queries]
            for j, s in enumerate(scores.T):
                take = min(k, len(s))
                floor = np.partition(s, len(s) - take)[len(s) - take]
                if len(best[j]) == k:  # only rows that can still displace the current k-th
                    floor = max(floor, best[j][-1][0])
                picked = np.flatnonzero(s >= floor - CANDIDATE_MARGIN)
                exact = _exact_scores(block[picked], q64[:, j])
                new = [(float(e), start + int(i)) for e, i in zip(exact, picked)]
                best[j] = sorted(best[j] + new, key=lambda hit: (-hit[0], hit[1]))[:k]
            start += len(block)
    return best, start


def fetch(shards: list[str], rows: set[int], with_text: bool) -> dict[int, tuple[str, str | None]]:
    """row -> (id, text) for the given scan-order rows, reading only their row groups."""
    columns = ["id"] + (["text"] if with_text else [])
    found, first = {}, 0
    for path in shards:
        with FileSystems.open(path) as f:
            parquet = pq.ParquetFile(f)
            meta = parquet.metadata
            wanted = sorted(r - first for r in rows if first <= r < first + meta.num_rows)
            if wanted:
                ends = np.cumsum([meta.row_group(g).num_rows for g in range(meta.num_row_groups)])
                for group in sorted({bisect.bisect_right(ends, r) for r in wanted}):
                    table = parquet.read_row_group(group, columns=columns)
                    base = int(ends[group]) - table.num_rows
                    for r in (r for r in wanted if base <= r < base + table.num_rows):
                        values = [table[c][r - base].as_py() for c in columns]
                        found[first + r] = (values[0], values[1] if with_text else None)
            first += meta.num_rows
    return found


def resolve_hits(shards: list[str], best: list[list[tuple[float, int]]],
                 with_text: bool) -> list[list[Hit]]:
    """top_k's (score, row) pairs as Hits with ids and texts."""
    rows = fetch(shards, {row for hits in best for _, row in hits}, with_text)
    return [[Hit(score, *rows[row]) for score, row in hits] for hits in best]
