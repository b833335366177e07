"""Exact top-k cosine search over blocks of vectors, in bounded memory.

Records are numbered in scan order (shard after shard, as the manifest lists them). `top_k`
scores each block against every query at once ([rows, width] @ [width, queries]) and keeps, per
query, the k best (score, row) pairs; ties go to the earlier row, so the result is the exact,
deterministic brute-force top k. Blocks come from the shards (`vector_blocks`, vectors only, by
their format's column reader: beam_embed.pipeline.common.output_formats) or from a search index
(index.py); the format's `fetch_rows` then reads the ids and texts of the few rows that won
(Parquet: one row group at a time). Memory: one row group plus k hits per query.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator

import numpy as np

from beam_embed.models.pooling import l2_normalize
from beam_embed.pipeline.common.output_formats import OutputFormat
from beam_embed.pipeline.common.rows.vector_dtypes import StoredVectors, read_back
from beam_embed.pipeline.search.limits import DEFAULT_BLOCK_ROWS
from beam_embed.process.blas import blas_threads


@dataclasses.dataclass(frozen=True)
class Hit:
    score: float
    id: str
    text: str | None
    copies: int = 1  # rows with this text among the candidates (collapsed: the others folded)


def collapse(hits: list[Hit], k: int) -> tuple[list[Hit], bool]:
    """The first `k` hits of distinct texts, best first, each with how many of `hits` share
    its text (a corpus that repeats a paragraph filled the top k with its copies); and whether
    `hits` held k distinct texts (else the caller asks for more candidates)."""
    kept: dict[str, Hit] = {}
    for h in hits:
        if h.text in kept:
            kept[h.text] = dataclasses.replace(kept[h.text], copies=kept[h.text].copies + 1)
        elif len(kept) < k:
            kept[h.text] = h
    return list(kept.values()), len(kept) >= k


def vector_blocks(fmt: OutputFormat, shards: list[str], column: str, width: int,
                  block_rows: int = DEFAULT_BLOCK_ROWS,
                  stored: StoredVectors | None = None) -> Iterator[np.ndarray]:
    """[rows, width] float32 blocks of the vector column, shard after shard (local or gs://),
    read back from how it is `stored` (--vector_dtype; None: float32), a part of the column at
    a time as the format reads it (Parquet: a row group)."""
    for path in shards:
        for part in fmt.read_column(path, column):
            vectors = read_back(part, stored or StoredVectors("float32", width), column)
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


def resolve_hits(fmt: OutputFormat, shards: list[str], best: list[list[tuple[float, int]]],
                 with_text: bool) -> list[list[Hit]]:
    """top_k's (score, row) pairs as Hits with ids and texts, read by the format's fetch_rows."""
    columns = ["id"] + (["text"] if with_text else [])
    rows = fmt.fetch_rows(shards, {row for hits in best for _, row in hits}, columns)
    return [[Hit(score, rows[row][0], rows[row][1] if with_text else None)
             for score, row in hits] for hits in best]
