"""A library leaves its host process as it found it: importing `beam_embed` and constructing each
public transform changes no environment variable, warnings filter, logger (level, handlers,
filters), import hook, and loads no TensorFlow, measured in a fresh interpreter against one that
imported the same third-party modules first (what importing Beam or numpy does is theirs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

SNAPSHOT = """
import json, logging, os, sys, warnings

def snapshot():
    loggers = {name: [logger.level, len(logger.handlers), len(logger.filters), logger.propagate]
               for name, logger in [("", logging.getLogger()), *[
                   (n, l) for n, l in sorted(logging.root.manager.loggerDict.items())
                   if isinstance(l, logging.Logger)]]}
    return {"environ": dict(os.environ), "filters": [repr(f) for f in warnings.filters],
            "loggers": loggers, "meta_path": [repr(f) for f in sys.meta_path]}
"""
# Importing beam_embed and constructing each public name the README shows.
USE = """
import beam_embed
from beam_embed import (EmbedTexts, EmbeddingModelHandler, TextEmbeddings, WriteEmbeddings,
                        load_encoder)
model, out = sys.argv[1], sys.argv[2]
EmbedTexts(model=model, pooling=["mean", "cls"], max_seq_length=16)
EmbeddingModelHandler(model=model, pooling="mean", max_batch_weight=64, large_model=True)
TextEmbeddings(columns=["title"], model=model, large_model=True, model_copies=2)
WriteEmbeddings(out, format=["parquet"], overwrite=True)
load_encoder(model, pooling="mean")
for name in beam_embed.__all__:
    getattr(beam_embed, name)
"""


def _python(code: str, *argv: str) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter with a user's environment (none of the tests' settings)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("TF_CPP_MIN_LOG_LEVEL", "BEAM_EMBED_VERBOSE")}
    env["PYTHONPATH"] = ":".join(sys.path)
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          env=env, timeout=600)


def _json(out: subprocess.CompletedProcess):
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def test_importing_and_constructing_leaves_the_host_process_as_it_was(tiny_export, tmp_path):
    argv = (tiny_export, str(tmp_path / "out"))
    # the modules the import and construction load that are not the project's
    loaded = _json(_python("import sys, json\nbefore = set(sys.modules)\n" + USE +
                           "print(json.dumps(sorted(m for m in set(sys.modules) - before if "
                           "not m.startswith(('beam_embed', '__main__')))))", *argv))
    assert "tensorflow" not in loaded and not [m for m in loaded if m.startswith("tensorflow")]
    found = _json(_python(
        "import importlib, sys\n"
        f"for name in {loaded!r}:\n"
        "    try:\n        importlib.import_module(name)\n    except Exception:\n        pass\n"
        + SNAPSHOT + "before = snapshot()\n" + USE +
        "after = snapshot()\n"
        "print(json.dumps([before, after, 'tensorflow' in sys.modules]))", *argv))
    before, after, tensorflow = found
    assert not tensorflow
    assert after["environ"] == before["environ"]
    assert after["filters"] == before["filters"]
    assert after["meta_path"] == before["meta_path"]
    changed = {n: (before["loggers"].get(n), v) for n, v in after["loggers"].items()
               if before["loggers"].get(n, [0, 0, 0, True]) != v}
    assert changed == {}


def test_the_command_still_tunes_its_own_process_at_its_entry(tiny_export, tmp_path):
    """What the library no longer does, the command's entry point does (tests/test_quiet.py
    checks its output)."""
    out = _json(_python(
        "import json, logging, os, sys\n"
        "from beam_embed.process import enter\n"
        "enter('tokens', ['a cat'])\n"
        "print(json.dumps([os.environ.get('BEAM_EMBED_VERBOSE'), "
        "os.environ.get('TF_CPP_MIN_LOG_LEVEL'), logging.getLogger('absl').level]))"))
    assert out == ["0", "3", 40]
