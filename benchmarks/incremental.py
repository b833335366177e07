"""Incremental runs: `--reuse` on a grown corpus, `--dedupe` on a corpus with duplicates, each
against a full run in the same invocation.

    .venv/bin/python benchmarks/incremental.py [--sentences 20000] [--rounds 3] \
        [--json benchmarks/results/$(date +%Y-%m-%dT%H%M)-incremental.json]

reuse   the benchmark corpus (benchmarks/corpus.py, --sentences, seed 8) is embedded once: the
        previous run. It grows by --new (5%) sentences of another seed. Each round runs, in an
        order reversed every other round, a full run of the grown corpus and a `--reuse` run of
        it from the previous run. The ratio is the manifest's wall_time_s (the pipeline: build
        -> read -> embed -> write -> manifest) of the reuse run over the full run's, per round;
        reported as its median and min-max. The copied rows are compared with the previous
        run's rows of the same text (bit for bit, every column's float32s), the newly encoded
        ones with the full run's (cosine, largest absolute difference).
dedupe  a corpus of --sentences rows of which --duplicates (30%) repeat another row exactly:
        rounds of a plain run and a `--dedupe` run, alternating. The encoder's work is counted
        twice: the texts it was given (the dedupe run's manifest, `encoded`, against every row,
        and against the distinct lines counted here) and its tokens (each distinct text's
        num_tokens over every row's, from the plain run's output); and the pipeline time ratio.

Both use the minilm preset at --precision fp32 (bf16 is emulated, slow, on CPUs without
AVX-512 bf16). Only ratios from one invocation mean anything: a shared machine's speed drifts.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time

import numpy as np
import pyarrow.parquet as pq

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)

import corpus  # noqa: E402  (benchmarks/ is not a package)
from throughput import _machine, run_measured, spread  # noqa: E402

REUSE_TARGET = 0.15  # the reuse run's pipeline time, at most this share of a full run's
COSINE_TARGET = 0.99999


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def job(work: str, name: str, corpus_path: str, *extra: str, wait: float = 5) -> dict:
    """One `python -m beam_embed.pipeline.run` process: its manifest, process wall time and output."""
    output = os.path.join(work, name)
    cmd = [sys.executable, "-m", "beam_embed.pipeline.run", "--input", corpus_path, "--input_format",
           "text", "--model", "minilm", "--precision", "fp32", "--output", output,
           "--overwrite", "--progress_every", "0", *extra]
    measured = run_measured(cmd, wait, output + ".log")
    with open(os.path.join(output, "manifest.json")) as f:
        manifest = json.load(f)
    say(f"  {name}: pipeline {manifest['wall_time_s']:.1f} s, process {measured['wall_s']:.1f} "
        f"s, counts {manifest['counts']}")
    return {"pipeline_s": manifest["wall_time_s"], "process_s": round(measured["wall_s"], 2),
            "others_during": measured["others_during"], "counts": manifest["counts"],
            "manifest": manifest, "output": output}


def rows(output: str) -> dict:
    """id -> (text, mean vector float32, num_tokens, truncated), from the shards the manifest
    lists."""
    with open(os.path.join(output, "manifest.json")) as f:
        manifest = json.load(f)
    column = manifest["poolings"][0]["column"]
    out = {}
    for name in manifest["files"]["parquet"]:
        t = pq.read_table(os.path.join(output, name),
                          columns=["id", "text", column, "num_tokens", "truncated"])
        vectors = np.stack(t.column(column).to_numpy(zero_copy_only=False)).astype(np.float32)
        for i, (rid, text, n, cut) in enumerate(zip(
                t.column("id").to_pylist(), t.column("text").to_pylist(),
                t.column("num_tokens").to_pylist(), t.column("truncated").to_pylist())):
            out[rid] = (text, vectors[i], n, cut)
    return out


def compare_reuse(previous: dict, full: dict, reused: dict, new_texts: set) -> dict:
    """Copied rows against the previous run (bits), new rows against the full run (cosine)."""
    stored: dict[str, set] = {}
    for text, v, n, cut in previous.values():
        stored.setdefault(text, set()).add((v.tobytes(), n, cut))
    full_by_text = {text: v for text, v, _, _ in full.values()}
    identical = copied = 0
    cosines, diffs = [], []
    for text, v, n, cut in reused.values():
        if text in stored and text not in new_texts:
            copied += 1
            identical += (v.tobytes(), n, cut) in stored[text]
        else:
            ref = full_by_text[text]
            cosines.append(float(v @ ref / (np.linalg.norm(v) * np.linalg.norm(ref))))
            diffs.append(float(np.abs(v - ref).max()))
    return {"copied_rows": copied, "copied_bit_identical": identical,
            "new_rows": len(cosines), "new_min_cosine": min(cosines, default=None),
            "new_max_abs_diff": max(diffs, default=None)}


def reuse_bench(args, work: str) -> dict:
    base = corpus.write(os.path.join(work, "base.txt"), args.sentences, 8)
    new = list(corpus.sentences(int(args.sentences * args.new), 9))
    with open(base, encoding="utf-8") as f:
        base_lines = f.read().splitlines()
    grown = os.path.join(work, "grown.txt")
    with open(grown, "w", encoding="utf-8") as f:
        f.write("\n".join(base_lines + new) + "\n")
    say(f"reuse: previous run on {len(base_lines)} sentences, then {len(base_lines) + len(new)} "
        f"({len(new)} new), {args.rounds} rounds")
    previous = job(work, "previous", base)
    rounds = []
    for k in range(args.rounds):
        order = ("full", "reuse") if k % 2 == 0 else ("reuse", "full")
        done = {}
        for what in order:
            extra = ("--reuse", previous["output"]) if what == "reuse" else ()
            done[what] = job(work, what, grown, *extra)
        ratio = done["reuse"]["pipeline_s"] / done["full"]["pipeline_s"]
        say(f"round {k + 1}: reuse / full pipeline {ratio:.3f}")
        rounds.append({"order": order, "ratio": ratio,
                       **{w: {key: done[w][key] for key in ("pipeline_s", "process_s",
                                                           "others_during", "counts")}
                          for w in done}})
    check = compare_reuse(rows(previous["output"]), rows(done["full"]["output"]),
                          rows(done["reuse"]["output"]), set(new) - set(base_lines))
    return {"sentences": len(base_lines), "new": len(new), "rounds": rounds,
            "ratio": spread([r["ratio"] for r in rounds]),
            "process_ratio": spread([r["reuse"]["process_s"] / r["full"]["process_s"]
                                     for r in rounds]),
            "reused_from": done["reuse"]["manifest"].get("reused_from"), "vectors": check}


def duplicated_corpus(path: str, n: int, share: float) -> tuple[str, int]:
    """n rows, `share` of them exact repeats of other rows, shuffled; (path, distinct rows)."""
    distinct = list(dict.fromkeys(corpus.sentences(n, 8)))[: n - int(n * share)]
    rng = random.Random(11)
    lines = distinct + rng.choices(distinct, k=n - len(distinct))
    rng.shuffle(lines)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path, len(set(lines))


def dedupe_bench(args, work: str) -> dict:
    path, distinct = duplicated_corpus(os.path.join(work, "duplicated.txt"), args.sentences,
                                       args.duplicates)
    say(f"dedupe: {args.sentences} rows, {distinct} distinct, {args.dedupe_rounds} rounds")
    rounds = []
    for k in range(args.dedupe_rounds):
        order = ("plain", "dedupe") if k % 2 == 0 else ("dedupe", "plain")
        done = {}
        for what in order:
            done[what] = job(work, what, path, *(("--dedupe",) if what == "dedupe" else ()))
        rounds.append({"order": order,
                       "ratio": done["dedupe"]["pipeline_s"] / done["plain"]["pipeline_s"],
                       **{w: {key: done[w][key] for key in ("pipeline_s", "process_s",
                                                           "others_during", "counts")}
                          for w in done}})
    plain, dedupe = rows(done["plain"]["output"]), rows(done["dedupe"]["output"])
    tokens = {text: n for text, _, n, _ in plain.values()}
    diffs = [float(np.abs(v - plain[rid][1]).max()) for rid, (_, v, _, _) in dedupe.items()]
    counts = done["dedupe"]["counts"]
    return {"rows": args.sentences, "distinct": distinct, "rounds": rounds,
            "encoded_texts": counts["encoded"], "embedded": counts["embedded"],
            "texts_ratio": counts["encoded"] / done["plain"]["counts"]["embedded"],
            "tokens_ratio": sum(tokens.values()) / sum(n for _, _, n, _ in plain.values()),
            "time_ratio": spread([r["ratio"] for r in rounds]),
            "same_ids": set(plain) == set(dedupe), "max_abs_diff": max(diffs)}


def checks(result: dict) -> list[dict]:
    out = []

    def add(name, met, text):
        out.append({"name": name, "met": bool(met), "text": text})

    r = result.get("reuse")
    if r:
        s = r["ratio"]
        every = all(x <= REUSE_TARGET for x in s["runs"])
        add("reuse_time", s["median"] <= REUSE_TARGET,
            f"--reuse pipeline <= {REUSE_TARGET:.0%} of a full run's ({r['sentences']:,} + "
            f"{r['new']:,} new): median {s['median']:.3f} (min {s['min']:.3f}, max "
            f"{s['max']:.3f}; {'every' if every else 'not every'} round)")
        v = r["vectors"]
        add("reuse_bits", v["copied_bit_identical"] == v["copied_rows"] > 0,
            f"copied rows bit-identical to the previous run's: {v['copied_bit_identical']:,} of "
            f"{v['copied_rows']:,}")
        add("reuse_new", (v["new_min_cosine"] or 0) >= COSINE_TARGET,
            f"new rows' cosine to a full run's >= {COSINE_TARGET}: min {v['new_min_cosine']:.7f} "
            f"over {v['new_rows']:,} rows (largest difference {v['new_max_abs_diff']:.2e})")
    d = result.get("dedupe")
    if d:
        share = 1 - d["distinct"] / d["rows"]
        add("dedupe_work", d["encoded_texts"] == d["distinct"] and
            abs(d["texts_ratio"] - (1 - share)) < 1e-9,
            f"--dedupe on {share:.0%} duplicates: the encoder got {d['encoded_texts']:,} texts "
            f"for {d['embedded']:,} rows ({d['texts_ratio']:.3f}x; {d['distinct']:,} distinct "
            f"lines), {d['tokens_ratio']:.3f}x the tokens; pipeline time "
            f"{d['time_ratio']['median']:.3f}x (min {d['time_ratio']['min']:.3f}, max "
            f"{d['time_ratio']['max']:.3f})")
        add("dedupe_rows", d["same_ids"] and d["max_abs_diff"] < 1e-5,
            f"--dedupe rows: every id of the plain run, vectors within {d['max_abs_diff']:.1e}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, default=20_000)
    ap.add_argument("--new", type=float, default=0.05, help="share of new sentences")
    ap.add_argument("--duplicates", type=float, default=0.30, help="share of repeated rows")
    ap.add_argument("--rounds", type=int, default=3, help="reuse rounds")
    ap.add_argument("--dedupe-rounds", type=int, default=2)
    ap.add_argument("--skip", choices=("reuse", "dedupe"), action="append", default=[])
    ap.add_argument("--json", help="write the result document here")
    args = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="beam-embed-incremental-")
    result = {"benchmark": "incremental", "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
              "machine": _machine(), "model": "minilm", "precision": "fp32", "work": work}
    if "reuse" not in args.skip:
        result["reuse"] = reuse_bench(args, work)
    if "dedupe" not in args.skip:
        result["dedupe"] = dedupe_bench(args, work)
    result["checks"] = checks(result)
    for c in result["checks"]:
        print(f"[{'MET ' if c['met'] else 'MISS'}] {c['text']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
