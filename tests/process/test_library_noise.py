"""`stderr_held` (beam_embed.process.library_noise): a block's stderr (its subprocesses'
included) is dropped when it succeeds and shown when it fails."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from beam_embed.process.library_noise import stderr_held

CHILD = [sys.executable, "-c", "import sys; sys.stderr.write('child noise\\n')"]


def test_a_block_that_succeeds_leaves_nothing_on_stderr(capfd):
    with stderr_held():
        subprocess.run(CHILD, check=True)
        os.write(2, b"own fd write\n")  # as C code writes
    sys.stderr.write("after the block\n")
    assert capfd.readouterr().err == "after the block\n"


def test_a_block_that_fails_shows_what_it_held(capfd):
    with pytest.raises(RuntimeError, match="build failed"):
        with stderr_held():
            subprocess.run(CHILD, check=True)
            raise RuntimeError("build failed")
    assert capfd.readouterr().err == "child noise\n"
