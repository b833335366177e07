"""The README and docs/ as a new user follows them: `make run`'s command, then every block marked
`<!-- runs offline -->` exactly as written, in a fresh folder, in reading order (README.md, then
the docs/ pages in the order the README links them); the "Reading the output" snippets
(docs/reading.md) on that run and on a run with another model, pooling and no metadata; no link
outside the repository, none to a missing file or heading."""

from __future__ import annotations

import contextlib
import glob
import io
import json
import os
import re
import shlex

import numpy as np
import pytest

from beam_embed.pipeline.cli import main as cli
from tests.job_helpers import parquet_rows, run_job, write_lines

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARK = "<!-- runs offline -->"


def _read(name: str) -> str:
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        return f.read()


def reading_order() -> list[str]:
    """README.md, then each docs/ page in the order the README first links it, then any page it
    does not link (none: a test checks), so a block that reads what an earlier one wrote (`make
    run`'s output, then pca, search, store) runs after it."""
    linked = re.findall(r"\]\((docs/[^)#]+\.md)(?:#[^)]*)?\)", _read("README.md"))
    pages = list(dict.fromkeys(linked))
    rest = sorted(set(glob.glob("docs/*.md", root_dir=ROOT)) - set(pages))
    return ["README.md", *pages, *rest]


def section(name: str, title: str) -> str:
    """The text under heading `title` in file `name`, up to the next heading of its level or
    above (code blocks' `#` lines are not headings)."""
    lines, out, level, fence = _read(name).splitlines(), None, 0, False
    for line in lines:
        fence = fence != line.lstrip().startswith("```")
        heading = re.match(r"(#+) (.*)", line) if not fence else None
        if out is None:
            if heading and heading.group(2) == title:
                out, level = [], len(heading.group(1))
        elif heading and len(heading.group(1)) <= level:
            break
        else:
            out.append(line)
    assert out is not None, f"{name} has no heading {title!r}"
    return "\n".join(out)


def offline_commands() -> list[str]:
    """Each command of the marked bash blocks, continuation lines joined, in reading order."""
    blocks = [b for name in reading_order()
              for b in re.findall(re.escape(MARK) + r"\n```bash\n(.*?)```", _read(name), re.S)]
    lines = [line for b in blocks for line in b.replace("\\\n", " ").splitlines()]
    return [line for line in lines if line.strip() and not line.startswith("#")]


def make_run() -> list[str]:
    """`make run`'s command line from the Makefile, without the venv path and $(ARGS)."""
    recipe = re.search(r"^run:.*\n\t(.*)$", _read("Makefile"), re.M).group(1)
    words = shlex.split(recipe.replace("$(ARGS)", ""))
    assert words[0] == "$(VENV)/bin/beam-embed"
    return words[1:]


def snippets() -> list[str]:
    return re.findall(r"```python\n(.*?)```", section("docs/reading.md", "Reading the output"),
                      re.S)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """A fresh folder after `make run` (the sample corpus embedded with the default model, the
    model exported on first use), and what that run printed on stderr."""
    folder = tmp_path_factory.mktemp("clone")
    patch = pytest.MonkeyPatch()
    patch.chdir(folder)
    patch.setenv("BEAM_EMBED_CACHE", str(folder / "cache"))  # as on a fresh machine
    printed = io.StringIO()
    with contextlib.redirect_stderr(printed):
        assert cli(make_run()) == 0
    yield folder, printed.getvalue()
    patch.undo()


@pytest.fixture(scope="module")
def clone(first_run):
    return first_run[0]


