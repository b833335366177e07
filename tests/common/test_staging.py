"""A new run is swapped in whole: the folder shows the old run, then no run, then the new one;
never a manifest over another run's files."""

from __future__ import annotations

import json

import pytest
from apache_beam.io.filesystems import FileSystems

from beam_embed.pipeline.common.run_folder.manifest.job import JOB
from beam_embed.pipeline.common.run_folder.staging import (
    STAGING_MARKER,
    NothingPublished,
    Previous,
    check_output,
    make_staging,
    publish,
    remove_leftovers,
    staging_folder,
)
from beam_embed.pipeline.common.settings.errors import CommandError


def _manifest(tag: str, names: list[str]) -> str:
    return json.dumps({"tag": tag, "files": {"parquet": names},
                       "errors_files": ["errors-00000-of-00001.jsonl"]})


def _run(folder, shards: int, tag: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    names = [f"embeddings-{i:05d}-of-{shards:05d}.parquet" for i in range(shards)]
    for name in names:
        (folder / name).write_text(tag)
    (folder / "errors-00000-of-00001.jsonl").write_text(tag)
    (folder / "manifest.json").write_text(_manifest(tag, names))


def _previous(folder) -> Previous:
    return check_output(str(folder), JOB, overwrite=True)


def _listing(folder) -> dict[str, str]:
    return {p.name: p.read_text() for p in folder.iterdir() if p.is_file()}


def test_publish_replaces_every_file_of_the_old_run(tmp_path):
    _run(tmp_path, 3, "old")
    (tmp_path / "notes.txt").write_text("mine")  # not a job output: left alone
    staging = staging_folder(str(tmp_path), "abc")
    _run(tmp_path / ".beam-embed-staging-abc", 1, "new")
    replaced = publish(staging, str(tmp_path), JOB, _previous(tmp_path))
    assert len(replaced) == 5
    assert _listing(tmp_path) == {
        "embeddings-00000-of-00001.parquet": "new", "errors-00000-of-00001.jsonl": "new",
        "manifest.json": _manifest("new", ["embeddings-00000-of-00001.parquet"]),
        "notes.txt": "mine"}
    assert not (tmp_path / ".beam-embed-staging-abc").exists()


def test_a_swap_cut_short_leaves_no_manifest_over_mixed_files(tmp_path, monkeypatch):
    _run(tmp_path, 2, "old")
    staging = staging_folder(str(tmp_path), "abc")
    _run(tmp_path / ".beam-embed-staging-abc", 2, "new")
    previous = _previous(tmp_path)
    renamed = []

    def rename_then_die(sources, destinations):  # the process dies after moving one file
        FileSystems.get_filesystem(sources[0]).rename(sources[:1], destinations[:1])
        renamed.append(destinations[0])
        raise OSError("killed")

    monkeypatch.setattr(FileSystems, "rename", rename_then_die)
    with pytest.raises(CommandError, match="was cut short .*killed.* holds no finished run"):
        publish(staging, str(tmp_path), JOB, previous)
    assert len(renamed) == 1 and not (tmp_path / "manifest.json").exists()
    assert (tmp_path / ".beam-embed-staging-abc" / "manifest.json").exists()


def test_publish_refuses_a_run_without_its_manifest(tmp_path):
    _run(tmp_path, 1, "old")
    staging = tmp_path / ".beam-embed-staging-abc"
    _run(staging, 1, "new")
    (staging / "manifest.json").unlink()
    with pytest.raises(NothingPublished, match="did not finish"):
        publish(str(staging), str(tmp_path), JOB, _previous(tmp_path))
    assert json.loads((tmp_path / "manifest.json").read_text())["tag"] == "old"


def test_only_staging_folders_provably_a_runs_are_removed_as_leftovers(tmp_path):
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / STAGING_MARKER).write_text(json.dumps({"run_id": "linked"}))
    out = tmp_path / "out"
    for run_id in ("dead1", "dead2"):  # killed runs: their markers name them
        staging = make_staging(str(out), run_id)
        (out / f".beam-embed-staging-{run_id}" / "sub").mkdir()
        (out / f".beam-embed-staging-{run_id}" / "sub" / "part.parquet").write_text("x")
        assert staging == str(out / f".beam-embed-staging-{run_id}")
    (out / ".beam-embed-staging-taken" / "beam-temp-x").mkdir(parents=True)  # killed unmarked
    mine = {".beam-embed-staging-backup/notes.txt": "mine", "beam-temp-results/a.csv": "mine",
            "beam-temp-notes.txt": "mine", ".beam-embed-staging-other/.beam-embed-staging.json":
            json.dumps({"run_id": "dead1"})}  # a marker copied into a folder of another name
    for name, text in mine.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    (out / ".beam-embed-staging-linked").symlink_to(outside)
    removed = remove_leftovers(str(out), taken_over="taken")
    assert sorted(p.rsplit("/", 1)[1] for p in removed) == [
        ".beam-embed-staging-dead1", ".beam-embed-staging-dead2", ".beam-embed-staging-taken"]
    assert {str(p.relative_to(out)): p.read_text() for p in out.rglob("*")
            if p.is_file() and not p.is_relative_to(out / ".beam-embed-staging-linked")} == mine
    assert (outside / "sub").is_dir() and (out / ".beam-embed-staging-linked").is_symlink()
