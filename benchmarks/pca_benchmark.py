"""Fits and projects N x WIDTH vectors from Parquet with the PCA job; prints rows/s and peak memory.

    python benchmarks/pca_benchmark.py [--rows 100000,1000000] [--width 384] [--components 50]

For each N it writes an embedding-job folder (shards of ROWS_PER_SHARD rows, row groups of
ROW_GROUP rows, generated chunk by chunk: the matrix is never whole in memory), then runs
`pipeline.pca.command.main` in a fresh process (DirectRunner) and reads that process's peak RSS. Flat
peak RSS across N is the claim under test: the fit keeps O(width²), the projection streams.
Prints a table, then one JSON line per run.
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
import pyarrow as pa
import pyarrow.parquet as pq

ROWS_PER_SHARD, ROW_GROUP = 250_000, 20_000


def write_input(folder: str, rows: int, width: int, seed: int = 0) -> None:
    """An embedding-job output folder with `rows` random vectors (decaying spectrum)."""
    rng = np.random.default_rng(seed)
    scale = np.linspace(2.0, 0.05, width).astype(np.float32)
    shards = -(-rows // ROWS_PER_SHARD)
    names = []
    for s in range(shards):
        name = f"embeddings-{s:05d}-of-{shards:05d}.parquet"
        names.append(name)
        first, last = s * ROWS_PER_SHARD, min(rows, (s + 1) * ROWS_PER_SHARD)
        writer = None
        for start in range(first, last, ROW_GROUP):
            n = min(ROW_GROUP, last - start)
            vectors = rng.standard_normal((n, width), np.float32) * scale
            table = pa.table({
                "id": pa.array([f"rec-{i:09d}" for i in range(start, start + n)]),
                "source": pa.array(["bench.jsonl"] * n),
                "num_tokens": pa.array(rng.integers(3, 128, n), pa.int32()),
                "truncated": pa.array(np.zeros(n, bool)),
                "mean": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), width)})
            writer = writer or pq.ParquetWriter(os.path.join(folder, name), table.schema)
            writer.write_table(table)
        writer.close()
    manifest = {"format_version": 1,
                "model": {"name": "random", "handle": "-", "fingerprint": "-"},
                "poolings": [{"name": "mean", "column": "mean", "width": width,
                              "normalize": False}],
                "files": {"parquet": names}, "metadata_columns": [], "text_column": False,
                "counts": {"read": rows, "embedded": rows, "skipped_empty": 0, "dead_lettered": 0}}
    with open(os.path.join(folder, "manifest.json"), "w") as f:
        json.dump(manifest, f)


def run_one(argv: list[str]) -> None:
    """In the child: run the job, print wall seconds and this process's peak RSS as JSON."""
    import resource

    from pipeline.pca.command import main

    start = time.perf_counter()
    main(argv)
    seconds = time.perf_counter() - start
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    print(json.dumps({"seconds": seconds, "peak_rss_mib": peak_mib}))


def bench(rows: int, width: int, components: int, workdir: str) -> dict:
    emb, viz = os.path.join(workdir, f"emb-{rows}"), os.path.join(workdir, f"viz-{rows}")
    os.makedirs(emb)
    start = time.perf_counter()
    write_input(emb, rows, width)
    generate = time.perf_counter() - start
    argv = ["--input", emb, "--output", viz, "--components", str(components)]
    child = subprocess.run([sys.executable, __file__, "--run-one", json.dumps(argv)],
                           capture_output=True, text=True, check=True,
                           cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    result = json.loads(child.stdout.strip().splitlines()[-1])
    with open(os.path.join(viz, "manifest.json")) as f:
        assert json.load(f)["projections"]["rows"] == rows
    return {"rows": rows, "width": width, "components": components,
            "input_mib": round(sum(os.path.getsize(os.path.join(emb, n))
                                   for n in os.listdir(emb)) / 2**20),
            "generate_s": round(generate, 1), "job_s": round(result["seconds"], 1),
            "rows_per_s": round(rows / result["seconds"]),
            "peak_rss_mib": round(result["peak_rss_mib"])}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", default="100000,1000000")
    p.add_argument("--width", type=int, default=384)
    p.add_argument("--components", type=int, default=50)
    p.add_argument("--run-one", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.run_one:
        sys.path.insert(0, os.getcwd())
        run_one(json.loads(args.run_one))
        return
    results = []
    with tempfile.TemporaryDirectory(prefix="pca-bench-") as workdir:
        for rows in (int(r) for r in args.rows.split(",")):
            results.append(bench(rows, args.width, args.components, workdir))
            r = results[-1]
            print(f"{r['rows']:>10,} rows  {r['input_mib']:>6,} MiB in  job {r['job_s']:>6.1f} s  "
                  f"{r['rows_per_s']:>8,} rows/s  peak RSS {r['peak_rss_mib']:>6,} MiB", flush=True)
    if len(results) > 1:
        first, last = results[0], results[-1]
        print(f"peak RSS x{last['peak_rss_mib'] / first['peak_rss_mib']:.2f} "
              f"for x{last['rows'] / first['rows']:g} the rows")
    for r in results:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
