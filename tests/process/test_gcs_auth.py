"""gs:// without Google credentials: one line of the tool's own and anonymous access at once
(Beam's own look retried for ~25 s, logging four warnings with tracebacks); a local emulator
(STORAGE_EMULATOR_HOST): anonymous, nothing looked up. Everything here stays on loopback: the
metadata server's address points to a closed local port, and anything else goes to a proxy that
tunnels nowhere (Cloud Storage is checked to be reachable before the look: it answers that
check and nothing more)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from beam_embed.process import exits
from beam_embed.process.gcs_auth import ANONYMOUS
from tests.gcs_emulator import GcsFolder
from tests.job_helpers import parquet_rows
from tests.tunnel_proxy import tunnel_proxy

ROOT = Path(__file__).resolve().parents[2]
LINE = re.compile(r"\[beam-embed \d\d:\d\d:\d\d\] (.*)")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again once the socket is


@pytest.fixture
def no_credentials(tmp_path) -> dict:
    """A process environment without Google credentials: no GOOGLE_APPLICATION_CREDENTIALS, a
    HOME without gcloud's file, the metadata server on a closed loopback port, any other
    request through a proxy that tunnels nowhere, so no lookup can reach another address."""
    home = tmp_path / "home"
    home.mkdir()
    closed = f"127.0.0.1:{_closed_port()}"
    with tunnel_proxy() as proxy:
        yield {**without_google(os.environ), "HOME": str(home), "PYTHONPATH": str(ROOT),
               "BEAM_EMBED_VERBOSE": "0", "GCE_METADATA_HOST": closed,
               "GCE_METADATA_IP": closed, "HTTP_PROXY": proxy, "HTTPS_PROXY": proxy,
               "NO_PROXY": "127.0.0.1,localhost"}


def without_google(env) -> dict:
    """`env` without Google credentials, an emulator or a proxy named."""
    return {k: v for k, v in env.items()
            if k not in ("GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_CONFIG", "NO_GCE_CHECK",
                         "STORAGE_EMULATOR_HOST", "GCE_METADATA_TIMEOUT",
                         "TF_CPP_MIN_LOG_LEVEL")  # the tests' own level: the CLI sets its own
            and not k.lower().endswith("_proxy")}


# The credentials step of a gs:// access, as a command's process makes it: the CLI's set-up,
# then the client Beam's filesystem and our claim store create. The machine running the tests
# may be a Compute Engine VM, whose firmware says so: it is made to say nothing.
_CLIENT = """
import sys, time
from beam_embed.process import set_up
set_up([])
from google.auth.compute_engine import _metadata
_metadata._GCE_PRODUCT_NAME_FILE = "/nonexistent"
from apache_beam.io.gcp.gcsio import create_storage_client
from apache_beam.options.pipeline_options import PipelineOptions
began = time.monotonic()
client = create_storage_client(PipelineOptions())
print(round(time.monotonic() - began, 2), type(client._credentials).__name__)
"""


def _client(env: dict) -> tuple[float, str, list[str]]:
    """(seconds the credentials step took, the credentials' type, stderr's lines)"""
    done = subprocess.run([sys.executable, "-c", _CLIENT], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seconds, kind = done.stdout.split()
    return float(seconds), kind, done.stderr.splitlines()


def test_without_credentials_one_line_and_anonymous_at_once(no_credentials):
    seconds, kind, err = _client(no_credentials)
    assert kind == "AnonymousCredentials"
    assert len(err) == 1 and LINE.fullmatch(err[0]).group(1) == ANONYMOUS, err
    assert ANONYMOUS == ("no Google Cloud credentials found; reading gs:// anonymously (set "
                         "GOOGLE_APPLICATION_CREDENTIALS or run `gcloud auth "
                         "application-default login`)")
    assert seconds < 5  # Beam's own look: ~25 s of retries


def test_unusable_credentials_file_is_named_in_the_line(no_credentials, tmp_path):
    missing = tmp_path / "gone.json"
    seconds, kind, err = _client({**no_credentials, "GOOGLE_APPLICATION_CREDENTIALS":
                                  str(missing)})
    assert kind == "AnonymousCredentials" and seconds < 5
    assert len(err) == 1, err
    assert LINE.fullmatch(err[0]).group(1) == (
        f"the Google Cloud credentials in GOOGLE_APPLICATION_CREDENTIALS ({missing}) cannot be "
        f"used: File {missing} was not found; reading gs:// anonymously")


def test_credentials_found_are_used_without_a_line(no_credentials, tmp_path):
    """gcloud's application-default file in HOME (what `gcloud auth application-default
    login` writes): a user's credentials, nothing said."""
    adc = Path(no_credentials["HOME"]) / ".config" / "gcloud"
    adc.mkdir(parents=True)
    (adc / "application_default_credentials.json").write_text(json.dumps({
        "type": "authorized_user", "client_id": "id.apps.googleusercontent.com",
        "client_secret": "secret", "refresh_token": "token"}))
    seconds, kind, err = _client(no_credentials)
    assert (kind, err) == ("Credentials", [])
    assert seconds < 5


def test_an_emulator_is_used_anonymously_without_looking(no_credentials):
    """STORAGE_EMULATOR_HOST: not even the metadata server is asked (here it would never
    answer: a listening socket that accepts nothing; the emulator's address is one too, which
    a connection opens to and no request is made of)."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        host = f"127.0.0.1:{silent.getsockname()[1]}"
        seconds, kind, err = _client({**no_credentials, "GCE_METADATA_HOST": host,
                                      "GCE_METADATA_IP": host,
                                      "STORAGE_EMULATOR_HOST": f"http://{host}"})
    assert (kind, err) == ("AnonymousCredentials", [])
    assert seconds < 1


def test_the_cli_set_up_imports_no_beam_until_a_command_needs_it(no_credentials):
    script = ("import sys\n"
              "from beam_embed.process import set_up\n"
              "set_up([])\n"
              "print('apache_beam' in sys.modules)\n"
              "from apache_beam.io.filesystems import FileSystems\n"
              "from apache_beam.internal.gcp import auth\n"
              "from beam_embed.process import gcs_auth\n"
              "print(auth._Credentials._get_service_credentials is "
              "gcs_auth.service_credentials)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=no_credentials,
                          capture_output=True, text=True, timeout=300)
    assert done.stdout.split() == ["False", "True"], done.stderr[-3000:]


@pytest.mark.pipeline
def test_a_run_reads_gs_from_an_emulator_without_waiting_or_warning(tiny_export, tmp_path,
                                                                    no_credentials,
                                                                    gcs_emulator):
    env = {**no_credentials, "STORAGE_EMULATOR_HOST": gcs_emulator}
    folder = GcsFolder.new(gcs_emulator, "auth")
    corpus = folder.upload("in/corpus.txt", "the cat sat\nthe dog ran\n")
    out = tmp_path / "out"
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "beam_embed.pipeline.cli", "run", "--input", folder.path("in/*.txt"),
         "--model", tiny_export, "--output", str(out), "--progress_every", "0"], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=600)
    took = time.monotonic() - began
    assert done.returncode == exits.OK, done.stderr[-3000:]
    assert {r["text"] for r in parquet_rows(str(out)).values()} == {"the cat sat", "the dog ran"}
    assert {r["source"] for r in parquet_rows(str(out)).values()} == {corpus}
    lines = done.stderr.splitlines()
    assert all(LINE.fullmatch(x) for x in lines), lines  # the tool's own lines only
    assert not any("credentials" in x for x in lines)
    assert took < 60, took  # Beam's own look alone waited ~25 s