def test_the_first_run_says_what_it_does_from_its_first_line(first_run):
    """The one-time export says what it does and how long it took, then the run names its
    input's id and metadata fields, found by default."""
    lines = [x.split("] ", 1)[1] for x in first_run[1].splitlines() if x.startswith("[beam-")]
    assert lines[0].startswith("exporting all-MiniLM-L6-v2 from ") and "once" in lines[0]
    assert re.fullmatch(r"exported all-MiniLM-L6-v2 in [\d.]+s \(\d+ MB\)", lines[1])
    assert lines[2].startswith("embedding 1 file(s) with all-MiniLM-L6-v2 (poolings mean) into "
                               "output/embeddings; ids from field 'id' (--id_field names "
                               "another), metadata columns topic (the input's fields;")


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
    assert not (clone / "output" / "sample" / "pairs.tsv").exists()  # eval writes nothing here
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
    return re.findall(r"```python\n(.*?)```", section("docs/python.md", "Use it from Python"),
                      re.S)


def test_the_readme_python_examples_are_tested_ones():
    """The README's short "Use it from Python" shows examples of docs/python.md, which run."""
    shown = re.findall(r"```python\n(.*?)```", section("README.md", "Use it from Python"), re.S)
    assert shown and all(code in api_snippets() for code in shown)


def test_the_python_api_examples_run_as_written(clone, capsys, caplog, monkeypatch):
    monkeypatch.chdir(clone)
    rows = parquet_rows("output/embeddings")
    printed = []
    for index, code in enumerate(api_snippets()):
        exec(compile(code, f"README API example {index}", "exec"), {})
        printed.append(capsys.readouterr().out)
    assert len(printed) == 5
    # Beam's MLTransform type-hint warning, which the MLTransform example's options keep out
    assert not [r for r in caplog.records if "type hint will be ignored" in r.getMessage()]
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


DTYPES = ["float32", "float16", "int8", "binary"]
TEXTS = ["the cat sat on the mat", "a dog ran", "the river bank", "money is big", "play",
         "the bank is big and the river is small", "a cat and a dog", "the small mat"]


@pytest.fixture(scope="module")
def dtype_corpus(tmp_path_factory) -> str:
    """The user's own JSONL: ids and a metadata field, found by default."""
    folder = tmp_path_factory.mktemp("dtype_corpus")
    return write_lines(str(folder / "c.jsonl"), [
        json.dumps({"id": f"t{i}", "text": t, "topic": "animals" if i % 2 else "things"})
        for i, t in enumerate(TEXTS)])


@pytest.fixture(scope="module", params=DTYPES)
def dtype_run(request, dtype_corpus, tiny_export, tmp_path_factory):
    """(folder holding output/embeddings, its manifest) of a run storing `dtype` vectors."""
    folder = tmp_path_factory.mktemp(request.param)
    manifest = run_job(str(folder / "output" / "embeddings"), "--input", dtype_corpus,
                       "--model", tiny_export, "--pooling", "mean",
                       "--vector_dtype", request.param)
    assert manifest.get("vector_dtype", "float32") == request.param
    assert manifest["metadata_columns"] == ["topic"]
    return folder, manifest


@pytest.fixture(scope="module")
def exact(dtype_corpus, tiny_export, tmp_path_factory) -> dict:
    """Each record's float32 vector, from a float32 run's Parquet read by the tests' reader."""
    out = str(tmp_path_factory.mktemp("exact") / "out")
    run_job(out, "--input", dtype_corpus, "--model", tiny_export, "--pooling", "mean")
    return {rid: np.asarray(row["mean"], np.float32) for rid, row in parquet_rows(out).items()}


def _close_to_exact(got, ids, exact: dict, manifest: dict) -> None:
    """`got` [records, width] matches the float32 vectors as its dtype stores them."""
    want = np.stack([exact[i] for i in ids])
    dtype = manifest.get("vector_dtype", "float32")
    assert got.dtype == np.float32 and got.shape == want.shape
    if dtype == "binary":  # the signs, as +1/-1
        np.testing.assert_array_equal(got, np.where(want > 0, 1.0, -1.0))
    elif dtype == "int8":  # within half a step of its dimension's calibrated range
        step = np.float32(manifest["poolings"][0]["scale"])
        assert (np.abs(got - want) <= step / 2 + 1e-5).all()
    else:
        tolerance = {"float32": 1e-6, "float16": 1e-3 * np.abs(want).max()}[dtype]
        np.testing.assert_allclose(got, want, atol=tolerance, rtol=0)


