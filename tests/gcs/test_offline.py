"""gs:// when Cloud Storage cannot be reached: no network at all, nothing listening where
STORAGE_EMULATOR_HOST points, a proxy that cannot reach Google. Each command answers within
seconds (the storage client's retries waited ~90-120 s, then printed its RetryError) with one
line naming the endpoint and the cause, and exit 1. Nothing here can reach the internet: the
commands run in an empty network namespace (`unshare -n`, as root), or talk only to loopback."""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from beam_embed.process import exits
from tests.job_helpers import write_lines
from tests.process.test_gcs_auth import without_google
from tests.tunnel_proxy import tunnel_proxy

pytestmark = pytest.mark.pipeline  # whole commands, end to end

ROOT = Path(__file__).resolve().parents[2]
ANSWERED_WITHIN_S = 45  # the probe's 10 s, plus a command's start-up on a busy machine
SEARCH = ["search", "gs://bkt/emb", "the cat"]


def _commands(tmp_path, model: str) -> dict[str, list[str]]:
    corpus = write_lines(str(tmp_path / "c.txt"), ["the cat sat"])
    return {"search": SEARCH,
            "run": ["run", "--input", corpus, "--model", model, "--output", "gs://bkt/out",
                    "--progress_every", "0"],
            "pca": ["pca", "--input", "gs://bkt/emb", "--output", str(tmp_path / "viz")]}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _one_line(args: list[str], tmp_path, wrap: tuple[str, ...] = (), **env: str) -> str:
    """Runs `beam-embed ARGS` without Google credentials, with `env` added; asserts exit 1
    within ANSWERED_WITHIN_S and a single line of its own; returns that line."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {**without_google(os.environ), "HOME": str(home), "PYTHONPATH": str(ROOT),
           "BEAM_EMBED_VERBOSE": "0", **env}
    began = time.monotonic()
    done = subprocess.run([*wrap, sys.executable, "-m", "beam_embed.pipeline.cli", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    took = time.monotonic() - began
    assert done.returncode == exits.FAILED, done.stderr[-3000:]
    lines = [x for x in done.stderr.splitlines() if x.startswith(f"beam-embed {args[0]}:")]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert took < ANSWERED_WITHIN_S, (took, done.stderr[-3000:])
    return lines[0]


@pytest.mark.parametrize("command", ["search", "run"])
def test_no_network_and_no_credentials_is_one_line_in_seconds(command, tiny_export, tmp_path):
    """An empty network namespace: no name resolves, no address routes (the metadata server's
    neither), as on a machine that is offline."""
    line = _one_line(_commands(tmp_path, tiny_export)[command], tmp_path,
                     wrap=("unshare", "-n"))
    assert line.startswith(f"beam-embed {command}: cannot connect to Cloud Storage "
                           "(storage.googleapis.com:443): "), line
    assert line.endswith("; gs:// paths cannot be read or written"), line
    assert "RetryError" not in line


@pytest.mark.parametrize("command", ["run", "pca"])
def test_an_emulator_that_is_not_running_is_one_line_in_seconds(command, tiny_export,
                                                                 tmp_path):
    port = _closed_port()
    line = _one_line(_commands(tmp_path, tiny_export)[command], tmp_path,
                     STORAGE_EMULATOR_HOST=f"http://127.0.0.1:{port}")
    assert line == (f"beam-embed {command}: cannot connect to Cloud Storage (127.0.0.1:{port}, "
                    f"the STORAGE_EMULATOR_HOST endpoint): {os.strerror(errno.ECONNREFUSED)}; gs:// paths "
                    "cannot be read or written")


def test_a_proxy_that_cannot_reach_google_is_one_line_in_seconds(tmp_path):
    """The proxy answers, but refuses the tunnel to Cloud Storage (502), as one cut off from the
    internet does; the client would retry that for two minutes too."""
    with tunnel_proxy("502 Bad Gateway") as proxy:
        line = _one_line(SEARCH, tmp_path, HTTPS_PROXY=proxy, HTTP_PROXY=proxy,
                         NO_PROXY="127.0.0.1,localhost")
    assert line == (f"beam-embed search: cannot connect to Cloud Storage (storage.googleapis.com"
                    f":443, through the proxy {proxy.split('//')[1]}): Tunnel connection failed: "
                    "502 Bad Gateway; gs:// paths cannot be read or written")
