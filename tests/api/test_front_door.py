"""The public names: importable from `beam_embed`, each documented and listed in docs/api.md as
its docstring says, looked up lazily (importing the package, as every command does, loads
neither Beam nor numpy nor TensorFlow); and using them prints no TensorFlow start-up lines
unless the user asks for them, within the user's own logging set-up."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import beam_embed
from beam_embed.api import reference

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEAVY = ("apache_beam", "numpy", "tensorflow", "pyarrow")


def _python(code: str, cwd, env_drop=("TF_CPP_MIN_LOG_LEVEL", "BEAM_EMBED_VERBOSE"), **env):
    """`code` in a fresh interpreter with a user's environment (none of the tests' quiet)."""
    environment = {k: v for k, v in os.environ.items() if k not in env_drop}
    environment.update(PYTHONPATH=":".join(sys.path), **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=cwd, env=environment, timeout=600)


def test_importing_the_package_and_listing_its_names_loads_nothing_heavy(tmp_path):
    out = _python("import json, sys, beam_embed\n"
                  "names = sorted(beam_embed.__all__)\n"
                  "listed = all(n in dir(beam_embed) for n in names)\n"
                  f"print(json.dumps([names, listed, sorted({{m.split('.')[0] for m in "
                  f"sys.modules}} & {set(HEAVY)!r})]))", tmp_path)
    assert out.returncode == 0, out.stderr
    names, listed, heavy = json.loads(out.stdout)
    assert names == sorted(reference.ORDER) and listed and heavy == []


def test_every_public_name_is_documented_and_the_reference_is_in_sync():
    for name in beam_embed.__all__:
        obj = getattr(beam_embed, name)
        assert obj.__doc__ and len(obj.__doc__.split()) > 10, name
        assert obj.__module__.startswith("beam_embed."), name
    with open(os.path.join(ROOT, reference.PATH), encoding="utf-8") as f:
        assert f.read() == reference.reference(), \
            "docs/api.md differs from the docstrings: run python -m beam_embed.api.reference"
    with pytest.raises(AttributeError, match="has no attribute 'EmbedText'"):
        beam_embed.EmbedText  # noqa: B018


USE = """
import logging, sys
{before}
import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from beam_embed import EmbedTexts, load_encoder
with TestPipeline() as p:
    _ = p | beam.Create(["the cat sat", "a dog"]) | EmbedTexts(model={model!r}, pooling=["mean"])
print(load_encoder({model!r}).encode(["the cat"]).shape)
print(logging.getLogger("tensorflow").level)
"""


# Beam 2.77's RunInference logs this on the root logger around each model load when PyTorch is
# not installed (its `resource` import shares a try block with a module that needs PyTorch):
# Beam's own line about the host's pipeline, which the library leaves to the host's logging.
BEAMS_OWN = "WARNING:root:Resource module is not available for current platform"


@pytest.mark.pipeline
def test_using_the_api_prints_no_tensorflow_lines_unless_asked(tiny_export, tmp_path):
    quiet = _python(USE.format(before="", model=tiny_export), tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    # TensorFlow's logger level is its own (0: unset), as the library found it
    assert quiet.stdout.split() == ["(1,", "8)", "0"]
    assert [line for line in quiet.stderr.splitlines() if not line.startswith(BEAMS_OWN)] == []
    # the user's own logger level stays, and TF_CPP_MIN_LOG_LEVEL 0 asks TensorFlow to speak
    own = _python(USE.format(before='logging.getLogger("tensorflow").setLevel(logging.INFO)',
                             model=tiny_export), tmp_path, TF_CPP_MIN_LOG_LEVEL="0")
    assert own.returncode == 0, own.stderr
    assert own.stdout.split()[-1] == str(20)
    assert "I0000" in own.stderr  # TensorFlow's start-up lines, as the user asked
