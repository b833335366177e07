"""`beam-embed` itself: the command list, help, --version, unknown commands, and help that
answers without loading Beam, numpy or TensorFlow."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from importlib.metadata import version

import pytest

from beam_embed.pipeline.cli import COMMANDS, main
from beam_embed.process.private_apis.stdlib import option_strings

HEAVY = ("apache_beam", "tensorflow", "numpy", "pyarrow")
# Each help runs in a fresh interpreter and prints the heavy packages it loaded and its text.
HELP = """
import contextlib, io, json, sys
from beam_embed.pipeline.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        code = main({argv!r})
    except SystemExit as e:
        code = e.code
print(json.dumps({{"code": code, "text": out.getvalue(),
                  "heavy": sorted({{m.split(".")[0] for m in sys.modules}} & {heavy!r})}}))
"""


def _help(argv: list[str], tmp_path) -> dict:
    out = subprocess.run([sys.executable, "-c", HELP.format(argv=argv, heavy=set(HEAVY))],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120,
                         env={"PYTHONPATH": ":".join(sys.path)})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _options(command: str) -> set[str]:
    """Every option string the command's help must show (one spelling of each)."""
    if command == "run":
        from beam_embed.pipeline.job.argv import help_parser
        parser = help_parser()
    else:
        parser = importlib.import_module(COMMANDS[command][0]).parser()
    strings = option_strings(parser)
    return {s for s in strings if not ("_" in s[2:] and s.replace("_", "-") in strings)}


def test_help_lists_every_command_with_one_line(capsys):
    for argv in (["--help"], ["-h"], ["help"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        for name, (_, summary) in COMMANDS.items():
            assert f"  {name}" in out and summary in out
        assert "--version" in out and "--verbose" in out


def test_no_command_prints_the_list_and_fails(capsys):
    assert main([]) == 2
    assert "commands:" in capsys.readouterr().err


def test_version_is_the_package_metadata(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"beam-embed {version('beam-embed')}\n"


@pytest.mark.parametrize("name, message", [
    ("serch", "unknown command 'serch'; did you mean search?"),
    ("embed", "unknown command 'embed'; expected one of run, pca, search, eval"),
])
def test_unknown_command_is_one_line_with_a_hint(name, message, capsys):
    assert main([name]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_is_light_and_lists_every_option(command, tmp_path):
    result = _help([command, "--help"], tmp_path)
    assert result["code"] == 0 and result["heavy"] == []
    missing = [o for o in _options(command) if o not in result["text"]]
    assert not missing, f"{command} --help omits {missing}"
    assert "--verbose" in result["text"] and "either spelling" in result["text"]
    if command in ("run", "pca"):
        assert "Beam's own options" in result["text"] and "--help-beam" in result["text"]


def test_help_with_a_command_name_is_that_commands_help(tmp_path):
    assert _help(["help", "pca"], tmp_path)["text"] == _help(["pca", "--help"], tmp_path)["text"]


def test_run_help_shows_defaults_and_config(tmp_path):
    text = _help(["run", "--help"], tmp_path)["text"]
    assert "--config FILE.yaml" in text
    assert "(default: output/embeddings)" in text and "(default: 512)" in text
