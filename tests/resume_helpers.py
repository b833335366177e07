"""Killing a run outright part-way and comparing what a resume publishes with a clean run.

A run is started as a user starts it (`python -m beam_embed run ...`, a process group of its own)
and its progress is watched from outside: once its staging folder holds `commits` committed
shard sets, the whole process group is sent SIGKILL (no handler runs, as when a machine is
lost).
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np

from tests.job_helpers import parquet_rows, tfrecord_rows

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEADLINE_S = 300


WORDS = "river stone maple quartz lantern orbit velvet cedar ember harbor".split()


def long_docs(path, n: int, seed: int, jsonl: bool = False) -> str:
    """`n` documents of ~2.5 KB (the texts make the shards; the tiny model's vectors are
    small), so a 1 MB shard holds ~400: a text file (ids path:line), or JSON lines with ids
    (the same ids wherever the file is read from)."""
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for i in range(n):
            text = " ".join(rng.choice(WORDS, 360))
            f.write(json.dumps({"id": f"d{i}", "text": text}) + "\n" if jsonl
                    else f"{text} doc{i}\n")
    return str(path)


def local_commits(output: str) -> int:
    return len(glob.glob(os.path.join(output, ".beam-embed-staging-*", "commits", "*.json")))


def kill_after(argv: list[str], count, commits: int, env: dict | None = None) -> str:
    """Runs `beam-embed run argv` and kills its process group once `count()` (the commits its
    staging folder holds) reaches `commits`; its stderr. Fails when the run ends first."""
    job = subprocess.Popen([sys.executable, "-m", "beam_embed", "run", *argv], cwd=ROOT,
                           env={**os.environ, "PYTHONPATH": ROOT, **(env or {})},
                           start_new_session=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + DEADLINE_S
        while job.poll() is None and time.monotonic() < deadline and count() < commits:
            time.sleep(0.02)
        assert job.poll() is None, ("the run ended before it could be killed: "
                                    + job.stderr.read().decode()[-3000:])
        assert count() >= commits, "no commits within the deadline"
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    return job.stderr.read().decode()


def manifest(output: str) -> dict:
    with open(os.path.join(output, "manifest.json")) as f:
        return json.load(f)


def assert_same_rows(clean: str, resumed: str, columns=("cls",)) -> None:
    """The same ids in both, once each, in every format; vectors equal (cos >= 0.99999)."""
    theirs, ours = parquet_rows(clean), parquet_rows(resumed)
    m = manifest(resumed)
    assert sum(m["rows"][n] for n in m["files"]["parquet"]) == len(ours)  # no id twice
    assert set(ours) == set(theirs)
    for column in columns:
        a = np.stack([np.asarray(theirs[i][column], np.float32) for i in sorted(theirs)])
        b = np.stack([np.asarray(ours[i][column], np.float32) for i in sorted(theirs)])
        cos = np.sum(a * b, 1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
        assert cos.min() >= 0.99999
    if "tfrecord" in m["files"]:
        assert set(tfrecord_rows(resumed)) == set(theirs)
        assert sum(m["rows"][n] for n in m["files"]["tfrecord"]) == len(theirs)
    counts, clean_counts = m["counts"], manifest(clean)["counts"]
    for key in ("read", "embedded", "skipped_empty", "dead_lettered", "truncated", "tokens"):
        assert counts[key] == clean_counts[key], key
    assert counts["read"] == counts["embedded"] + counts["skipped_empty"] + \
        counts["dead_lettered"]
