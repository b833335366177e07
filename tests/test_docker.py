"""docker/: the GPU and TPU worker images' Dockerfiles and build context agree with setup.py's
pins.

Nothing is built: the Dockerfiles are parsed (ARG defaults substituted into FROM lines) and the
pins are read from setup.py's source, so a version bump in one place and not the other fails.
One test (marked `install`) resolves the TPU image's requirements on the package index.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCKER = os.path.join(REPO, "docker")
CONTEXT_LIMIT_BYTES = 64 * 1024
RESOLVE_LIMIT_S = 600


def setup_assignments() -> dict:
    """Top-level constants and the setup() keywords of setup.py, read without running it."""
    with open(os.path.join(REPO, "setup.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    out = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id.isupper()):
            out[node.targets[0].id] = ast.literal_eval(node.value)
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "python_requires":
            out["python_requires"] = ast.literal_eval(node.value)
    return out


def pins() -> dict[str, str]:
    return pinned(setup_assignments()["RUNTIME"])


def pinned(lines) -> dict[str, str]:
    """name (extras left out, spelt as pip compares names) -> exact version, of `name==version`
    lines."""
    out = {}
    for req in lines:
        name, _, version = req.partition("==")
        out[re.sub(r"[-_.]+", "-", re.sub(r"\[.*\]", "", name)).lower()] = version
    return out


def dockerfile(name: str = "Dockerfile") -> tuple[list[tuple[str, str]], dict[str, str]]:
    """(instruction, resolved arguments) per instruction, and the global ARG defaults."""
    with open(os.path.join(DOCKER, name), encoding="utf-8") as f:
        text = re.sub(r"\\\n", " ", f.read())
    args, out, seen_from = {}, [], False
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, rest = line.partition(" ")
        instruction = instruction.upper()
        if instruction == "ARG" and not seen_from and "=" in rest:
            key, _, value = rest.partition("=")
            args[key.strip()] = value.strip()
        seen_from |= instruction == "FROM"
        rest = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), rest)
        out.append((instruction, rest.strip()))
    return out, args


def test_base_images_match_the_pins():
    instructions, args = dockerfile()
    images = [rest.split()[0] for ins, rest in instructions if ins == "FROM"]
    p = pins()
    python = setup_assignments()["python_requires"].lstrip(">=~")
    assert args["PYTHON_VERSION"] == python
    assert images == [f"apache/beam_python{python}_sdk:{p['apache-beam']}",
                      f"tensorflow/tensorflow:{p['tensorflow']}-gpu"]
    assert (args["BEAM_VERSION"], args["TF_VERSION"]) == (p["apache-beam"], p["tensorflow"])


def test_image_runs_the_beam_harness_with_memory_growth():
    instructions, _ = dockerfile()
    assert ("COPY", "--from=beam_sdk /opt/apache/beam /opt/apache/beam") in instructions
    assert instructions[-1] == ("ENTRYPOINT", '["/opt/apache/beam/boot"]')
    env = " ".join(rest for ins, rest in instructions if ins == "ENV")
    assert "TF_FORCE_GPU_ALLOW_GROWTH=true" in env


def requirement_lines(name: str) -> list[str]:
    with open(os.path.join(DOCKER, name), encoding="utf-8") as f:
        return [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]


TPU_BUILT = ("tensorflow", "tensorflow-text", "tf-keras")  # at the TPU build's TensorFlow


def test_tpu_image_is_beam_s_image_with_tensorflow_s_tpu_build_at_its_pins():
    instructions, args = dockerfile("Dockerfile.tpu")
    p, tpu = pins(), pinned(requirement_lines("requirements-tpu.txt"))
    python = setup_assignments()["python_requires"].lstrip(">=~")
    assert [rest for ins, rest in instructions if ins == "FROM"] == [
        f"apache/beam_python{python}_sdk:{p['apache-beam']}"]
    assert (args["PYTHON_VERSION"], args["BEAM_VERSION"], args["TF_VERSION"]) == (
        python, p["apache-beam"], tpu["tensorflow"])
    runs = [rest for ins, rest in instructions if ins == "RUN"]
    assert "-r /tmp/beam-embed-requirements-tpu.txt" in runs[0]  # the pins, then the TPU build
    assert f'"tensorflow-tpu=={tpu["tensorflow"]}"' in runs[1]  # the ARG, substituted
    assert "-c /tmp/beam-embed-requirements-tpu.txt" in runs[1]  # nothing else moves
    assert "md.version('tensorflow-tpu')" in runs[2]  # the build checks what it installed
    env = [rest for ins, rest in instructions if ins == "ENV"]
    assert "PIP_NO_DEPS=1" in env  # the staged package's plain TensorFlow pin left uninstalled
    assert instructions[-1] == ("ENTRYPOINT", '["/opt/apache/beam/boot"]')
    sources = [rest.split()[0] for ins, rest in instructions if ins == "COPY"]
    assert sources == ["requirements-tpu.txt"]


def test_tpu_requirements_are_the_runtime_pins_but_for_the_tpu_builds_tensorflow():
    lines = requirement_lines("requirements-tpu.txt")
    assert all("==" in req for req in lines), "every worker requirement is pinned exactly"
    runtime, tpu = pinned(setup_assignments()["RUNTIME"]), pinned(lines)
    assert set(tpu) == set(runtime) | {"libtpu"}
    assert {k: v for k, v in tpu.items() if k not in (*TPU_BUILT, "libtpu")} == \
        {k: v for k, v in runtime.items() if k not in TPU_BUILT}
    series = ".".join(tpu["tensorflow"].split(".")[:2])  # built against that TensorFlow
    assert all(tpu[name].startswith(series + ".") for name in TPU_BUILT), tpu


@pytest.mark.pipeline  # out of the quick loop: it asks the package index
@pytest.mark.install
def test_tpu_requirements_resolve_on_the_package_index(tmp_path):
    """What Dockerfile.tpu installs, resolved as one set by pip on the package index, nothing
    installed counted (this machine's Python and platform are the image's: 3.11, x86-64
    Linux): every pin exists, and they and tensorflow-tpu's own requirements agree."""
    _, args = dockerfile("Dockerfile.tpu")
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
         "--report", str(report), "-r", os.path.join(DOCKER, "requirements-tpu.txt"),
         f"tensorflow-tpu=={args['TF_VERSION']}"],
        capture_output=True, text=True, timeout=RESOLVE_LIMIT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    resolved = pinned(f"{i['metadata']['name']}=={i['metadata']['version']}"
                      for i in json.loads(report.read_text())["install"])
    wanted = pinned(requirement_lines("requirements-tpu.txt"))
    assert {name: resolved.get(name) for name in wanted} == wanted
    assert resolved["tensorflow-tpu"] == args["TF_VERSION"]


