"""The benchmarks that need no model, run at sizes of seconds (their full sizes are run by hand):
they call the project's own code (the PCA command, search's scan and index, the results
folder's reader), so a change there cannot break them unseen."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def _run(script: str, *args: str, cwd=None) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, os.path.join(BENCH, script), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _json_lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


@pytest.mark.pipeline  # the PCA command's Beam job
def test_the_pca_benchmark_fits_both_sides_and_its_rates_are_its_times():
    (result,) = _json_lines(_run("pca_benchmark.py", "--rows", "2000", "--width", "16",
                                 "--components", "4").stdout)
    assert (result["rows"], result["width"], result["components"]) == (2000, 16, 4)
    for side in ("job", "sklearn"):
        got = result[side]
        assert got["s_min"] <= got["s"] <= got["s_max"] and got["peak_rss_mib"] > 0
        assert got["rows_per_s"] == pytest.approx(2000 / got["s"], rel=0.02)


def test_the_search_benchmark_times_the_scan_and_the_index():
    rows = _json_lines(_run("search_index.py", "--rows", "2000", "--width", "16",
                            "--queries", "1,3").stdout)
    assert [(r["queries"], r["method"]) for r in rows] == [
        (q, m) for q in (1, 3) for m in ("scan", "index-build", "index")]
    assert all(r["rows"] == 2000 and r["seconds"] > 0 for r in rows)


def test_the_results_plot_and_table_read_every_kept_throughput_run(tmp_path):
    kept = []
    for path in glob.glob(os.path.join(BENCH, "results", "*.json")):
        with open(path) as f:
            doc = json.load(f)
        if isinstance(doc.get("targets"), list) and doc.get("benchmark") != "pca":
            kept.append(doc)
    assert kept, "benchmarks/results/ holds throughput runs"
    throughput_table = _run("plot_results.py", "--table").stdout.split("\n\n")[0]  # PCA's next
    rows = [line for line in throughput_table.splitlines() if line.startswith("| 20")]
    assert len(rows) == len(kept)  # a row per run
    out = tmp_path / "ratios.png"
    _run("plot_results.py", "--out", str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.pipeline  # the job from two trees, each imported through a view outside it
def test_the_ab_benchmark_runs_both_trees_and_finds_their_vectors_equal(tmp_path):
    done = _run("ab_refs.py", "--base", "HEAD", "--rounds", "1", "--sentences", "40",
                "--precision", "fp32", "--json", str(tmp_path / "ab.json"))
    result = json.loads((tmp_path / "ab.json").read_text())
    assert result["vectors"]["rows"] == 40 and result["vectors"]["max_abs_diff"] == 0.0
    assert [len(result["runs"][side]) for side in ("base", "head")] == [1, 1]
    assert "A/B over 1 alternating rounds" in done.stdout


@pytest.mark.pipeline  # the job at two sizes, then killed half-way and resumed
def test_the_scale_benchmark_measures_each_size_its_shards_and_a_resume(tmp_path):
    done = _run("scale.py", "--quick", "--json", str(tmp_path / "scale.json"))
    result = json.loads((tmp_path / "scale.json").read_text())
    bound = result["shard_mb"] << 20
    sizes = result["sizes"]
    assert [(r["model"], r["records"], r["embedded"]) for r in sizes] == [
        ("tiny-bert", 2000, 2000), ("tiny-bert", 4000, 4000)]
    for r in sizes:
        assert r["per_record_ms"] == pytest.approx(1000 * r["pipeline_s"] / r["records"],
                                                   rel=1e-3) and r["peak_rss_mib"] > 0
        assert set(r["shards"]) == {"parquet", "tfrecord"}
        assert all(s["count"] >= 2 and 0 < s["max_bytes"] <= bound for s in r["shards"].values())
    (round_,) = result["resume"]["rounds"]
    clean, resumed = round_["clean"], round_["resume"]
    kept = resumed["resumed"]["records_kept"]
    assert resumed["resumed"]["attempts"] == 2 and clean["resumed"] is None
    assert 2000 <= resumed["kill"]["committed_rows"] <= kept < 4000  # killed half-way
    assert clean["embedded"] == resumed["embedded"] == 4000
    assert round_["ratio"] == pytest.approx(resumed["pipeline_s"] / clean["pipeline_s"], abs=1e-4)
    targets = result["targets"]
    assert targets["peak_rss"]["value"] == pytest.approx(
        sizes[1]["peak_rss_mib"] / sizes[0]["peak_rss_mib"], abs=1e-3)
    largest = max(s["max_bytes"] for r in (*sizes, clean, resumed) for s in r["shards"].values())
    assert targets["shard_bound"]["value"] == pytest.approx(largest / 2**20, abs=1e-3)
    assert all(t["met"] == (t["value"] <= t["threshold"]) for t in targets.values())
    assert "| target | value | threshold |" in done.stdout
