"""What `--vector_dtype` costs in quality and saves on disk, every dtype in one run.

    .venv/bin/python benchmarks/vector_dtypes.py [--pairs FILE] [--model minilm]

Embeds the held-out STS-B sentences (../shared/data/stsb/sts-dev.tsv when present, else the
bundled sample pairs) with `beam-embed run` once per dtype (float32 first: the baseline), each
run calibrating int8 on its own input's first records as any run does, then reads every run back
with the readers the commands use (manifest -> beam_embed.pipeline.common.rows.vector_dtypes) and
prints, per dtype: STS Spearman of the pairs' cosines against the gold scores and its difference
from float32's; search recall@10 against float32's top 10 (queries: every sentence as float32, the
way `search` embeds a query; corpus: all sentences as stored; the query's own sentence left out
of both lists), scored with `search`'s own exact scan; binary also with Hamming distance (binary
queries); bytes on disk of the Parquet and TFRecord shards and of the vector column alone.
Checks the issue's bars (float16: |dSpearman| <= 0.001 and recall >= 0.99; int8: 0.005 and
0.97) and writes the table's JSON to benchmarks/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from beam_embed.pipeline.common.finished_run.embedding_set import load_embedding_set  # noqa: E402
from beam_embed.pipeline.common.output_formats import output_format  # noqa: E402
from beam_embed.pipeline.common.rows.vector_dtype_names import VECTOR_DTYPES  # noqa: E402
from beam_embed.pipeline.evaluate.data import read_pairs  # noqa: E402
from beam_embed.pipeline.evaluate.metrics import cosine, spearman  # noqa: E402
from beam_embed.pipeline.search.scan import top_k, vector_blocks  # noqa: E402

STSB = os.path.normpath(os.path.join(REPO, "..", "shared", "data", "stsb", "sts-dev.tsv"))
BARS = {"float16": (0.001, 0.99), "int8": (0.005, 0.97)}  # (|dSpearman| at most, recall at least)
K = 10


def corpus_of(pairs, path: str) -> list[str]:
    """The pairs' distinct sentences, in order of first appearance, as a JSON-lines corpus."""
    sentences = list(dict.fromkeys(s for pair in zip(pairs.first, pairs.second) for s in pair))
    with open(path, "w", encoding="utf-8") as f:
        for i, s in enumerate(sentences):
            f.write(json.dumps({"id": f"s{i:05d}", "text": s}) + "\n")
    return sentences


