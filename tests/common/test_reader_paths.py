"""Readers read only the run's own folder: a manifest whose shard names lead out of it ("../x",
an absolute path, a link to another folder) is refused by `search`, `pca`, `run --reuse` and
read_embeddings before any shard is read (exit 2, one line naming the name), as the writing side
refuses to replace such names; another folder's text is never printed, copied or projected."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from beam_embed import read_embeddings
from beam_embed.pipeline.cli import main as cli
from beam_embed.process import exits
from tests.job_helpers import run_job, write_lines

pytestmark = pytest.mark.pipeline  # whole runs, then each reader through its command

SECRET = "the private diary of someone else"
ARGS = ("--pooling", "mean", "--batch_tokens", "64", "--format", "parquet")


@pytest.fixture(scope="module")
def runs(tiny_export, tmp_path_factory):
    """(a run, a private run beside it): each a finished `beam-embed run` folder."""
    base = tmp_path_factory.mktemp("paths")
    corpus = write_lines(str(base / "c.txt"), ["the cat sat", "a dog", "the river bank"])
    secret = write_lines(str(base / "s.txt"), [SECRET] * 3)
    mine, private = str(base / "mine"), str(base / "private")
    run_job(mine, "--input", corpus, "--model", tiny_export, *ARGS)
    run_job(private, "--input", secret, "--model", tiny_export, *ARGS)
    return mine, private, corpus


def _pointing_out(runs, tmp_path, how: str) -> tuple[str, str]:
    """A copy of the run whose manifest lists the private run's shard (`how`: "dotdot",
    "absolute" or "link"); (the copy, the name it lists)."""
    mine, private, _ = runs
    copy = str(tmp_path / "copy")
    shutil.copytree(mine, copy)
    shutil.copytree(private, str(tmp_path / "private"))
    with open(os.path.join(copy, "manifest.json")) as f:
        manifest = json.load(f)
    shard = manifest["files"]["parquet"][0]
    if how == "dotdot":
        name = f"../private/{shard}"
    elif how == "absolute":
        name = str(tmp_path / "private" / shard)
    else:
        os.symlink(str(tmp_path / "private"), os.path.join(copy, "lnk"))
        name = f"lnk/{shard}"
    with open(os.path.join(private, "manifest.json")) as f:
        rows = json.load(f)["rows"][shard]
    manifest["files"]["parquet"] = [name]
    manifest["rows"] = {os.path.basename(name): rows}
    manifest.pop("digests", None)  # no checksum to give it away: the name alone is refused
    with open(os.path.join(copy, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    return copy, name


def _refused(capsys, prog: str, argv: list[str]) -> str:
    capsys.readouterr()
    code = cli(argv)
    out, err = capsys.readouterr()
    assert code == exits.BAD_CONFIG, err
    assert SECRET not in out and SECRET not in err
    lines = [x for x in err.splitlines() if x.startswith(f"beam-embed {prog}:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("how", ["dotdot", "absolute", "link"])
def test_search_never_reads_a_shard_outside_the_folder(runs, tmp_path, capsys, how):
    copy, name = _pointing_out(runs, tmp_path, how)
    line = _refused(capsys, "search", ["search", copy, "diary"])
    assert f"lists {name!r}, which is not a file name inside its folder" in line
    assert "nothing there is read on its word" in line
    if how == "link":
        assert "it leads out of it through a link (lnk -> " in line


@pytest.mark.parametrize("how", ["dotdot", "link"])
def test_pca_never_reads_a_shard_outside_the_folder(runs, tmp_path, capsys, how):
    copy, name = _pointing_out(runs, tmp_path, how)
    viz = tmp_path / "viz"
    line = _refused(capsys, "pca", ["pca", "--input", copy, "--output", str(viz),
                                    "--components", "2"])
    assert f"lists {name!r}, which is not a file name inside its folder" in line
    assert not viz.exists()


@pytest.mark.parametrize("how", ["absolute", "link"])
def test_reuse_never_copies_from_a_shard_outside_the_folder(runs, tiny_export, tmp_path,
                                                            capsys, how):
    copy, name = _pointing_out(runs, tmp_path, how)
    out = str(tmp_path / "out")
    line = _refused(capsys, "run", ["run", "--input", runs[2], "--model", tiny_export, *ARGS,
                                    "--output", out, "--progress_every", "0", "--reuse", copy])
    assert line.startswith(f"beam-embed run: --reuse {copy!r}: ")
    assert f"lists {name!r}, which is not a file name inside its folder" in line
    assert not os.path.exists(os.path.join(out, "manifest.json"))


def test_read_embeddings_never_reads_a_shard_outside_the_folder(runs, tmp_path):
    copy, name = _pointing_out(runs, tmp_path, "dotdot")
    with pytest.raises(ValueError, match="which is not a file name inside its folder"):
        read_embeddings(copy)
