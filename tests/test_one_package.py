"""One import package: beam-embed installs `beam_embed` only, so a user's own `models/` and
`pipeline/` packages (names half of all ML projects use) never mix with the project's. Every
command runs from a folder whose own packages of those names come first on sys.path; importing
either of them there fails loudly, so any import of the bare names by the project would show.
(A plain install's site-packages holding neither name: tests/test_plain_install.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from beam_embed.pipeline.cli import COMMANDS

SHADOW = 'raise ImportError("the user\'s own {name} package was imported by beam-embed")\n'


@pytest.fixture
def user_folder(tmp_path):
    """A folder with the user's own `models` and `pipeline` packages, and an environment that
    puts it first on sys.path (for console scripts too, whose sys.path[0] is their bin folder)."""
    for name in ("models", "pipeline"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(SHADOW.format(name=name))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    return tmp_path, env


def _run(argv, folder, env, limit=300) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True,
                          timeout=limit)


def test_the_users_packages_are_theirs_and_beam_embed_is_whole(user_folder):
    folder, env = user_folder
    probe = ("import importlib, json, sys\n"
             "import beam_embed.pipeline.cli, beam_embed.models.spec\n"
             "errors = {}\n"
             "for name in ('models', 'pipeline'):\n"
             "    try:\n"
             "        importlib.import_module(name)\n"
             "    except ImportError as e:\n"
             "        errors[name] = str(e)\n"
             "print(json.dumps({'errors': errors, 'files': [beam_embed.pipeline.cli.__file__,"
             " beam_embed.models.spec.__file__]}))\n")
    out = _run([sys.executable, "-c", probe], folder, env)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert set(result["errors"]) == {"models", "pipeline"}  # the user's, as they wrote them
    assert all("user's own" in e for e in result["errors"].values())
    assert not any(f.startswith(str(folder)) for f in result["files"])


def test_every_commands_help_and_version_from_the_users_folder(user_folder):
    folder, env = user_folder
    beam_embed = os.path.join(os.path.dirname(sys.executable), "beam-embed")
    out = _run([beam_embed, "--version"], folder, env)
    assert out.returncode == 0 and out.stdout.startswith("beam-embed "), out.stderr
    for name in COMMANDS:
        out = _run([beam_embed, name, "--help"], folder, env)
        assert out.returncode == 0, f"{name}: {out.stderr}"
        assert "user's own" not in out.stderr
    for module in ("beam_embed", "beam_embed.pipeline.run", "beam_embed.pipeline.pca"):
        out = _run([sys.executable, "-m", module, *(["run"] if module == "beam_embed" else []),
                    "--help"], folder, env)
        assert out.returncode == 0 and "--output" in out.stdout, f"{module}: {out.stderr}"


@pytest.mark.pipeline
def test_a_run_and_its_pca_from_the_users_folder(user_folder, tiny_export):
    folder, env = user_folder
    (folder / "corpus.txt").write_text("".join(f"sentence number {i} about rivers\n"
                                               for i in range(12)))
    out = _run([sys.executable, "-m", "beam_embed", "run", "--input", "corpus.txt", "--model",
                tiny_export, "--output", "out", "--progress_every", "0"], folder, env, 600)
    assert out.returncode == 0, out.stderr
    manifest = json.loads((folder / "out" / "manifest.json").read_text())
    assert manifest["counts"]["embedded"] == 12
    out = _run([sys.executable, "-m", "beam_embed", "pca", "--input", "out", "--output", "viz"],
               folder, env, 600)
    assert out.returncode == 0, out.stderr
    assert (folder / "viz" / "pca.npz").stat().st_size > 0