@pytest.mark.parametrize("index", range(3))
def test_reading_the_output_snippets_decode_every_dtype(index, dtype_run, exact, capsys,
                                                         monkeypatch):
    folder, manifest = dtype_run
    monkeypatch.chdir(folder)
    scope = {}
    exec(compile(snippets()[index], f"README snippet {index}", "exec"), scope)
    printed = capsys.readouterr().out
    if index == 0:  # pandas
        assert "topic" in printed and f"({len(TEXTS)}, 8)" in printed
        _close_to_exact(scope["vectors"], list(scope["df"]["id"]), exact, manifest)
    elif index == 1:  # DuckDB: the cosines of the vectors as stored, by another decoder
        import pyarrow.parquet as pq

        from beam_embed.pipeline.common.finished_run.embedding_set import load_embedding_set
        from beam_embed.pipeline.common.rows.vector_dtypes import read_back

        es = load_embedding_set("output/embeddings")
        pooling, table = es.poolings[0], pq.read_table(list(es.files["parquet"]))
        stored = dict(zip(table["id"].to_pylist(),
                          read_back(table[pooling.column], pooling.stored(), pooling.column)))
        unit = {i: v / np.linalg.norm(v) for i, v in stored.items()}
        first = min(unit)
        scores = sorted((float(unit[first] @ v) for v in unit.values()), reverse=True)[:3]
        rows = scope["rows"]  # the top three (ties in either order: 8 signs often tie)
        assert len(rows) == 3 and rows[0][2] == pytest.approx(1.0, abs=1e-5)
        np.testing.assert_allclose([r[2] for r in rows], scores, atol=1e-5)
        np.testing.assert_allclose([r[2] for r in rows], [unit[first] @ unit[r[0]] for r in rows],
                                   atol=1e-5)
    else:  # tf.data
        batch = scope["batch"]
        ids = [i.decode() for i in batch["id"].numpy()]
        _close_to_exact(batch["mean"].numpy(), ids, exact, manifest)


def _anchors(name: str) -> set[str]:
    """The fragments GitHub gives a file's headings: lower case, punctuation dropped, spaces as
    hyphens, a repeated one numbered."""
    seen, fence = {}, False
    for line in _read(name).splitlines():
        fence = fence != line.lstrip().startswith("```")
        heading = re.match(r"#+ (.*)", line) if not fence else None
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
            seen[slug] = seen.get(slug, -1) + 1
            seen.setdefault(f"{slug}-{seen[slug]}" if seen[slug] else slug, 0)
    return set(seen)


def test_docs_point_at_nothing_outside_the_repository():
    for name in ["README.md", *glob.glob("docs/*.md", root_dir=ROOT)]:
        text = _read(name)
        assert not re.search(r"(^|[\s(`'\"=])\.\./", text, re.M), name  # a path going up
        assert "/work/" not in text, name
        for target, anchor in re.findall(r"\]\(([^)#]*)(?:#([^)]*))?\)", text):
            if target.startswith("http"):
                continue
            file = (os.path.normpath(os.path.join(os.path.dirname(name), target)) if target
                    else name)  # "(#part)": a part of the same page
            assert os.path.exists(os.path.join(ROOT, file)), f"{name} links to missing {target}"
            if anchor:
                assert anchor in _anchors(file), f"{name} links to missing {target}#{anchor}"


def test_the_readme_points_at_every_docs_page():
    linked = set(re.findall(r"\]\((docs/[^)#]+\.md)", _read("README.md")))
    assert linked == set(glob.glob("docs/*.md", root_dir=ROOT))


def compact_snippet() -> str:
    (code,) = re.findall(r"```python\n(.*?)```",
                         section("docs/run.md", "Compact vectors: --vector_dtype"), re.S)
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
