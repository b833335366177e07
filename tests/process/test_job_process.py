"""A job's process holds its garbage collector off while it starts, and the run turns it back
on with start-up's objects frozen (beam_embed.process.job_process)."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from beam_embed.process import job_process
from tests.job_helpers import write_lines

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def test_resume_freezes_what_start_up_made_and_turns_the_collector_on():
    frozen = gc.get_freeze_count()
    try:
        job_process.pause_collector()
        assert not gc.isenabled()
        made = [[i] for i in range(1000)]  # tracked objects made while paused
        job_process.resume_collector()
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen + len(made)
    finally:
        gc.unfreeze()
        gc.enable()


def test_resume_leaves_a_running_collector_as_it_was():
    frozen = gc.get_freeze_count()
    job_process.resume_collector()
    assert gc.isenabled() and gc.get_freeze_count() == frozen


# Runs the job's real entry with a collection callback that logs, for every collection, its
# generation and how many objects were frozen when it ran.
_ENTRY = """
import gc, json, runpy, sys
log = open(sys.argv[1], "a")
def seen(phase, info):
    if phase == "start":
        log.write(json.dumps([info["generation"], gc.get_freeze_count()]) + "\\n")
        log.flush()
gc.callbacks.append(seen)
sys.argv = ["beam_embed.pipeline.run", *sys.argv[2:]]
runpy.run_module("beam_embed.pipeline.run", run_name="__main__")
"""


@pytest.mark.pipeline
def test_the_entry_collects_nothing_before_the_run_and_collects_again_during_it(tiny_export,
                                                                               tmp_path):
    corpus = write_lines(str(tmp_path / "c.txt"), [f"sentence number {i}" for i in range(300)])
    log = tmp_path / "collections.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", _ENTRY, str(log), "--input", corpus, "--model", tiny_export,
         "--output", str(tmp_path / "out"), "--progress_every", "0"],
        cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    collections = [json.loads(line) for line in log.read_text().splitlines()]
    # before the pause, the entry's first few imports may run young collections; never a full one
    assert [gen for gen, frozen in collections if not frozen and gen == 2] == []
    after = [frozen for _, frozen in collections if frozen]
    assert after, "the collector never ran again"
    assert min(after) > 100_000  # TensorFlow's, Beam's and the model's objects: frozen
