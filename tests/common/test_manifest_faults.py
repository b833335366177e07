"""A manifest that does not describe its shards, or is not a manifest at all: `search` and `pca`
exit 3 with one line naming it, `read_embeddings` raises IncompleteInput; never more (or fewer)
vectors than ids, never an AttributeError."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from beam_embed import read_embeddings
from beam_embed.pipeline.cli import main as cli
from beam_embed.pipeline.common.settings.errors import IncompleteInput
from beam_embed.process import exits
from tests.job_helpers import run_job, write_lines

pytestmark = pytest.mark.pipeline  # reads what a whole run wrote

TEXTS = ["the cat sat on the mat", "a dog ran", "the river bank", "money is big"]


@pytest.fixture(scope="module")
def runs(tiny_export, tmp_path_factory):
    """Finished runs of the tiny model (width 8): format/dtype -> folder."""
    base = tmp_path_factory.mktemp("runs")
    corpus = write_lines(str(base / "c.txt"), TEXTS)
    out = {}
    for fmt, dtype in [("parquet", "float32"), ("tfrecord", "float32"), ("tfrecord", "int8")]:
        out[fmt, dtype] = str(base / f"{fmt}-{dtype}")
        run_job(out[fmt, dtype], "--input", corpus, "--model", tiny_export, "--pooling", "mean",
                "--format", fmt, "--vector_dtype", dtype)
    return out


def _copy(run: str, tmp_path, edit) -> str:
    """A copy of `run` whose manifest is `edit(manifest)`."""
    folder = str(tmp_path / "copy")
    shutil.copytree(run, folder)
    path = os.path.join(folder, "manifest.json")
    with open(path) as f:
        manifest = json.load(f)
    with open(path, "w") as f:
        json.dump(edit(manifest), f)
    return folder


def _width(width: int):
    def edit(manifest):
        manifest["poolings"][0]["width"] = width
        if "scale" in manifest["poolings"][0]:  # int8: a range per dimension
            for key in ("scale", "offset"):
                manifest["poolings"][0][key] = manifest["poolings"][0][key][:width] * 2
        return manifest
    return edit


def _one_line(capsys, prog: str) -> str:
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith(f"beam-embed {prog}:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("width", [4, 16])
@pytest.mark.parametrize("run", [("parquet", "float32"), ("tfrecord", "float32"),
                                 ("tfrecord", "int8")])
def test_read_embeddings_refuses_a_width_its_shards_do_not_hold(runs, run, width, tmp_path):
    assert len(read_embeddings(runs[run]).vectors) == len(TEXTS)  # as written: one per id
    folder = _copy(runs[run], tmp_path, _width(width))
    with pytest.raises(IncompleteInput, match=rf"width \[?{width}\b.*does not describe"):
        read_embeddings(folder)


@pytest.mark.parametrize("width", [4, 16])
@pytest.mark.parametrize("run", [("parquet", "float32"), ("tfrecord", "int8")])
def test_search_and_pca_refuse_a_width_the_shards_do_not_hold(runs, run, width, tmp_path,
                                                               capsys):
    folder = _copy(runs[run], tmp_path, _width(width))
    if run[0] == "parquet":  # search reads Parquet
        assert cli(["search", folder, "the cat"]) == exits.INCOMPLETE_INPUT
        line = _one_line(capsys, "search")
        assert f"width {width}" in line and "does not describe these shards" in line
    code = cli(["pca", "--input", folder, "--output", str(tmp_path / "viz")])
    assert code == exits.INCOMPLETE_INPUT
    line = _one_line(capsys, "pca")
    assert f"width {width}" in line and "does not describe these shards" in line


@pytest.mark.parametrize("content, kind", [("[]", "a JSON list"), ("null", "null"),
                                           ('"manifest"', "a JSON string"),
                                           ("3", "a JSON number")])
def test_a_manifest_that_is_not_an_object_is_named(tmp_path, capsys, content, kind):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "manifest.json").write_text(content)
    path = str(folder / "manifest.json")
    want = f"{path} holds {kind}, not the JSON object a run writes"
    assert cli(["search", str(folder), "the cat"]) == exits.INCOMPLETE_INPUT
    assert _one_line(capsys, "search") == f"beam-embed search: {want}" + \
        ": it is damaged or not a manifest; rerun the job that wrote it"
    assert cli(["pca", "--input", str(folder), "--output", str(tmp_path / "viz")]) == 3
    assert want in _one_line(capsys, "pca")
    assert not (tmp_path / "viz").exists()
    with pytest.raises(IncompleteInput, match=want):
        read_embeddings(str(folder))


@pytest.mark.parametrize("key, value", [("poolings", {"mean": 8}), ("poolings", ["mean"]),
                                        ("model", "tiny"), ("files", ["a.parquet"]),
                                        ("files", {"parquet": "a.parquet"}), ("rows", [])])
def test_a_key_of_the_wrong_shape_is_named(runs, tmp_path, capsys, key, value):
    folder = _copy(runs["parquet", "float32"], tmp_path, lambda m: {**m, key: value})
    assert cli(["search", folder, "the cat"]) == exits.INCOMPLETE_INPUT
    line = _one_line(capsys, "search")
    assert "manifest.json: " in line and key in line and "damaged" in line
    with pytest.raises(IncompleteInput, match=key):
        read_embeddings(folder)
