"""Same-run A/B of the whole job at two commits: did a change make `run` slower?

    .venv/bin/python benchmarks/ab_refs.py --base 0a51e1c [--head HEAD] [--rounds 5] \
        [--sentences 20000] [--precision bf16] [--json OUT.json]

Checks `--base` out into a temporary git worktree beside the current checkout (or `--head`, when
it is not the working tree), makes one corpus (benchmarks/corpus.py) and one MiniLM export (the
`minilm` preset, shared by both sides), then runs the job (`python -m beam_embed.pipeline.run`) on the
DirectRunner from each tree, the order of the two sides reversed every other round, so outside load hits both
alike. Both sides run with the same interpreter and installed libraries: only the project's own
code differs. Each round gives the ratio head/base of: the manifest's wall_time_s (build -> read
-> embed -> write), the process's start->exit wall time, and its CPU time (user + system of the
process and its children, steadier on a shared machine). Reported as median and min-max over
the rounds, never the best round. The two sides' vectors are compared row by row (they must be
the same computation).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)

from throughput import spread  # noqa: E402  (benchmarks/ is not a package)


def _git(*args: str, cwd: str = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def _tree(ref: str, work: str, name: str) -> str:
    if ref == "WORKTREE":
        return REPO
    path = os.path.join(work, name)
    _git("worktree", "add", "--detach", path, ref)
    return path


def _export() -> str:
    sys.path.insert(0, REPO)
    from beam_embed.models.presets import resolve
    from beam_embed.models.tf_import import import_tensorflow
    from beam_embed.process import set_up

    set_up([])
    import_tensorflow()
    return os.path.dirname(resolve("minilm").encoder)


def _import_root(tree: str, work: str, name: str) -> str:
    """The folder to put first on PYTHONPATH so that `beam_embed` and everything in it come
    from `tree`. A tree of the one-path layout has no beam_embed/pipeline (setup.py maps the
    top-level folders there, and an editable install maps them to this checkout): a view of
    its installed layout is built outside the tree, links to its files in `work`. Older trees
    (links in beam_embed/, or `pipeline` at the top) are imported as they are."""
    package = os.path.join(tree, "beam_embed")
    if not os.path.isdir(package) or os.path.exists(os.path.join(package, "pipeline")):
        return tree
    view = os.path.join(work, f"view-{name}")
    os.makedirs(os.path.join(view, "beam_embed"))
    for entry in os.listdir(package):
        os.symlink(os.path.join(package, entry), os.path.join(view, "beam_embed", entry))
    for sub in ("pipeline", "models"):
        os.symlink(os.path.join(tree, sub), os.path.join(view, "beam_embed", sub))
    return view


def _job_module(tree: str) -> str:
    """The job's entry point in that tree: trees before the one import package kept `pipeline`
    at the top."""
    return ("beam_embed.pipeline.run" if os.path.isdir(os.path.join(tree, "beam_embed"))
            else "pipeline.run")


def _run_job(tree: str, root: str, corpus: str, model: str, output: str, precision: str
             ) -> dict:
    cmd = [sys.executable, "-m", _job_module(tree), "--input", corpus, "--input_format", "text",
           "--model", model, "--precision", precision, "--output", output, "--overwrite",
           "--progress_every", "0"]
    env = {**os.environ, "PYTHONPATH": root}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"the job from {tree} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    with open(os.path.join(output, "manifest.json")) as f:
        manifest = json.load(f)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"pipeline_s": manifest["wall_time_s"], "process_s": round(wall, 3),
            "cpu_s": round(cpu, 3), "embedded": manifest["counts"]["embedded"]}


def _vectors(output: str):
    """The run's first pooling as float32 [rows, width], rows sorted by id, read from the
    Parquet shards its manifest lists."""
    import numpy as np
    import pyarrow.parquet as pq

    sys.path.insert(0, REPO)
    from beam_embed.pipeline.common.rows.vectors import vector_matrix

    with open(os.path.join(output, "manifest.json")) as f:
        manifest = json.load(f)
    pooling = manifest["poolings"][0]
    table = pq.read_table([os.path.join(output, n) for n in manifest["files"]["parquet"]],
                          columns=["id", pooling["column"]])
    order = np.argsort(np.asarray(table.column("id").to_pylist(), dtype=str))
    return vector_matrix(table.column(pooling["column"]), pooling["width"])[order]


def compare_vectors(output_a: str, output_b: str) -> dict:
    """Two runs' first pooling, row by row: rows, largest difference, smallest cosine."""
    import numpy as np

    a, b = _vectors(output_a), _vectors(output_b)
    cos = np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return {"rows": int(len(a)), "max_abs_diff": float(np.max(np.abs(a - b))),
            "min_cosine": float(np.min(cos))}


