"""Every file has one path: no tracked links, and a traceback from the checkout's editable install
names the top-level file that `git blame` knows, as the wheel's names its own copy."""

from __future__ import annotations

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RAISE = ("import beam_embed.pipeline.common.settings.errors as e, beam_embed.models.pooling as p\n"
         "print(e.__file__); print(p.__file__)\n")


def test_no_tracked_symbolic_links():
    out = subprocess.run(["git", "ls-files", "-s"], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout
    links = [line.split("\t")[1] for line in out.splitlines() if line.startswith("120000")]
    assert links == []
    assert not os.path.islink(os.path.join(REPO, "beam_embed", "pipeline"))
    assert not os.path.exists(os.path.join(REPO, "beam_embed", "pipeline"))


def test_the_editable_install_names_the_top_level_files(tmp_path):
    out = subprocess.run([sys.executable, "-c", RAISE], cwd=tmp_path, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == [os.path.join(REPO, "pipeline", "common", "settings", "errors.py"),
                   os.path.join(REPO, "models", "pooling.py")]


def test_a_traceback_names_the_file_git_knows(tmp_path):
    code = "import beam_embed.models.pooling as p\np.parse_pooling('no-such-pooling')\n"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True)
    assert out.returncode == 1 and "unknown pooling" in out.stderr, out.stderr
    frames = [line.split('"')[1] for line in out.stderr.splitlines()
              if line.strip().startswith('File "') and line.split('"')[1].startswith(REPO)]
    assert os.path.join(REPO, "models", "pooling.py") in frames, out.stderr
    tracked = subprocess.run(["git", "ls-files", "--error-unmatch",
                              *(os.path.relpath(f, REPO) for f in frames)], cwd=REPO,
                             capture_output=True, text=True)
    assert tracked.returncode == 0, tracked.stderr
