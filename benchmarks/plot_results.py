"""Plots the throughput benchmark's target ratios over every run kept in benchmarks/results/.

    python benchmarks/plot_results.py [--results DIR] [--out docs/performance-ratios.png]
    python benchmarks/plot_results.py --table   # the runs x targets table, markdown, newest first

Reads every *.json there: the files `benchmarks/throughput.py --json` writes and the runs
transcribed from the old printed reports (benchmarks/results/README.md describes both). PCA
runs are read for --table's PCA table and left out of the plot. One panel per target: each
run's median (the best round where a run kept only that) with its min-max over the rounds as
an error bar, the run's threshold as a dashed line, a red ring on a miss. Runs are spaced
evenly in time order (they come in bursts) and labelled with their start.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
from datetime import datetime

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# (key, panel title, short column name); the order of the panels and of the table's columns
TARGETS = [
    ("encoder_st", "encoder stage / sentence-transformers' best", "encoder / ST"),
    ("job_st", "job pipeline / sentence-transformers' best", "job / ST"),
    ("exit_st", "job / sentence-transformers, process start -> exit", "start->exit / ST"),
    ("startup", "start-up: sentence-transformers' / the job's seconds", "start-up ST / job"),
    ("job_encoder", "job pipeline / encoder stage", "job / encoder"),
    ("encoder_naive", "encoder stage / naive MLTransform path", "encoder / naive"),
    ("job_naive", "job pipeline / naive MLTransform path", "job / naive"),
    ("rss", "peak RSS growth, 1x -> 10x the corpus", "RSS 1x->10x"),
]


def target_key(name: str) -> str | None:
    """Which of TARGETS a target line is; the wording moved a little from run to run."""
    n = name.lower()
    if "cosine" in n:
        return None
    if n.startswith("peak rss"):
        return "rss"
    if "naive" in n:
        return "encoder_naive" if n.startswith("encoder") else "job_naive"
    if n.startswith("job pipeline") and "encoder stage" in n:
        return "job_encoder"
    if n.startswith("start-up"):
        return "startup"
    if "sentence-transformers" in n:
        if "start->exit" in n or "start to exit" in n:
            return "exit_st"
        return "encoder_st" if n.startswith("encoder") else "job_st"
    return None


def run_time(doc: dict) -> datetime:
    date = doc.get("date", "")
    for fmt in ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"):
        try:
            return datetime.strptime(date, fmt)
        except ValueError:
            pass
    raise ValueError(f"no date in {date!r}")


def machine_label(doc: dict) -> str:
    """'AMD EPYC, AVX-512 BF16': the CPU and its best matmul hardware (from the ISA flags the
    run printed, else from the words a transcribed run was described with)."""
    m = doc.get("machine", {})
    isa, described = set(m.get("isa", [])), m.get("described", "")
    cpu = " ".join(m["cpu"].split()[:2]) if "cpu" in m else described.split(",")[0]
    if any(f.startswith("amx") for f in isa) or "AMX" in described:
        feature = "AMX bf16"
    elif "avx512_bf16" in isa or "AVX-512 BF16" in described:
        feature = "AVX-512 BF16"
    elif "avx512f" in isa:
        feature = "AVX-512"
    elif "avx2" in isa or "AVX2" in described:
        feature = "AVX2 only"
    else:
        feature = "?"
    return f"{cpu}, {feature}"


def load(folder: str) -> tuple[list[dict], list[dict]]:
    """(throughput runs, PCA runs), each oldest first; each dict gains _file and _time."""
    runs, pca = [], []
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        with open(path) as f:
            doc = json.load(f)
        doc["_file"] = os.path.basename(path)
        if doc.get("benchmark") == "pca" or "results" in doc and "target" in doc:
            pca.append(doc)
        elif isinstance(doc.get("targets"), list):
            doc["_time"] = run_time(doc)
            runs.append(doc)
        else:
            print(f"skipped {path}: neither a throughput nor a PCA run", file=sys.stderr)
    runs.sort(key=lambda d: (d["_time"], d["_file"]))
    pca.sort(key=lambda d: d["_file"])
    return runs, pca


def points(doc: dict) -> dict:
    """key -> {value, min, max, threshold, met, best, text} for one run's plotted targets."""
    out = {}
    for t in doc["targets"]:
        key = target_key(t["target"])
        if key is None or key in out:
            continue
        best = "median" not in t
        value = t["median"] if not best else t["best"]
        out[key] = {"value": value, "min": t.get("min"), "max": t.get("max"),
                    "threshold": t["threshold"], "met": t["met"], "best": best,
                    "text": value_text(t, key, value)}
    return out


def value_text(t: dict, key: str, value: float) -> str:
    """The value with the digits the run printed it with, else as throughput.py prints it now."""
    want = 100 * value if key == "rss" else value
    tokens = re.findall(r"[+-]?\d[\d,]*(?:\.\d+)?", t.get("printed", ""))
    same = [tok for tok in tokens if abs(float(tok.replace(",", "")) - want) < 1e-9]
    if same:
        return same[-1] + ("%" if key == "rss" else "")
    return f"{want:+.1f}%" if key == "rss" else f"{value:.3f}"


def run_name(doc: dict) -> str:
    """'2026-12-02 13:17' from a file named by its start (the page's name for the run), else
    from the run's date."""
    m = re.match(r"(\d{4}-\d\d-\d\d)(?:T(\d\d)(\d\d))?", doc["_file"])
    if m:
        return m.group(1) + (f" {m.group(2)}:{m.group(3)}" if m.group(2) else "")
    return doc.get("date", doc["_file"])[:16]


def label(doc: dict) -> str:
    name = run_name(doc)
    return name[5:].replace(" ", "\n")


