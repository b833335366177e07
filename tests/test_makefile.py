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


def _extras_in_setup() -> set[str]:
    import ast
    tree = ast.parse(open(os.path.join(ROOT, "setup.py")).read())
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.keyword)
                and n.arg == "extras_require")
    return {k.value for k in call.value.keys}


def test_extra_adds_to_the_editable_install(tmp_path):
    """`make extra EXTRA=read` keeps the checkout the installed beam-embed (`-e`), where a plain
    `pip install '.[read]'` would replace it with a copy; every extra of setup.py is offered."""
    python = tmp_path / "python3"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    venv = tmp_path / "venv"
    make = ["make", "-s", f"PYTHON={python}", f"VENV={venv}"]
    assert subprocess.run([*make, "setup"], cwd=ROOT, capture_output=True,
                          timeout=60).returncode == 0
    out = subprocess.run([*make, "extra", "EXTRA=read"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["pip install -e .[read]"]
    bad = subprocess.run([*make, "extra", "EXTRA=raed"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode != 0
    offered = bad.stdout.strip().rsplit(": ", 1)[1].split()
    assert "EXTRA='raed'" in bad.stdout and set(offered) == _extras_in_setup()