def test_tpu_config_names_an_image_built_from_these_pins():
    with open(os.path.join(REPO, "configs", "dataflow_tpu.yaml"), encoding="utf-8") as f:
        config = yaml.safe_load(f)
    p, tpu = pins(), pinned(requirement_lines("requirements-tpu.txt"))
    assert config["sdk_container_image"].endswith(
        f"/tpu:tf{tpu['tensorflow']}-beam{p['apache-beam']}")
    assert config["accelerator"] == "tpu" and config["machine_type"] == "ct5lp-hightpu-1t"


def test_requirements_are_setup_py_runtime_pins():
    lines = requirement_lines("requirements.txt")
    assert lines == setup_assignments()["RUNTIME"]
    assert all("==" in req for req in lines), "every worker requirement is pinned exactly"


def test_build_context_is_small_and_holds_what_is_copied():
    instructions, _ = dockerfile()
    sources = [rest.split()[0] for ins, rest in instructions
               if ins == "COPY" and not rest.startswith("--from")]
    assert sources == ["requirements.txt"]
    for src in sources:
        assert os.path.isfile(os.path.join(DOCKER, src))
    size = sum(os.path.getsize(os.path.join(root, f))
               for root, _, files in os.walk(DOCKER) for f in files)
    assert size < CONTEXT_LIMIT_BYTES


def test_gpu_config_names_an_image_built_from_these_pins():
    with open(os.path.join(REPO, "configs", "dataflow_gpu.yaml"), encoding="utf-8") as f:
        image = yaml.safe_load(f)["sdk_container_image"]
    p = pins()
    assert image.endswith(f":tf{p['tensorflow']}-beam{p['apache-beam']}")
