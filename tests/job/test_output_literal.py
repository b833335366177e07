"""`run`'s output folder is taken as it is: `[ ] * ?` in its name are no pattern (a run into
`runs/exp[1]` never touches `runs/exp1`), a name its manifest lists never leads the swap out of
it through a link, and only what a run provably made is cleaned up as a leftover."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from beam_embed.pipeline.common.finished_run.embedding_set import load_embedding_set
from beam_embed.pipeline.common.finished_run.shards import check_shards
from beam_embed.pipeline.job.command import main
from beam_embed.process import exits
from tests.job_helpers import run_job, write_lines

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def _run_files(folder: Path) -> set[str]:
    manifest = json.loads((folder / "manifest.json").read_text())
    return {"manifest.json", *manifest["errors_files"],
            *(n for names in manifest["files"].values() for n in names)}


def _texts(folder: Path) -> set[str]:
    """The texts of the Parquet shards the folder's manifest lists (not a glob: the folder's
    name is one)."""
    import pyarrow.parquet as pq

    names = json.loads((folder / "manifest.json").read_text())["files"]["parquet"]
    return {t for n in names for t in pq.read_table(folder / n).column("text").to_pylist()}


def _one_error(err: str) -> str:
    errors = [x for x in err.splitlines() if x.startswith("beam-embed run:")]
    assert len(errors) == 1 and "Traceback" not in err, err[-3000:]
    return errors[0]


# each output name beside folders that it matches as a glob pattern
@pytest.mark.parametrize("name,siblings", [("exp[1]", ["exp1"]), ("a*b", ["axb", "a-2024-b"]),
                                           ("what?", ["whats"])])
def test_glob_characters_in_the_output_are_part_of_its_name(tiny_export, tmp_path, name,
                                                            siblings):
    runs, out = tmp_path / "runs", tmp_path / "runs" / name
    old = write_lines(str(tmp_path / "old.txt"), ["the old cat", "the old dog"])
    new = write_lines(str(tmp_path / "new.txt"), ["a new cat", "a new dog", "a new bird"])
    run_job(str(tmp_path / "first"), "--input", old, "--model", tiny_export)
    for folder in [name, *siblings]:  # copies of a run, beside a file of the user's
        shutil.copytree(tmp_path / "first", runs / folder)
        (runs / folder / "notes.txt").write_text("mine")
    before = {s: _files(runs / s) for s in siblings}
    args = ["--output", str(out), "--progress_every", "0", "--input", new, "--model",
            tiny_export, "--overwrite"]

    code = main(args)
    assert {s: _files(runs / s) for s in siblings} == before
    assert code == exits.OK
    assert set(_files(out)) == _run_files(out) | {"notes.txt"}  # the new run; no staging left
    assert _texts(out) == {"a new cat", "a new dog", "a new bird"}

    # and again (the folder is not stuck), through Beam's own write steps (--num_shards)
    assert main([*args, "--num_shards", "2"]) == exits.OK
    assert {s: _files(runs / s) for s in siblings} == before
    assert set(_files(out)) == _run_files(out) | {"notes.txt"}
    check_shards(load_embedding_set(str(out)), "parquet")
    assert len(json.loads((out / "manifest.json").read_text())["files"]["parquet"]) == 2

    # the folder read back by name: --reuse copies its vectors
    again = tmp_path / "again"
    assert main(["--output", str(again), "--progress_every", "0", "--input", new, "--model",
                 tiny_export, "--reuse", str(out)]) == exits.OK
    assert json.loads((again / "manifest.json").read_text())["reused_from"]["output"] == str(out)
    assert _texts(again) == {"a new cat", "a new dog", "a new bird"}


def test_overwrite_never_deletes_through_a_link_out_of_the_folder(tiny_export, tmp_path,
                                                                  capsys):
    out, outside = tmp_path / "out", tmp_path / "outside"
    corpus = write_lines(str(tmp_path / "c.txt"), ["the cat sat", "the dog ran"])
    run_job(str(out), "--input", corpus, "--model", tiny_export)
    outside.mkdir()
    (outside / "notes.txt").write_text("mine")
    (out / "lnk").symlink_to(outside)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["errors_files"].append("lnk/notes.txt")  # a name that stays inside, as written
    (out / "manifest.json").write_text(json.dumps(manifest))
    before = _files(out)

    code = main(["--output", str(out), "--progress_every", "0", "--input", corpus, "--model",
                 tiny_export, "--overwrite"])
    assert code == exits.BAD_CONFIG
    assert _one_error(capsys.readouterr().err) == (
        f"beam-embed run: {out}/manifest.json lists 'lnk/notes.txt', which is not a file name "
        f"inside its folder: it leads out of it through a link (lnk -> {outside}); nothing "
        "there is replaced on its word")
    assert (outside / "notes.txt").read_text() == "mine"
    assert _files(out) == before


MINE = {"beam-temp-notes.txt": b"mine", "beam-temp-results/scores.csv": b"a,b\n1,2\n",
        ".beam-embed-staging-backup/notes.txt": b"mine"}


def test_a_run_removes_no_leftover_that_a_run_did_not_provably_make(tiny_export, tmp_path,
                                                                    capsys):
    out = tmp_path / "out"
    for name, data in MINE.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    corpus = write_lines(str(tmp_path / "c.txt"), ["the cat sat", "the dog ran"])
    args = ["--output", str(out), "--progress_every", "0", "--input", corpus, "--model",
            tiny_export]
    assert main(args) == exits.OK
    assert "removed " not in capsys.readouterr().err
    assert set(_files(out)) == _run_files(out) | set(MINE)
    assert {n: (out / n).read_bytes() for n in MINE} == MINE


def test_a_journal_in_a_folder_no_run_made_makes_no_file_a_runs(tiny_export, tmp_path, capsys):
    """A swap's record (publishing.json) counts only in a run's own staging folder: in a
    folder of a staging folder's name without its marker it names nothing to replace."""
    out = tmp_path / "out"
    (out / ".beam-embed-staging-backup").mkdir(parents=True)
    (out / ".beam-embed-staging-backup" / "publishing.json").write_text(json.dumps(
        {"replaced": ["embeddings-final-v2.parquet"], "new": []}))
    (out / "embeddings-final-v2.parquet").write_bytes(b"mine")
    before = _files(out)
    corpus = write_lines(str(tmp_path / "c.txt"), ["the cat sat"])
    code = main(["--output", str(out), "--progress_every", "0", "--input", corpus, "--model",
                 tiny_export, "--overwrite"])
    assert code == exits.BAD_CONFIG
    assert _one_error(capsys.readouterr().err) == (
        f"beam-embed run: --output {str(out)!r} holds files that look like `beam-embed run` "
        "outputs but no manifest.json lists them (embeddings-final-v2.parquet); files no "
        "manifest lists are never deleted: move them or choose another --output")
    assert _files(out) == before
