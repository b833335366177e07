"""Imports refused (beam_embed.process.imports): as if not installed, and only what was asked."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from beam_embed.process.imports import refused_while


def test_a_module_refused_while_a_block_runs_imports_after_it():
    name = "tabnanny"  # a standard module nothing here imports
    sys.modules.pop(name, None)
    with refused_while(name):
        with pytest.raises(ImportError):
            importlib.import_module(name)
    assert importlib.import_module(name).__name__ == name


def test_a_module_already_imported_is_not_refused():
    import json

    with refused_while("json"):
        assert importlib.import_module("json") is json
    assert sys.modules["json"] is json


def test_a_module_refused_for_the_process_fails_as_not_installed_and_others_import():
    script = ("from beam_embed.process.imports import refuse\n"
              "refuse(['tabnanny'])\n"
              "import colorsys\n"
              "try:\n"
              "    import tabnanny\n"
              "except ModuleNotFoundError as e:\n"
              "    print('refused', e.name)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, env={"PYTHONPATH": ":".join(sys.path)})
    assert done.stdout.strip() == "refused tabnanny", done.stderr
