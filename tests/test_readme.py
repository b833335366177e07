"""The README as a new user follows it: `make run`'s command, then every block marked
`<!-- runs offline -->` exactly as written, in a fresh folder; the "Reading the output" snippets
on that run and on a run with another model, pooling and no metadata; no link outside the
repository."""

from __future__ import annotations

import glob
import os
import re
import shlex

import pytest

from beam_embed.pipeline.cli import main as cli
from tests.job_helpers import parquet_rows, run_job, write_lines

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARK = "<!-- runs offline -->"


def _read(name: str) -> str:
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        return f.read()


def offline_commands() -> list[str]:
    """Each command of the marked bash blocks, continuation lines joined, in README order."""
    blocks = re.findall(re.escape(MARK) + r"\n```bash\n(.*?)```", _read("README.md"), re.S)
    lines = [line for b in blocks for line in b.replace("\\\n", " ").splitlines()]
    return [line for line in lines if line.strip() and not line.startswith("#")]


def make_run() -> list[str]:
    """`make run`'s command line from the Makefile, without the venv path and $(ARGS)."""
    recipe = re.search(r"^run:.*\n\t(.*)$", _read("Makefile"), re.M).group(1)
    words = shlex.split(recipe.replace("$(ARGS)", ""))
    assert words[0] == "$(VENV)/bin/beam-embed"
    return words[1:]