def embed(corpus: str, output: str, model: str, dtype: str) -> float:
    began = time.monotonic()
    subprocess.run([sys.executable, "-m", "beam_embed.pipeline.run", "--input", corpus, "--id_field", "id",
                    "--model", model, "--output", output, "--vector_dtype", dtype,
                    "--format", "parquet,tfrecord", "--progress_every", "0"],
                   check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": REPO})
    return time.monotonic() - began


def read_run(folder: str) -> tuple[list[str], np.ndarray, object, dict]:
    """(ids, float32 vectors as the commands read them back, the pooling, bytes on disk)."""
    import pyarrow.parquet as pq

    es = load_embedding_set(folder)
    p = es.pooling(None)
    shards = list(es.files["parquet"])
    ids = [i for s in shards for i in pq.read_table(s, columns=["id"]).column(0).to_pylist()]
    vectors = np.concatenate(list(vector_blocks(output_format("parquet"), shards, p.column,
                                                p.width, stored=p.stored())))
    column = 0
    for s in shards:
        meta = pq.ParquetFile(s).metadata
        column += sum(meta.row_group(g).column(c).total_compressed_size
                      for g in range(meta.num_row_groups) for c in range(meta.num_columns)
                      if meta.row_group(g).column(c).path_in_schema.split(".")[0] == p.column)
    sizes = {fmt: sum(os.path.getsize(f) for f in es.files[fmt]) for fmt in ("parquet",
                                                                                "tfrecord")}
    return ids, vectors, p, {**sizes, "vector_column": column}


def recall(found: list[list[int]], truth: list[list[int]]) -> float:
    return float(np.mean([len(set(f) & set(t)) / K for f, t in zip(found, truth)]))


def neighbours(best, rows: int) -> list[list[int]]:
    """top_k's hits (k + 1) without each query's own row, K kept."""
    return [[r for _, r in hits if r != q][:K] for q, hits in zip(range(rows), best)]


def hamming_neighbours(bits: np.ndarray) -> list[list[int]]:
    """Top K by Hamming distance between packed sign bits (ties: the earlier row), self left out."""
    signs = np.unpackbits(bits, axis=1).astype(np.float32) * 2 - 1  # exact in float32
    agree = signs @ signs.T  # width - 2 * Hamming distance
    np.fill_diagonal(agree, -np.inf)
    return [list(np.argsort(-row, kind="stable")[:K]) for row in agree]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", help="STS pairs (default: sts-dev.tsv, else the sample)")
    parser.add_argument("--model", default="minilm")
    args = parser.parse_args()
    if args.pairs is None:
        from beam_embed.pipeline.evaluate.sample_pairs import write_sample_pairs

        args.pairs = STSB if os.path.exists(STSB) else write_sample_pairs()
    pairs = read_pairs(args.pairs)
    work = tempfile.mkdtemp(prefix="vector-dtypes-")
    sentences = corpus_of(pairs, os.path.join(work, "corpus.jsonl"))
    print(f"{len(pairs)} pairs, {len(sentences)} sentences from {args.pairs}; model {args.model}",
          flush=True)
    rows, baseline = [], None
    for dtype in VECTOR_DTYPES:  # float32 first
        folder = os.path.join(work, dtype)
        seconds = embed(os.path.join(work, "corpus.jsonl"), folder, args.model, dtype)
        ids, vectors, pooling, sizes = read_run(folder)
        by_text = dict(zip(sentences, range(len(sentences))))
        where = {rid: i for i, rid in enumerate(ids)}
        index = np.array([where[f"s{by_text[s]:05d}"] for s in sentences])
        vectors = vectors[index]  # corpus order
        first = vectors[[by_text[s] for s in pairs.first]]
        second = vectors[[by_text[s] for s in pairs.second]]
        rho = spearman(cosine(first, second), np.asarray(pairs.scores))
        if baseline is None:
            baseline = {"vectors": vectors, "spearman": rho}
        queries = baseline["vectors"]  # search embeds queries in float32
        best, _ = top_k([vectors], queries, K + 1, normalized=pooling.unit_length)
        found = neighbours(best, len(sentences))
        if dtype == "float32":
            baseline["top"] = found
        row = {"dtype": dtype, "spearman": rho, "d_spearman": rho - baseline["spearman"],
               f"recall@{K}": recall(found, baseline["top"]), **sizes, "run_s": round(seconds, 1)}
        if dtype == "binary":
            row[f"recall@{K}_hamming"] = recall(
                hamming_neighbours(np.packbits(vectors > 0, axis=1)), baseline["top"])
        if dtype in BARS:
            most, least = BARS[dtype]
            row["bars_met"] = abs(row["d_spearman"]) <= most and row[f"recall@{K}"] >= least
        rows.append(row)
    base = rows[0]
    print(f"\n{'dtype':8} {'spearman':>9} {'d vs f32':>9} {'recall@10':>9} {'parquet B':>10} "
          f"{'tfrecord B':>10} {'vectors B':>10} {'x f32':>6}  bars")
    for r in rows:
        bars = {True: "met", False: "MISSED"}.get(r.get("bars_met"), "-")
        extra = (f"  (Hamming, binary queries: recall@10 {r[f'recall@{K}_hamming']:.4f})"
                 if "recall@10_hamming" in r else "")
        print(f"{r['dtype']:8} {r['spearman']:9.4f} {r['d_spearman']:+9.4f} "
              f"{r[f'recall@{K}']:9.4f} {r['parquet']:10,} {r['tfrecord']:10,} "
              f"{r['vector_column']:10,} {r['vector_column'] / base['vector_column']:6.3f}  "
              f"{bars}{extra}")
    result = {"pairs": args.pairs, "n_pairs": len(pairs), "n_sentences": len(sentences),
              "model": args.model, "k": K, "rows": rows,
              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    os.makedirs(os.path.join(REPO, "benchmarks", "results"), exist_ok=True)
    out = os.path.join(REPO, "benchmarks", "results",
                       time.strftime("%Y-%m-%dT%H%M", time.gmtime()) + "-vector-dtypes.json")
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result))
    print(f"-> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
