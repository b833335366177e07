"""Fits and projects N x WIDTH vectors from Parquet with the PCA job, and with scikit-learn in RAM.

    python benchmarks/pca_benchmark.py [--rows 100000,1000000] [--width 384] [--components 50]
                                       [--rounds 1]

For each N it writes an embedding-job folder (shards of ROWS_PER_SHARD rows, row groups of
ROW_GROUP rows, generated chunk by chunk: the matrix is never whole in memory), then runs, each in
a fresh process, alternating for --rounds rounds: `beam_embed.pipeline.pca.command.main` (DirectRunner: fit,
projections, sample, plots) and the baseline, the same Parquet read whole into RAM (pyarrow ->
numpy) and `sklearn.decomposition.PCA(K).fit_transform` on it. Each process reports its wall
seconds, CPU seconds (user+sys) and peak RSS. Flat peak RSS across N is the job's claim: the fit
keeps O(width²), the projection streams. Prints a table (medians, min-max over rounds, the BLAS
kernels each side ran), then one JSON line per N.

Where a machine forces OpenBLAS's kernels through OPENBLAS_CORETYPE (some shared machines pin
older ones for old OpenBLAS builds), the run inherits that for both sides; `env -u
OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/pca_benchmark.py ...` measures what a
current numpy picks by itself. The BLAS column says which ran.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
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


def sklearn_in_ram(folder: str, components: int) -> None:
    """The baseline: every shard's vectors read into one numpy matrix, then scikit-learn's PCA."""
    from sklearn.decomposition import PCA

    with open(os.path.join(folder, "manifest.json")) as f:
        manifest = json.load(f)
    pooling = manifest["poolings"][0]
    parts = []
    for name in manifest["files"]["parquet"]:
        column = pq.read_table(os.path.join(folder, name), columns=[pooling["column"]]).column(0)
        parts.append(column.combine_chunks().flatten().to_numpy().reshape(-1, pooling["width"]))
    matrix = np.concatenate(parts)
    del parts
    coords = PCA(components).fit_transform(matrix)
    assert coords.shape == (len(matrix), components)


def run_one(side: str, argv: list[str]) -> None:
    """In the child: run one side, print its wall and CPU seconds and peak RSS as JSON."""
    import resource

    start = time.perf_counter()
    if side == "job":
        from beam_embed.pipeline.pca.command import main

        assert main(argv) == 0
    else:
        sklearn_in_ram(*argv)
    seconds = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"seconds": seconds, "cpu_s": usage.ru_utime + usage.ru_stime,
                      "peak_rss_mib": usage.ru_maxrss / 1024,  # Linux: KiB
                      "blas": blas_kernels()}))


def blas_kernels() -> str:
    """The BLAS libraries this process loaded and the kernels they picked, e.g. "openblas
    SkylakeX" (OPENBLAS_CORETYPE, where a machine sets it, forces older ones)."""
    from threadpoolctl import threadpool_info

    return ", ".join(sorted({f"{i['internal_api']} {i.get('architecture') or '?'}"
                             for i in threadpool_info() if i["user_api"] == "blas"}))


def _child(side: str, argv: list) -> dict:
    child = subprocess.run([sys.executable, __file__, "--run-one", json.dumps([side, argv])],
                           capture_output=True, text=True, check=True,
                           cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return json.loads(child.stdout.strip().splitlines()[-1])


def _summary(runs: list[dict], rows: int) -> dict:
    seconds = sorted(r["seconds"] for r in runs)
    return {"s": round(statistics.median(seconds), 2), "s_min": round(seconds[0], 2),
            "s_max": round(seconds[-1], 2),
            "cpu_s": round(statistics.median(r["cpu_s"] for r in runs), 2),
            "rows_per_s": round(rows / statistics.median(seconds)),
            "peak_rss_mib": round(max(r["peak_rss_mib"] for r in runs)),
            "blas": sorted({r["blas"] for r in runs})}


def bench(rows: int, width: int, components: int, rounds: int, workdir: str) -> dict:
    emb = os.path.join(workdir, f"emb-{rows}")
    os.makedirs(emb)
    start = time.perf_counter()
    write_input(emb, rows, width)
    generate = time.perf_counter() - start
    runs = {"job": [], "sklearn": []}
    for i in range(rounds):  # alternating, the first side swapped each round
        for side in (("job", "sklearn") if i % 2 == 0 else ("sklearn", "job")):
            if side == "job":
                viz = os.path.join(workdir, f"viz-{rows}-{i}")
                argv = ["--input", emb, "--output", viz, "--components", str(components)]
                runs["job"].append(_child("job", argv))
                with open(os.path.join(viz, "manifest.json")) as f:
                    assert json.load(f)["projections"]["rows"] == rows
                shutil.rmtree(viz)
            else:
                runs["sklearn"].append(_child("sklearn", [emb, components]))
    input_mib = sum(os.path.getsize(os.path.join(emb, n)) for n in os.listdir(emb)) / 2**20
    shutil.rmtree(emb)
    return {"rows": rows, "width": width, "components": components, "rounds": rounds,
            "input_mib": round(input_mib), "generate_s": round(generate, 1),
            **{side: _summary(r, rows) for side, r in runs.items()}}


def _line(r: dict, side: str) -> str:
    s = r[side]
    return (f"{r['rows']:>10,}  {side:<8} {s['rows_per_s']:>9,} rows/s  {s['s']:>7.2f} s "
            f"({s['s_min']:.2f}-{s['s_max']:.2f})  cpu {s['cpu_s']:>7.2f} s  "
            f"peak RSS {s['peak_rss_mib']:>6,} MiB  BLAS {'; '.join(s['blas'])}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", default="100000,1000000")
    p.add_argument("--width", type=int, default=384)
    p.add_argument("--components", type=int, default=50)
    p.add_argument("--rounds", type=int, default=1, help="alternating rounds of each side")
    p.add_argument("--run-one", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.run_one:
        sys.path.insert(0, os.getcwd())
        run_one(*json.loads(args.run_one))
        return
    results = []
    print(f"{'rows':>10}  {'side':<8} {'rows/s':>16}  {'median s (min-max)':>22}  "
          f"{'CPU s':>11}  {'peak RSS':>15}   ({args.rounds} round(s), input {args.width} wide)")
    with tempfile.TemporaryDirectory(prefix="pca-bench-") as workdir:
        for rows in (int(r) for r in args.rows.split(",")):
            results.append(bench(rows, args.width, args.components, args.rounds, workdir))
            for side in ("job", "sklearn"):
                print(_line(results[-1], side), flush=True)
    if len(results) > 1:
        first, last = results[0], results[-1]
        print(f"job peak RSS x{last['job']['peak_rss_mib'] / first['job']['peak_rss_mib']:.2f}"
              f" for x{last['rows'] / first['rows']:g} the rows")
    for r in results:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
