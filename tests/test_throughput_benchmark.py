"""benchmarks/throughput.py's quick mode runs every step of its full mode (its full mode is run by
hand on a quiet machine): the script and its workers cannot break unseen, and what it reports is
there and adds up."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.pipeline  # whole jobs, end to end

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks",
                      "throughput.py")
SENTENCES = 300  # at least the quick mode's naive prefix (256)


@pytest.fixture(scope="module")
def long_tiny_export(tmp_path_factory):
    """A tiny random BERT export that takes MiniLM's lengths: the benchmark's encoder stage runs
    texts up to 256 tokens, and Beam's naive path pads every text to 128."""
    from beam_embed.models.export.convert import export_checkpoint
    from tests.bert_reference import write_checkpoint

    checkpoint = str(tmp_path_factory.mktemp("long_tiny_ckpt"))
    write_checkpoint(checkpoint, max_positions=256)
    out = str(tmp_path_factory.mktemp("long_tiny_export"))
    export_checkpoint(checkpoint, out, name="tiny-bert-256")
    return out


def _row(rows: list[dict], path: str) -> dict:
    (row,) = [r for r in rows if r["path"] == path]
    return row


def test_the_quick_mode_runs_every_step_and_its_ratios_add_up(long_tiny_export, tmp_path):
    out = tmp_path / "result.json"
    done = subprocess.run([sys.executable, SCRIPT, "--quick", "--sentences", str(SENTENCES),
                           "--model", long_tiny_export, "--max-wait", "0", "--json", str(out)],
                          capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    result = json.loads(out.read_text())
    shutil.rmtree(result["work_dir"])  # the benchmark keeps its runs' outputs for a person to read
    assert (result["sentences"], result["rounds"], result["model"]) == (SENTENCES, 1, long_tiny_export)

    pick = result["pick"]  # the faster of our precisions on the prefix is the one measured
    assert pick["ours"] == max(pick["ours_rates"], key=pick["ours_rates"].get)
    ours, rows = pick["ours"], result["rows"]
    encoder = _row(rows, f"(b) encoder stage, {ours}")
    job = _row(rows, f"(c) job {ours}, DirectRunner in-process: pipeline")
    two = _row(rows, f"(c) job {ours}, DirectRunner 2 processes: pipeline")
    assert encoder["sentences"] == job["sentences"] == two["sentences"] == SENTENCES
    ratio = result["ratios"]["job pipeline / encoder stage"]["median"]
    assert ratio == pytest.approx(job["sentences_per_s"] / encoder["sentences_per_s"], rel=0.01)
    naive = rows[0]
    assert naive["path"].startswith("(a) naive") and naive["steady_state_between"] == [64, 256]
    assert result["ratios"]["encoder / naive"]["median"] == pytest.approx(
        encoder["sentences_per_s"] / naive["sentences_per_s"], rel=0.01)

    # the job's vectors are the encoder stage's: the same model at the same precision
    cosine = result["cosine"]
    same = cosine.get(f"ours_{ours}_vs_ours_fp32", {"mean": 1.0, "min": 1.0})
    assert cosine[f"job_{ours}_vs_ours_fp32"]["min"] == pytest.approx(same["min"], abs=1e-4)
    assert "fp32" in result["profile"]["profiles"] and result["matmul"]["runs"]
    assert result.get("memory") is None  # the quick mode skips the memory check
    assert {t["target"] for t in result["targets"]} >= {
        "job pipeline >= 0.95x the encoder stage", "encoder stage >= 5x the naive MLTransform path"}
    assert "job pipeline >= 0.95x the encoder stage" in done.stdout

    # benchmarks/plot_results.py reads what --json wrote: its table row has the run's ratio
    results = tmp_path / "results"
    results.mkdir()
    (results / "run.json").write_text(out.read_text())
    plotted = subprocess.run([sys.executable, os.path.join(os.path.dirname(SCRIPT),
                                                           "plot_results.py"),
                              "--results", str(results), "--table"],
                             capture_output=True, text=True, timeout=300)
    assert plotted.returncode == 0, plotted.stderr[-3000:]
    (row,) = [line for line in plotted.stdout.splitlines() if line.startswith("| 20")]
    assert f"{ratio:.3f}" in row.split("|")[8]  # the job / encoder column
