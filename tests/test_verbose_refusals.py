"""A refusal (exit 2) is one line; `-v` (or `--debug`) adds its traceback above that line, as
it does for every other error: run as the user runs the command."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

BEAM_EMBED = os.path.join(os.path.dirname(sys.executable), "beam-embed")


def _command(tmp_path, *args):
    env = {k: v for k, v in os.environ.items() if k != "BEAM_EMBED_VERBOSE"}
    return subprocess.run([BEAM_EMBED, *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env=env)


REFUSED = {
    "search": (["search", "no-such-run", "a query"], "no manifest.json in 'no-such-run'"),
    "run": (["run", "--input", "missing/*.txt", "--output", "out"],
            "--input 'missing/*.txt' matches no file"),
    "pca": (["pca", "--input", "no-such-run", "--output", "viz"], "no-such-run"),
}


@pytest.mark.parametrize("name, flag", [("search", "-v"), ("run", "-v"), ("pca", "-v"),
                                        ("run", "--debug")])
def test_verbose_adds_the_traceback_to_a_refusal(name, flag, tmp_path):
    args, says = REFUSED[name]
    quiet = _command(tmp_path, *args)
    assert quiet.returncode == 2, quiet.stderr
    assert "Traceback" not in quiet.stderr
    line = quiet.stderr.strip().splitlines()[-1]
    assert line.startswith(f"beam-embed {name}: ") and says in line
    verbose = _command(tmp_path, *args, flag)
    assert verbose.returncode == 2, verbose.stderr
    lines = verbose.stderr.strip().splitlines()
    assert lines[-1] == line  # the same line, last
    start = lines.index("Traceback (most recent call last):")
    assert lines[start + 1:-1] and lines[-2].startswith(("ValueError", "FileNotFoundError"))
