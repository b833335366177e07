"""A command's terminal shows only the tool's own lines unless -v asks for the libraries' too.
Each run is a fresh interpreter, as a user's is: TensorFlow, absl and Beam print their start-up
lines once per process."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end

OWN_LINE = re.compile(r"^\[beam-embed \d\d:\d\d:\d\d\] ")
LIBRARY_NOISE = ("absl", "cuInit", "cuda", "oneDNN", "cpu_feature_guard", "WARNING:root",
                 "tensorflow", "I0000", "E0000", "W0000", "Resource module")


def _cli(cwd, *argv: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("TF_CPP_MIN_LOG_LEVEL", "BEAM_EMBED_VERBOSE")}  # as a user's shell
    env["PYTHONPATH"] = ":".join(sys.path)
    return subprocess.run([sys.executable, "-m", "beam_embed.pipeline.cli", *argv], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=600)


@pytest.mark.parametrize("workers", [[], ["--direct_num_workers=2",
                                          "--direct_running_mode=multi_processing"]])
def test_run_on_the_sample_prints_only_its_own_lines(tiny_export, tmp_path, workers):
    """In-process (`make run`), and with worker processes, whose lines Beam forwards."""
    out = _cli(tmp_path, "run", "--model", tiny_export, "--progress_every", "0", *workers)
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    assert lines and all(OWN_LINE.match(line) for line in lines), out.stderr
    assert not [n for n in LIBRARY_NOISE if n in out.stderr]
    assert "done: read 600, embedded 600" in lines[-2]
    assert lines[-1].endswith("next: beam-embed pca --input output/embeddings --output "
                              'output/viz --color-by topic   or   beam-embed search '
                              'output/embeddings "your query"')
    assert out.stdout == ""


def test_verbose_shows_the_libraries(tiny_export, tmp_path):
    quiet = _cli(tmp_path, "tokens", "a cat", "--model", tiny_export)
    loud = _cli(tmp_path, "tokens", "a cat", "--model", tiny_export, "-v")
    assert quiet.returncode == loud.returncode == 0 and quiet.stdout == loud.stdout
    assert quiet.stderr == ""
    assert [line for line in loud.stderr.splitlines() if not OWN_LINE.match(line)]
