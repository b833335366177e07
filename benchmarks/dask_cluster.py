"""The job on a loopback Dask cluster against the local runner: same corpus, alternating rounds.

    .venv/bin/python benchmarks/dask_cluster.py [--sentences 20000] [--rounds 3] [--workers 2] \
        [--model EXPORT] [--quick] [--json OUT.json]

Starts a scheduler and --workers worker processes of one thread each on 127.0.0.1 (as a user
starts them: `dask scheduler`, `dask worker`; tests/dask_cluster.py), makes one corpus
(benchmarks/corpus.py) and uses one model (the `minilm` preset's export, or --model). One run on
the cluster first, not counted: the workers import TensorFlow once in their life, not per run.
Then --rounds rounds of [local run, Dask run], the order reversed every other round, each
`python -m beam_embed.pipeline.run` in a process of its own (the local one on the in-process
runner, the other with --runner DaskRunner). Reported per round and as median and min-max over
the rounds (never the best round): each run's throughput (embedded records over the manifest's
wall_time_s: build -> read -> embed -> write -> manifest) and the Dask run's over the local
run's; the vectors of the last two runs compared row by row.

Where the Dask run's time goes, from the scheduler's task stream of its last round: the tasks'
compute time by step (the encoder's step includes its model load, once per worker process and
run), the time spent moving data between workers, the workers' idle time within the run, and
the launcher's share (the run's wall time outside the first task's start and the last task's
end: building and sending the graph, connecting, the manifest's check after the run).
`--quick` (300 sentences, one round): what the test suite runs, so the script cannot break
unseen; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
sys.path.insert(0, REPO)

from ab_refs import _export, compare_vectors, emit  # noqa: E402  (benchmarks/ is not a package)
from throughput import spread  # noqa: E402

ENCODER_STEP = "RunInference"


def _run(corpus: str, model: str, output: str, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "beam_embed.pipeline.run", "--input", corpus, "--input_format",
           "text", "--model", model, "--output", output, "--overwrite", "--progress_every", "0",
           *extra]
    start = time.time()
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": REPO})
    end = time.time()
    if done.returncode != 0:
        raise SystemExit(f"the run failed ({done.returncode}): {' '.join(cmd)}\n"
                         f"{done.stderr[-3000:]}")
    with open(os.path.join(output, "manifest.json")) as f:
        manifest = json.load(f)
    pipeline = manifest["wall_time_s"]
    return {"pipeline_s": pipeline, "process_s": round(end - start, 3),
            "embedded": manifest["counts"]["embedded"],
            "records_per_s": round(manifest["counts"]["embedded"] / pipeline, 1), "ended": end}


def _step(key) -> str:
    """A task's step: its key's name up to the token dask added."""
    name = key[0] if isinstance(key, tuple) else str(key)
    return name.rsplit("-", 1)[0]


def where_time_goes(records: list[dict], run: dict, workers: int) -> dict:
    """The task stream of one run, summed: compute by step, transfers, idle, the launcher."""
    compute, transfer, per_worker = collections.Counter(), 0.0, collections.Counter()
    starts, stops = [], []
    for r in records:
        for s in r.get("startstops", ()):
            seconds = s["stop"] - s["start"]
            starts.append(s["start"])
            stops.append(s["stop"])
            if s["action"] == "compute":
                compute[_step(r["key"])] += seconds
                per_worker[r["worker"]] += seconds
            elif s["action"] == "transfer":
                transfer += seconds
    span = max(stops) - min(starts) if starts else 0.0
    busy = sum(compute.values()) + transfer
    top = dict(sorted(((k, round(v, 2)) for k, v in compute.items()), key=lambda kv: -kv[1])[:8])
    return {"tasks": len(records), "task_span_s": round(span, 2),
            "compute_s": round(sum(compute.values()), 2), "compute_by_step_s": top,
            "compute_s_per_worker": {w: round(v, 2) for w, v in per_worker.items()},
            "encoder_s": round(sum(v for k, v in compute.items() if ENCODER_STEP in k), 2),
            "transfer_s": round(transfer, 2),
            "idle_worker_s": round(max(workers * span - busy, 0.0), 2),
            "launcher_s": round(max(run["pipeline_s"] - span, 0.0), 2)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--model", help="an export folder (default: the minilm preset's)")
    ap.add_argument("--quick", action="store_true", help="300 sentences, one round")
    ap.add_argument("--json", help="also write the result here")
    args = ap.parse_args(argv)
    if args.quick:
        args.sentences, args.rounds = 300, 1
    from tests.dask_cluster import LoopbackCluster

    work = tempfile.mkdtemp(prefix="dask-bench-")
    corpus = os.path.join(work, "corpus.txt")
    subprocess.run([sys.executable, os.path.join(BENCH, "corpus.py"), corpus, "--sentences",
                    str(args.sentences)], check=True, capture_output=True)
    model = args.model or _export()
    runs = {"local": [], "dask": []}
    with LoopbackCluster(os.path.join(work, "cluster"), workers=args.workers) as cluster:
        on_dask = ["--runner", "DaskRunner", "--dask_client_address", cluster.address]
        _run(corpus, model, os.path.join(work, "warm"), on_dask)  # the workers import TF
        with cluster.client() as client:
            client.get_task_stream(start=time.time())  # the scheduler records from now on
        records = []
        for k in range(args.rounds):
            for side in (("local", "dask") if k % 2 == 0 else ("dask", "local")):
                extra = on_dask if side == "dask" else []
                run = _run(corpus, model, os.path.join(work, side), extra)
                runs[side].append(run)
                if side == "dask":
                    with cluster.client() as client:
                        records = client.get_task_stream(start=run["ended"] - run["process_s"],
                                                         stop=run["ended"])
                print(f"[{time.strftime('%H:%M:%S')}] round {k + 1} {side}: "
                      f"{run['records_per_s']} records/s ({run['pipeline_s']} s)", flush=True)
    ratios = [d["records_per_s"] / lo["records_per_s"]
              for d, lo in zip(runs["dask"], runs["local"])]
    result = {
        "sentences": args.sentences, "rounds": args.rounds, "workers": args.workers,
        "cores": os.cpu_count(), "runs": runs,
        "dask_over_local_throughput": {k: round(v, 3) for k, v in spread(ratios).items()
                                       if k != "runs"},
        "where_the_dask_run_goes": where_time_goes(records, runs["dask"][-1], args.workers),
        "vectors": compare_vectors(os.path.join(work, "local"), os.path.join(work, "dask")),
        "date": time.strftime("%Y-%m-%dT%H:%M"),
    }
    r = result["dask_over_local_throughput"]
    local = statistics.median(x["records_per_s"] for x in runs["local"])
    dask = statistics.median(x["records_per_s"] for x in runs["dask"])
    print(f"\n{args.sentences} sentences, {args.rounds} alternating rounds, {args.workers} "
          f"one-thread workers on {os.cpu_count()} cores: local {local:.0f} records/s, Dask "
          f"{dask:.0f} records/s, Dask/local {r['median']:.3f} ({r['min']:.3f}-{r['max']:.3f})")
    print(f"where the last Dask run went: {json.dumps(result['where_the_dask_run_goes'])}")
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