def plot(runs: list[dict], out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    machines = list(dict.fromkeys(machine_label(d) for d in runs))
    colors = dict(zip(machines, ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b"]))
    per_run = [points(d) for d in runs]
    xs = list(range(len(runs)))
    fig, axes = plt.subplots(4, 2, figsize=(13, 14), sharex=True)
    for ax, (key, title, _) in zip(axes.flat, TARGETS):
        have = [(x, p[key], machine_label(d)) for x, p, d in zip(xs, per_run, runs) if key in p]
        scale = 100 if key == "rss" else 1
        thx = [x for x, _, _ in have]
        thy = [p["threshold"] * scale for _, p, _ in have]
        ax.plot(thx, thy, "--", color="0.35", lw=1.2, drawstyle="steps-mid", zorder=1)
        for x, p, mach in have:
            v = p["value"] * scale
            err = None
            if p["min"] is not None:
                err = [[v - p["min"] * scale], [p["max"] * scale - v]]
            face = "white" if p["best"] else colors[mach]
            ax.errorbar([x], [v], yerr=err, fmt="o", ms=6, color=colors[mach], mfc=face,
                        ecolor=colors[mach], elinewidth=1.2, capsize=3, zorder=3)
            if not p["met"]:
                ax.plot([x], [v], "o", ms=13, mfc="none", mec="#d62728", mew=1.8, zorder=4)
        thresholds = sorted({p["threshold"] for _, p, _ in have})
        word = "<=" if key == "rss" else ">="
        unit = "%" if key == "rss" else "x"
        shown = ", ".join(f"{t * scale:g}{unit}" for t in thresholds)
        ax.set_title(f"{title}  (target {word} {shown})", fontsize=10)
        ax.set_ylabel("% growth" if key == "rss" else "ratio (x)")
        ax.grid(axis="y", alpha=0.3)
    for ax in axes[-1]:
        ax.set_xticks(xs)
        ax.set_xticklabels([label(d) for d in runs], fontsize=8)
        ax.set_xlabel("run (start time, 2026; evenly spaced in time order)")
    handles = [Line2D([], [], marker="o", ls="", color=colors[m], label=m) for m in machines]
    handles += [
        Line2D([], [], marker="o", ls="", color="0.3", mfc="white",
               label="best of 3 rounds (no median kept)"),
        Line2D([], [], marker="o", ls="", ms=11, mfc="none", mec="#d62728", mew=1.8,
               label="target missed (median)"),
        Line2D([], [], ls="--", color="0.35", label="threshold"),
    ]
    fig.suptitle("benchmarks/throughput.py: each target's median over the rounds (bar: min-max)",
                 y=0.995, fontsize=12)
    fig.legend(handles=handles, loc="upper center", ncol=3, fontsize=9, frameon=False,
               bbox_to_anchor=(0.5, 0.975))
    fig.tight_layout(rect=(0, 0, 1, 0.945))
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    fig.savefig(out, dpi=100)
    print(f"wrote {out} ({len(runs)} runs)")


def table(runs: list[dict], pca: list[dict]) -> str:
    """Markdown: one row a run (newest first), one column a target, MISS where it missed. No
    links: docs/ pages name no path going up (tests/test_readme.py)."""
    current = {}
    for key, _, _ in TARGETS:  # the newest run's threshold heads each column
        for d in reversed(runs):
            p = points(d)
            if key in p:
                current[key] = p[key]["threshold"]
                break
    head = ["run", "machine", "code"]
    for key, _, short in TARGETS:
        th = current.get(key)  # None: no run measured it (a --quick run, no --st-python)
        head.append(short if th is None else f"{short} <= +{100 * th:g}%" if key == "rss"
                    else f"{short} >= {th:g}")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 3 + "---:|" * len(TARGETS)]
    for d in reversed(runs):
        p = points(d)
        cells = [run_name(d), machine_label(d),
                 f"`{d['commit']}`" if d.get("commit") else "-"]
        for key, _, _ in TARGETS:
            if key not in p:
                cells.append("-")
                continue
            q = p[key]
            text = q["text"] + (" (best)" if q["best"] else "")
            if q["threshold"] != current.get(key):
                text += f" (target {q['threshold']:g})"
            cells.append(text if q["met"] else f"**{text} MISS**")
        lines.append("| " + " | ".join(cells) + " |")
    if pca:
        lines += ["", "| PCA run | machine | BLAS kernels | job rows/s at 1M x 384 (>= 100,000) | "
                      "scikit-learn rows/s | job peak RSS |", "|---|---|---|---:|---:|---:|"]
        for d in reversed(pca):
            when = d.get("date")
            m = re.match(r"(\d{4}-\d\d-\d\d)T(\d\d)(\d\d)-pca-(.+)\.json$", d["_file"])
            if not when and m:  # no time printed: named after the throughput run beside it
                when = f"{m.group(1)} {m.group(2)}:{m.group(3)} run, {m.group(4)}"
            big = d["results"][-1]
            blas = "; ".join(big["job"].get("blas", [])) or "-"
            rate = f"{big['job']['rows_per_s']:,}"
            lines.append(f"| {when or d['_file']} | {machine_label(d)} | "
                         f"{blas} | {rate if d['target']['met'] else f'**{rate} MISS**'} | "
                         f"{big['sklearn']['rows_per_s']:,} | {big['job']['peak_rss_mib']:,} MiB |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "performance-ratios.png"))
    ap.add_argument("--table", action="store_true",
                    help="print the runs x targets table (markdown) instead of plotting")
    args = ap.parse_args(argv)
    runs, pca = load(args.results)
    if not runs:
        ap.error(f"no throughput runs in {args.results}")
    if args.table:
        print(table(runs, pca))
    else:
        plot(runs, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