def snippets() -> list[str]:
    section = _read("README.md").split("## Reading the output", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A fresh folder after `make run`: the sample corpus embedded with the default model."""
    folder = tmp_path_factory.mktemp("clone")
    patch = pytest.MonkeyPatch()
    patch.chdir(folder)
    patch.setenv("BEAM_EMBED_CACHE", str(folder / "cache"))  # MiniLM exported on first use
    assert cli(make_run()) == 0
    yield folder
    patch.undo()


@pytest.fixture(scope="module")
def other_run(tiny_export, tmp_path_factory):
    """Another model and pooling, text input, no id or metadata fields."""
    folder = tmp_path_factory.mktemp("other")
    texts = ["the cat sat on the mat", "a dog ran", "the river bank", "money is big", "play"]
    corpus = write_lines(str(folder / "c.txt"), texts)
    run_job(str(folder / "output" / "embeddings"), "--input", corpus, "--model", tiny_export,
            "--pooling", "cls")
    return folder


def test_the_marked_blocks_hold_the_next_five_minutes():
    commands = [shlex.split(c)[1] for c in offline_commands()]
    assert commands[:4] == ["pca", "search", "eval", "tokens"] and "similarity" in commands


def test_offline_commands_run_as_written(clone, capsys):
    out = {}
    for command in offline_commands():
        argv = shlex.split(command)
        assert argv[0] == "beam-embed", command
        assert cli(argv[1:]) == 0, command
        out[command] = capsys.readouterr()
        assert "Traceback" not in out[command].err, command
    assert (clone / "output" / "viz" / "plot.html").stat().st_size > 0
    assert (clone / "output" / "viz" / "plot.png").stat().st_size > 0
    by_name = {}  # each command's first use: the five minutes' block
    for command, captured in out.items():
        by_name.setdefault(shlex.split(command)[1], captured.out)
    # the five sentences closest to "interest rates and inflation" are all about finance
    hits = re.findall(r"^\s+\d\. [\d.]+\s+(\S+)", by_name["search"], re.M)
    assert len(hits) >= 5 and all(h.startswith("finance-") for h in hits[:5])
    row = by_name["eval"].splitlines()[2].split()  # minilm  mean  300  spearman  pearson
    assert row[:3] == ["minilm", "mean", "300"] and float(row[3]) > 0.7
    assert by_name["tokens"].splitlines()[3].split()[0] == "The"
    assert "cell" in by_name["similarity"]


@pytest.mark.parametrize("index", range(3))
@pytest.mark.parametrize("run", ["clone", "other_run"])
def test_reading_the_output_snippets_work_on_any_run(run, index, request, capsys, monkeypatch):
    folder = request.getfixturevalue(run)
    monkeypatch.chdir(folder)
    rows = parquet_rows("output/embeddings")
    width = len(next(iter(rows.values()))["mean" if run == "clone" else "cls"])
    assert len(snippets()) == 3
    exec(compile(snippets()[index], f"README snippet {index}", "exec"), {})
    printed = capsys.readouterr().out
    expected = [f"({len(rows)}, {width})", repr(min(rows)),
                f"({min(len(rows), 64)},) ({min(len(rows), 64)}, {width})"][index]
    assert expected in printed


def api_snippets() -> list[str]:
    section = _read("README.md").split("## Use it from Python", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_python_api_examples_run_as_written(clone, capsys, monkeypatch):
    monkeypatch.chdir(clone)
    rows = parquet_rows("output/embeddings")
    printed = []
    for index, code in enumerate(api_snippets()):
        exec(compile(code, f"README API example {index}", "exec"), {})
        printed.append(capsys.readouterr().out)
    assert len(printed) == 5
    lines = sorted(printed[0].splitlines())
    assert lines[0] == "not embedded: q3 empty text"
    assert lines[1].startswith("q1 (384,) ") and lines[2].startswith("q2 (384,) ")
    written = parquet_rows("output/from_python")  # what `run` writes, read as a run is
    assert sorted(written) == ["q1", "q2"] and len(written["q1"]["mean"]) == 384
    assert printed[1] == "q1 float32 (384,)\n"
    assert printed[2] == "1 384 384\n"
    assert printed[3] == (f"({len(rows)}, 384) ['id', 'text', 'source', 'topic', 'num_tokens', "
                          "'truncated']\n")
    first, tokens = printed[4].splitlines()
    assert first.startswith("(2, 384) 0.") and tokens.startswith("[('The', ['the']), ('BRCA1', ")


def test_docs_point_at_nothing_outside_the_repository():
    for name in ["README.md", *glob.glob("docs/*.md", root_dir=ROOT)]:
        text = _read(name)
        assert not re.search(r"(^|[\s(`'\"=])\.\./", text, re.M), name  # a path going up
        assert "/work/" not in text, name
        for target in re.findall(r"\]\(([^)#]+)\)", text):
            if not target.startswith("http"):
                path = os.path.join(ROOT, os.path.dirname(name), target)
                assert os.path.exists(path), f"{name} links to missing {target}"


def compact_snippet() -> str:
    section = _read("README.md").split("### Compact vectors", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    return code


@pytest.fixture(scope="module")
def float32_run(tiny_export, tmp_path_factory):
    folder = tmp_path_factory.mktemp("compact")
    texts = ["the cat sat on the mat", "a dog ran", "the river bank", "money is big", "play",
             "the bank is big and the river is small"]
    corpus = write_lines(str(folder / "c.txt"), texts)
    run_job(str(folder / "float32"), "--input", corpus, "--model", tiny_export,
            "--pooling", "mean")
    return corpus, {rid: row["mean"] for rid, row in parquet_rows(str(folder / "float32")).items()}


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "binary"])
def test_compact_vectors_snippet_decodes_every_dtype(dtype, float32_run, tiny_export, tmp_path,
                                                    capsys, monkeypatch):
    import numpy as np
    import pyarrow.parquet as pq

    corpus, exact = float32_run
    manifest = run_job(str(tmp_path / "output" / "embeddings"), "--input", corpus, "--model",
                       tiny_export, "--pooling", "mean", "--vector_dtype", dtype)
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(compact_snippet(), "README compact-vectors snippet", "exec"), scope)
    assert f"{dtype} ({len(exact)}, 8)" in capsys.readouterr().out
    files = [f"output/embeddings/{n}" for n in manifest["files"]["parquet"]]
    ids = pq.read_table(files, columns=["id"]).column(0).to_pylist()  # the snippet's row order
    want = np.stack([exact[i] for i in ids])
    got = scope["vectors"]
    if dtype == "binary":  # the signs, as +1/-1
        np.testing.assert_array_equal(got, np.where(want > 0, 1.0, -1.0))
    elif dtype == "int8":  # within half a step of its dimension's calibrated range
        step = np.float32(manifest["poolings"][0]["scale"])
        assert (np.abs(got - want) <= step / 2 + 1e-5).all()
    else:
        tolerance = {"float32": 1e-6, "float16": 1e-3 * np.abs(want).max()}[dtype]
        np.testing.assert_allclose(got, want, atol=tolerance, rtol=0)
