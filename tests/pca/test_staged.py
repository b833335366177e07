"""`pca --overwrite` is staged like `run`: the new visualisation is written beside the old one
and swapped in whole, so a job stopped or failed midway (Ctrl-C, a full disk) leaves the old
one as it was; only the files the old manifest lists are replaced."""

from __future__ import annotations

import errno
import json
import os
import re
from pathlib import Path

import pytest

from beam_embed.pipeline.pca import plots
from beam_embed.pipeline.pca.command import main
from beam_embed.process import exits
from tests.mounts import read_only, small_disk
from tests.pca.fixtures import clustered_matrix, records, write_embeddings

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end


def _embeddings(folder: Path, n: int, seed: int = 0) -> str:
    x, labels = clustered_matrix(n, seed=seed)
    texts = [f"record {i} about topic {t}" for i, t in enumerate(labels)]
    return write_embeddings(str(folder), records({"mean": x}, texts=texts), shards=2)


def _snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder`, sub-folders included, by relative path."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def _one_error(capsys) -> str:
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith("beam-embed pca:")]
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    return lines[0]


def _listed(viz: Path) -> set[str]:
    m = json.loads((viz / "manifest.json").read_text())
    return {m["fit"]["file"], m["sample_file"], m["html"], m["png"], *m["projector"].values(),
            *m["projections"]["files"], "manifest.json"}


def test_an_overwrite_stopped_midway_leaves_the_previous_viz_as_it_was(tmp_path, monkeypatch,
                                                                       capsys):
    emb, viz = _embeddings(tmp_path / "emb", 200), tmp_path / "viz"
    assert main(["--input", emb, "--output", str(viz), "--components", "5"]) == exits.OK
    before = _snapshot(viz)
    assert "projector/tensors.tsv" in before and "plot.png" in before

    def interrupted(*args, **kwargs):  # Ctrl-C after the projections and plot.html were written
        raise KeyboardInterrupt

    monkeypatch.setattr(plots, "write_png", interrupted)
    assert main(["--input", emb, "--output", str(viz), "--components", "3",
                 "--overwrite"]) == 130
    assert capsys.readouterr().err.splitlines()[-1] == "beam-embed pca: interrupted"
    assert _snapshot(viz) == before  # no staging folder, no claim, the old files whole

    def full(coords, colors, title, axes, path):  # a write that fails as a full disk fails it
        with open(path, "wb") as f:
            f.write(b"partial")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(plots, "write_png", full)
    assert main(["--input", emb, "--output", str(viz), "--components", "3",
                 "--overwrite"]) == exits.FAILED
    assert re.fullmatch(
        rf"beam-embed pca: the run stopped, nothing was published to {re.escape(str(viz))} "
        rf"\(its previous run, if any, is untouched\): {os.strerror(errno.ENOSPC)}: "
        rf"{re.escape(str(viz))}/\.beam-embed-staging-[0-9a-f]+/plot\.png", _one_error(capsys))
    assert _snapshot(viz) == before


def test_overwrite_swaps_in_the_whole_new_viz_and_keeps_files_no_manifest_lists(tmp_path):
    emb, viz = _embeddings(tmp_path / "emb", 200), tmp_path / "viz"
    assert main(["--input", emb, "--output", str(viz), "--components", "5"]) == exits.OK
    old_listed = _listed(viz)
    mine = {"notes.txt": b"mine", "projector/mine.tsv": b"mine", "plot-v1.html": b"mine"}
    for name, data in mine.items():
        (viz / name).write_bytes(data)
    assert main(["--input", emb, "--output", str(viz), "--components", "3",
                 "--overwrite"]) == exits.OK
    manifest = json.loads((viz / "manifest.json").read_text())
    assert manifest["fit"]["components"] == 3
    after = _snapshot(viz)
    assert set(after) == _listed(viz) | set(mine) and _listed(viz) == old_listed
    assert {n: after[n] for n in mine} == mine
    tensors = after["projector/tensors.tsv"].decode().splitlines()
    assert len(tensors) == 200 and all(len(row.split("\t")) == 3 for row in tensors)


def test_a_full_disk_names_the_file_and_leaves_the_previous_viz(tmp_path, capsys, monkeypatch):
    small, big = _embeddings(tmp_path / "small", 100), _embeddings(tmp_path / "big", 30000, 1)
    disk = tmp_path / "disk"
    with small_disk(disk, "6m") as mounted:  # a viz of 100 records is ~4.9 MB (plot.html)
        viz = disk / "viz"
        assert main(["--input", small, "--output", str(viz), "--components", "4"]) == exits.OK
        before = _snapshot(viz)
        if not mounted:  # no tmpfs here: the projections' writes fail as a full disk fails them
            from beam_embed.pipeline.common.output_formats.sink import FormatSink

            def full(self, handle, table):
                handle[0].write(b"partial")
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

            monkeypatch.setattr(FormatSink, "write_record", full)
        code = main(["--input", big, "--output", str(viz), "--components", "4", "--overwrite"])
        line = _one_error(capsys)
        assert code == exits.FAILED
        assert re.fullmatch(  # the file that could not be written, in the job's staging folder
            rf"beam-embed pca: the run stopped, nothing was published to {re.escape(str(viz))} "
            rf"\(its previous run, if any, is untouched\): {os.strerror(errno.ENOSPC)}: "
            rf"{re.escape(str(viz))}/\.beam-embed-staging-[0-9a-f]+/\S+( \(in step .*\))?",
            line), line
        assert _snapshot(viz) == before


def test_a_read_only_viz_folder_is_refused_in_one_line_naming_it(tmp_path, capsys,
                                                                 monkeypatch):
    emb, viz = _embeddings(tmp_path / "emb", 100), tmp_path / "viz"
    assert main(["--input", emb, "--output", str(viz), "--components", "4"]) == exits.OK
    before = _snapshot(viz)
    capsys.readouterr()
    with read_only(viz) as mounted:
        if not mounted:  # no mount(2) here: every create in the folder fails as it would
            def refuse(*args, **kwargs):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS))

            monkeypatch.setattr("tempfile.mkstemp", refuse)
        code = main(["--input", emb, "--output", str(viz), "--overwrite"])
    assert code == exits.BAD_CONFIG
    assert _one_error(capsys) == (f"beam-embed pca: --output {str(viz)!r} is not writable "
                                  "(Read-only file system)")
    assert _snapshot(viz) == before
