"""A process's entry (beam_embed.process.enter): every command's set-up, and the job's own tuning
for `run` only. Each case is a fresh interpreter, as a process entry is."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from beam_embed.process.job_process import NEVER_IMPORTED, NOT_IN_LOCAL_RUNS

ENTER = """
import gc, json, os, sys
from beam_embed.process import enter
enter(sys.argv[1], sys.argv[3:], local=sys.argv[2] == "local")
refuse = [f for f in sys.meta_path if type(f).__name__ == "_Refuse"]
print(json.dumps({
    "collecting": gc.isenabled(),
    "refused": sorted(refuse[0].names) if refuse else [],
    "verbose": os.environ.get("BEAM_EMBED_VERBOSE"),
    "tf_log_level": os.environ.get("TF_CPP_MIN_LOG_LEVEL"),
    "heavy": sorted({m.split(".")[0] for m in sys.modules} &
                    {"apache_beam", "numpy", "pyarrow", "tensorflow"} |
                    {"google.auth"} & set(sys.modules))}))
"""


def _enter(command: str, local: bool, *argv: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("TF_CPP_MIN_LOG_LEVEL", "BEAM_EMBED_VERBOSE")}  # as a user's shell
    env["PYTHONPATH"] = ":".join(sys.path)
    done = subprocess.run([sys.executable, "-c", ENTER, command, "local" if local else "other",
                           *argv], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("local", [True, False])
def test_a_run_process_is_tuned_as_the_jobs_own(local):
    seen = _enter("run", local, "--input", "corpus.txt")
    assert not seen["collecting"]
    assert seen["refused"] == sorted(NEVER_IMPORTED + (NOT_IN_LOCAL_RUNS if local else ()))
    assert (seen["verbose"], seen["tf_log_level"]) == ("0", "3")
    assert seen["heavy"] == []  # before TensorFlow, Beam or numpy load


def test_another_command_gets_the_set_up_only_and_verbose_leaves_tensorflow_its_level():
    seen = _enter("pca", False, "--input", "out", "-v")
    assert seen["collecting"] and seen["refused"] == []
    assert (seen["verbose"], seen["tf_log_level"]) == ("1", None)
    assert seen["heavy"] == []