def emit(result: dict, path: str | None) -> None:
    """The closing lines: the vectors' comparison, the result as JSON (also to `path`)."""
    print(f"vectors: {result['vectors']}")
    print(json.dumps(result))
    if path:
        with open(path, "w") as f:
            json.dump(result, f, indent=1)


def _spread(values: list[float]) -> dict:
    s = spread(values)
    return {k: round(s[k], 3) for k in ("median", "min", "max")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the commit before the change")
    ap.add_argument("--head", default="WORKTREE",
                    help="the commit after it (default: this working tree)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sentences", type=int, default=20000)
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--json", help="also write the result here")
    args = ap.parse_args(argv)

    work = tempfile.mkdtemp(prefix="ab-refs-")
    trees = {}
    try:
        trees = {"base": _tree(args.base, work, "base"), "head": _tree(args.head, work, "head")}
        roots = {side: _import_root(tree, work, side) for side, tree in trees.items()}
        corpus = os.path.join(work, "corpus.txt")
        subprocess.run([sys.executable, os.path.join(BENCH, "corpus.py"), corpus,
                        "--sentences", str(args.sentences)], check=True)
        model = _export()
        runs = {"base": [], "head": []}
        for k in range(args.rounds):
            order = ("base", "head") if k % 2 == 0 else ("head", "base")
            for side in order:
                out = os.path.join(work, f"out-{side}")
                runs[side].append(_run_job(trees[side], roots[side], corpus, model, out,
                                           args.precision))
                print(f"[{time.strftime('%H:%M:%S')}] round {k + 1} {side}: {runs[side][-1]}",
                      flush=True)
        ratios = {key: _spread([h[key] / b_[key] for h, b_ in zip(runs["head"], runs["base"])])
                  for key in ("pipeline_s", "process_s", "cpu_s")}
        result = {
            "base": _git("rev-parse", "--short", args.base),
            "head": (_git("rev-parse", "--short", "HEAD") + "+worktree"
                     if args.head == "WORKTREE" else _git("rev-parse", "--short", args.head)),
            "sentences": args.sentences, "precision": args.precision, "rounds": args.rounds,
            "runs": runs, "ratio_head_over_base": ratios,
            "vectors": compare_vectors(os.path.join(work, "out-base"),
                                       os.path.join(work, "out-head")),
            "date": time.strftime("%Y-%m-%dT%H:%M"),
        }
        print(f"\nA/B over {args.rounds} alternating rounds, {args.sentences} sentences, "
              f"{args.precision}: head {result['head']} / base {result['base']} "
              "(below 1 = head faster)")
        print(f"{'measure':<14}{'base median':>12}{'head median':>12}{'ratio median':>14}"
              f"{'min-max':>14}")
        for key, r in ratios.items():
            bm = statistics.median(x[key] for x in runs["base"])
            hm = statistics.median(x[key] for x in runs["head"])
            print(f"{key:<14}{bm:>12.2f}{hm:>12.2f}{r['median']:>14.3f}"
                  f"{r['min']:>7.3f}-{r['max']:.3f}")
        emit(result, args.json)
        return 0
    finally:
        for tree in trees.values():
            if tree != REPO:
                subprocess.run(["git", "worktree", "remove", "--force", tree], cwd=REPO,
                               capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
