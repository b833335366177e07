"""`python -m pipeline.run` ends with os._exit after flushing (pipeline.common.exits.exit_now):
no line is lost and the exit code is the command's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.common import exits
from tests.job_helpers import write_lines

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def test_exit_now_flushes_buffered_output_and_logging_and_keeps_the_code(tmp_path):
    log_file = tmp_path / "log.txt"
    script = ("import logging, sys\n"
              f"logging.basicConfig(filename={str(log_file)!r}, level=logging.INFO)\n"
              "logging.info('logged line')\n"
              "print('first line'); sys.stdout.write('no newline')\n"
              "sys.stderr.write('to stderr')\n"
              "from pipeline.common.exits import exit_now\n"
              "exit_now(3)\n"
              "print('never printed')\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (3, "first line\nno newline", "to stderr")
    assert "logged line" in log_file.read_text()
    done = subprocess.run([sys.executable, "-c", "from pipeline.common.exits import exit_now\n"
                           "exit_now(None)"], cwd=ROOT, env=ENV, timeout=120)
    assert done.returncode == exits.OK


@pytest.mark.pipeline
def test_a_finished_run_keeps_its_exit_code_summary_and_outputs(tiny_export, tmp_path):
    corpus = write_lines(str(tmp_path / "empty.txt"), ["", "  "])
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "pipeline.run", "--input", corpus, "--model", tiny_export,
         "--output", str(out), "--progress_every", "0"], cwd=ROOT, env=ENV, capture_output=True,
        text=True, timeout=600)
    assert done.returncode == exits.NOTHING_EMBEDDED, done.stderr[-2000:]
    assert "nothing was embedded" in done.stderr.strip().splitlines()[-1]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["skipped_empty"] == 2 and manifest["counts"]["embedded"] == 0
    assert not [p for p in os.listdir(out) if p.startswith((".beam-embed", "beam-temp"))]
