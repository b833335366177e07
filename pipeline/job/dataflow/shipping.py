"""Does the staged package hold all the project code the job's steps import on a worker?

A worker installs the setup file's sdist (`workflow.tar.gz`) and unpickles each step. This
check does the same in a fresh interpreter: the sdist's top-level packages (its `top_level.txt`,
what pip would install) come first on the path, the launcher's editable-install finder is
removed (a module still loaded from the launcher's packages is an error), the working tree is
not on the path, and the whole pipeline is read back from its runner API proto.
A step that needs a module from outside the package (tests/, benchmarks/, a script's
`__main__`) fails here, on the launcher, instead of on every worker after start-up.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tarfile
import tempfile

WORKFLOW_TARBALL = "workflow.tar.gz"
TIMEOUT_S = 300

_PROBE = r"""
import json, os, sys
launcher = tuple(os.path.realpath(d) + os.sep for d in json.loads(sys.argv[1]))
sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.runners import DirectRunner
with open(sys.argv[2], "rb") as f:
    proto = beam_runner_api_pb2.Pipeline.FromString(f.read())
error = None
try:
    beam.Pipeline.from_runner_api(proto, DirectRunner(), PipelineOptions([]))
except Exception as e:
    error = f"{type(e).__name__}: {e}"
files = {n: os.path.realpath(getattr(m, "__file__", None) or "/")
         for n, m in list(sys.modules.items())}
print(json.dumps({"error": error,
                  "from_launcher": sorted(n for n, f in files.items() if f.startswith(launcher)),
                  "project": sorted(n for n in files if n.split(".")[0] in sys.argv[3:])}))
"""


class NotShipped(ValueError):
    """A step needs code that the staged package does not contain."""


def sdist_of(staged: list[dict]) -> str | None:
    for item in staged:
        if item["name"] == WORKFLOW_TARBALL and item.get("local_path"):
            return item["local_path"]
    return None


def _install_like_pip(sdist: str, target: str) -> list[str]:
    """Unpacks the sdist and lays its packages out as pip's build would (setup.py's build_py,
    which maps the repository's folders into the one import package); returns the top-level
    package names."""
    unpacked = os.path.join(target, "sdist")
    with tarfile.open(sdist) as tar:
        tar.extractall(unpacked, filter="data")
    top_level = glob.glob(os.path.join(unpacked, "*", "*.egg-info", "top_level.txt"))
    if not top_level:
        raise NotShipped(f"{sdist} has no *.egg-info/top_level.txt; is it a setup.py sdist?")
    with open(top_level[0], encoding="utf-8") as f:
        names = [line.strip() for line in f if line.strip()]
    root = os.path.dirname(os.path.dirname(top_level[0]))
    site = os.path.join(target, "site")
    done = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", site],
                          cwd=root, capture_output=True, text=True, timeout=TIMEOUT_S)
    if done.returncode != 0:
        raise NotShipped(f"the staged sdist does not build: {done.stderr.strip()[-500:]}")
    return names


def check(proto, staged: list[dict], launcher_dirs: list[str]) -> dict:
    """{'packages', 'project_modules'}; NotShipped when a step cannot be read back."""
    sdist = sdist_of(staged)
    if sdist is None:
        raise NotShipped("nothing staged holds the project's code: pass --setup_file ./setup.py")
    with tempfile.TemporaryDirectory(prefix="beam-embed-ship-") as tmp:
        packages = _install_like_pip(sdist, tmp)
        proto_file = os.path.join(tmp, "pipeline.pb")
        with open(proto_file, "wb") as f:
            f.write(proto.SerializeToString())
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["PYTHONPATH"] = os.path.join(tmp, "site")
        argv = [sys.executable, "-c", _PROBE, json.dumps(launcher_dirs), proto_file, *packages]
        done = subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
    if done.returncode != 0:
        raise NotShipped(f"reading the steps back in a fresh interpreter failed: "
                         f"{done.stderr.strip().splitlines()[-1:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["error"] or result["from_launcher"]:
        raise NotShipped(
            f"a step needs code the staged package ({', '.join(packages)}) does not ship: "
            f"{result['error'] or 'modules ' + ', '.join(result['from_launcher'])}; keep worker "
            "code in the beam_embed package (pipeline/, models/ or beam_embed/)")
    return {"packages": packages, "project_modules": result["project"]}
