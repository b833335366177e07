"""Is an index worth it for `beam-embed search`? Times the Parquet scan, the project's flat
search index and faiss on the same vectors.

    .venv/bin/python benchmarks/search_index.py [--rows 100000,1000000] [--queries 1,10]
    OTHER_VENV/bin/python benchmarks/search_index.py --methods faiss   (numpy, pyarrow, faiss-cpu)

For each N it writes an embedding-job-like folder (random unit vectors, ~100-character texts,
shards of 250,000 rows, row groups of 20,000) into a temporary folder, then times each batch of
queries (best of two runs; the page cache is warm, as it is for repeated searches):

    scan              `search`: top_k over the Parquet shards + fetching the hits' ids/texts
    index-build       `search --index`, first time: the scan, also writing the .npy index
    index             `search --index` later: top_k over the memory-mapped .npy + the fetch
    faiss-flat        faiss IndexFlatIP (exact) on vectors already in memory
    faiss-hnsw-build  building faiss IndexHNSWFlat (M=32) on them
    faiss-hnsw        searching it (approximate: recall@10 against the exact top 10; random
                      vectors are a worst case for graph indexes, real embeddings do better)

Model loading and query embedding (seconds, per command) are not included. Prints a table, then
one JSON line per measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ROWS_PER_SHARD, ROW_GROUP, K = 250_000, 20_000, 10


def write_corpus(folder: str, rows: int, width: int, seed: int = 0) -> list[str]:
    """Shards of random unit vectors with ids and texts; returns their paths."""
    rng = np.random.default_rng(seed)
    paths = []
    for first in range(0, rows, ROWS_PER_SHARD):
        path = os.path.join(folder, f"embeddings-{len(paths):05d}.parquet")
        with pq.ParquetWriter(path, pa.schema([("id", pa.string()), ("text", pa.string()),
                                               ("mean", pa.list_(pa.float32(), width))])) as w:
            for start in range(first, min(rows, first + ROWS_PER_SHARD), ROW_GROUP):
                n = min(ROW_GROUP, rows - start, first + ROWS_PER_SHARD - start)
                v = rng.standard_normal((n, width), np.float32)
                v /= np.linalg.norm(v, axis=1, keepdims=True)
                w.write_table(pa.table({
                    "id": [f"doc-{i:09d}" for i in range(start, start + n)],
                    "text": [f"record {i} " + "lorem ipsum dolor " * 5
                             for i in range(start, start + n)],
                    "mean": pa.FixedSizeListArray.from_arrays(pa.array(v.reshape(-1)), width)}))
        paths.append(path)
    return paths


def read_vectors(paths: list[str], width: int) -> np.ndarray:
    return np.concatenate([pq.read_table(p, columns=["mean"])["mean"].combine_chunks()
                           .flatten().to_numpy().reshape(-1, width) for p in paths])


def timed(fn, repeat: int = 2) -> tuple[float, object]:
    """Best wall time of `repeat` runs (the first warms the page cache), and the last result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        began = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - began)
    return best, out


def project_methods(folder: str, paths: list[str], width: int, queries: np.ndarray) -> dict:
    """`beam-embed search` itself: the Parquet scan, the first --index search (scan + build) and
    later --index searches, each including the id/text fetch of the hits."""
    from beam_embed.pipeline.common.finished_run.embedding_set import PoolingColumn
    from beam_embed.pipeline.common.output_formats import output_format
    from beam_embed.pipeline.common.run_folder.manifest.entries import ModelEntry
    from beam_embed.pipeline.search.corpus import Corpus
    from beam_embed.pipeline.search.index import building, index_blocks, open_index
    from beam_embed.pipeline.search.scan import resolve_hits, top_k, vector_blocks

    parquet = output_format("parquet")
    corpus = Corpus(folder, ModelEntry(fingerprint="bench"),
                    PoolingColumn("mean", "mean", width, True), paths, True, "bench", parquet)

    def search(blocks):
        return resolve_hits(parquet, paths, top_k(blocks, queries, K, True)[0], True)

    return {
        "scan": timed(lambda: search(vector_blocks(parquet, paths, "mean", width))),
        "index-build": timed(lambda: search(building(corpus, 16_384)), repeat=1),
        "index": timed(lambda: search(index_blocks(open_index(corpus), 16_384))),
    }


def faiss_methods(paths: list[str], width: int, queries: np.ndarray) -> dict:
    """faiss on vectors already in memory: exact IndexFlatIP and approximate HNSW (M=32)."""
    import faiss

    vectors = read_vectors(paths, width)
    exact = np.argsort(-(vectors @ queries.T), axis=0, kind="stable")[:K].T
    flat = faiss.IndexFlatIP(width)
    flat.add(vectors)
    began = time.perf_counter()
    hnsw = faiss.IndexHNSWFlat(width, 32, faiss.METRIC_INNER_PRODUCT)
    hnsw.add(vectors)
    build = time.perf_counter() - began
    t, (_, found) = timed(lambda: hnsw.search(queries, K))
    recall = float(np.mean([len(set(a) & set(b)) / K for a, b in zip(found, exact)]))
    return {"faiss-flat": timed(lambda: flat.search(queries, K)),
            "faiss-hnsw-build": (build, None),
            "faiss-hnsw": (t, {"recall_at_10": round(recall, 3)})}


def measure(rows: int, width: int, nq: int, folder: str, paths: list[str],
            methods: list[str]) -> list[dict]:
    queries = np.random.default_rng(1).standard_normal((nq, width), np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    timings = {}
    if "search" in methods:
        timings.update(project_methods(folder, paths, width, queries))
    if "faiss" in methods:
        timings.update(faiss_methods(paths, width, queries))
    return [{"rows": rows, "queries": nq, "method": m, "seconds": round(t, 4),
             **(extra if isinstance(extra, dict) else {})} for m, (t, extra) in timings.items()]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", default="100000,1000000")
    p.add_argument("--width", type=int, default=384)
    p.add_argument("--queries", default="1,10")
    p.add_argument("--methods", default="search",
                   help="search (the project's scan and index; project venv), "
                        "faiss (needs faiss-cpu)")
    args = p.parse_args()
    methods = args.methods.split(",")
    results = []
    print(f"{'rows':>9}  {'queries':>7}  {'method':<16}  {'seconds':>8}  {'rows/s':>12}",
          flush=True)
    for rows in map(int, args.rows.split(",")):
        with tempfile.TemporaryDirectory(prefix="search-bench-") as folder:
            paths = write_corpus(folder, rows, args.width)
            for nq in map(int, args.queries.split(",")):
                for r in measure(rows, args.width, nq, folder, paths, methods):
                    print(f"{r['rows']:>9}  {r['queries']:>7}  {r['method']:<16}  "
                          f"{r['seconds']:>8.3f}  {r['rows'] / max(r['seconds'], 1e-9):>12,.0f}",
                          flush=True)
                    results.append(r)
    for r in results:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
