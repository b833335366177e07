"""Blocked top-k against numpy brute force; fetching rows; highlighting (no model needed)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from beam_embed.pipeline.common.output_formats import output_format
from beam_embed.pipeline.search.highlight import highlight, query_words
from beam_embed.pipeline.search.scan import resolve_hits, top_k, vector_blocks


def _brute(vectors: np.ndarray, queries: np.ndarray, k: int) -> list[list[tuple[float, int]]]:
    """Cosine in float64 for every row, sorted by score then row."""
    v = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    scores = v.astype(np.float64) @ q.T.astype(np.float64)
    return [sorted(((float(s[i]), i) for i in range(len(s))), key=lambda h: (-h[0], h[1]))[:k]
            for s in scores.T]


@pytest.mark.parametrize("block_rows", [1, 7, 64, 1000])
@pytest.mark.parametrize("k", [1, 5, 40])
def test_top_k_equals_brute_force_with_ties(block_rows, k):
    rng = np.random.default_rng(block_rows * 100 + k)
    vectors = rng.standard_normal((300, 12)).astype(np.float32) * rng.uniform(0.1, 9, (300, 1))
    vectors[50:60] = vectors[3]  # exact ties, across blocks: the earlier row wins
    vectors[70] = 0.0  # a zero vector scores 0
    queries = np.concatenate([vectors[3:4] * 2, rng.standard_normal((3, 12))]).astype(np.float32)
    blocks = (vectors[i:i + block_rows] for i in range(0, len(vectors), block_rows))
    best, rows = top_k(blocks, queries, k, normalized=False)
    want = _brute(vectors, queries, k)
    assert rows == 300
    for got, expected in zip(best, want):
        assert [r for _, r in got] == [r for _, r in expected]
        np.testing.assert_allclose([s for s, _ in got], [s for s, _ in expected], atol=1e-5)
    assert [r for _, r in best[0][:11]] == [3, *range(50, 60)][:min(k, 11)]


def test_parquet_blocks_and_fetch_across_shards_and_row_groups(tmp_path):
    parquet = output_format("parquet")
    rng = np.random.default_rng(0)
    paths, vectors, ids = [], [], []
    for s, sizes in enumerate([[5, 3], [0], [4, 4, 1]]):  # row groups per shard, one empty shard
        path = str(tmp_path / f"embeddings-{s}.parquet")
        schema = pa.schema([("id", pa.string()), ("text", pa.string()),
                            ("v", pa.list_(pa.float32(), 3))])
        with pq.ParquetWriter(path, schema) as w:
            for n in sizes:
                v = rng.standard_normal((n, 3)).astype(np.float32)
                names = [f"r{len(ids) + i}" for i in range(n)]
                w.write_table(pa.table({"id": names, "text": [f"text of {x}" for x in names],
                                        "v": pa.FixedSizeListArray.from_arrays(
                                            pa.array(v.reshape(-1)), 3)}, schema=schema))
                vectors.append(v)
                ids += names
        paths.append(path)
    vectors = np.concatenate(vectors)
    blocks = list(vector_blocks(parquet, paths, "v", 3, block_rows=2))
    np.testing.assert_array_equal(np.concatenate(blocks), vectors)
    assert max(len(b) for b in blocks) == 2
    queries = rng.standard_normal((2, 3)).astype(np.float32)
    best, _ = top_k(iter(blocks), queries, 17, normalized=False)
    hits = resolve_hits(parquet, paths, best, with_text=True)
    assert [[h.id for h in q] for q in hits] == [[ids[r] for _, r in b] for b in
                                                  _brute(vectors, queries, 17)]
    assert all(h.text == f"text of {h.id}" for h in hits[0])
    assert resolve_hits(parquet, paths, best, with_text=False)[1][0].text is None


def test_highlight_marks_shared_words_only():
    words = query_words("The CAT sat on a river-bank!")
    assert words == {"cat", "sat", "river", "bank"}  # common words are never marked
    text = "A cat, the Cat and cats sat by the bank."
    assert highlight(text, words, "markdown") == \
        "A **cat**, the **Cat** and cats **sat** by the **bank**."
    assert highlight(text, words, "bold").count("\033[1m") == 4
    assert highlight(text, words, "none") == text
    with pytest.raises(ValueError, match="unknown highlight style 'html'; expected one of"):
        highlight(text, words, "html")
