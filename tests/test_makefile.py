"""`make`'s set-up says what it does, a line per stage, before each one starts: the long install
shows pip's own lines (quiet, it ran silent for minutes on a fresh clone). Run with a stand-in
for python3 whose venv's pip only echoes, so no package is downloaded."""

from __future__ import annotations

import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE_PYTHON = """#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  mkdir -p "$3/bin"; printf '#!/bin/sh\\necho "pip $*"\\n' > "$3/bin/pip"; chmod +x "$3/bin/pip"
fi
"""


def test_setup_says_each_stage_before_it_runs(tmp_path):
    python = tmp_path / "python3"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    venv = tmp_path / "venv"
    out = subprocess.run(["make", "-s", "setup", f"PYTHON={python}", f"VENV={venv}"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [x.split(":")[0] for x in lines if x.startswith("setup ")] == [
        "setup 1/3", "setup 2/3", "setup 3/3", "setup done"]
    install = lines.index("pip install -e .[dev]")  # not -q: pip's lines are the progress
    assert lines[install - 1].startswith("setup 2/3: beam-embed and its dependencies")
    assert "a few minutes" in lines[install - 1]
    assert lines[install + 1].startswith("setup 3/3: the default model's files")
    assert (venv / ".installed").exists()
