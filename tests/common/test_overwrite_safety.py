"""What a new run may delete in its output folder: only the files a manifest there lists (and
the manifest), never a file that merely looks like an output; a folder of look-alikes without
a manifest is refused, and so is an unlisted file under a name the run writes."""

from __future__ import annotations

import errno
import io
import json
import os
import re
from pathlib import Path

import pytest
from apache_beam.io.filesystem import BeamIOError, FileMetadata, FileSystem
from apache_beam.io.filesystems import FileSystems

from beam_embed.pipeline.common.run_folder.claim import claim_output
from beam_embed.pipeline.common.run_folder.manifest.job import JOB
from beam_embed.pipeline.common.run_folder.staging import (
    JOURNAL,
    STAGING_MARKER,
    NothingPublished,
    check_output,
    make_staging,
    publish,
    remove_leftovers,
    staging_folder,
)
from beam_embed.pipeline.common.settings.errors import CommandError
from beam_embed.pipeline.pca.job import PCA_OUTPUT
from beam_embed.process import exits
from tests.mounts import read_only


def _shards(n: int) -> list[str]:
    return [f"embeddings-{i:05d}-of-{n:05d}.parquet" for i in range(n)]


def _job_manifest(tag: str, shards: list[str]) -> str:
    return json.dumps({"tag": tag, "files": {"parquet": shards},
                       "errors_files": ["errors-00000-of-00001.jsonl"]})


def _write_run(folder, tag: str, shards: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in [*shards, "errors-00000-of-00001.jsonl"]:
        (folder / name).write_text(tag)
    (folder / "manifest.json").write_text(_job_manifest(tag, shards))


def _files(folder) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*"))
            if p.is_file()}


USERS = {"embeddings-final-v2.parquet": "mine", "errors-2024.jsonl": "mine", "notes.txt": "mine"}


def test_look_alikes_without_a_manifest_are_refused_even_with_overwrite(tmp_path):
    for name, text in USERS.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(ValueError) as refused:
        check_output(str(tmp_path), JOB, overwrite=True)
    message = str(refused.value)
    assert "\n" not in message
    assert message == (f"--output {str(tmp_path)!r} holds files that look like `beam-embed run` "
                       "outputs but no manifest.json lists them (embeddings-final-v2.parquet, "
                       "errors-2024.jsonl); files no manifest lists are never deleted: move them "
                       "or choose another --output")
    assert _files(tmp_path) == USERS


def test_overwrite_replaces_exactly_the_listed_files(tmp_path):
    _write_run(tmp_path, "old", _shards(3))
    for name, text in USERS.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(ValueError, match="holds a previous run .*pass --overwrite"):
        check_output(str(tmp_path), JOB, overwrite=False)
    previous = check_output(str(tmp_path), JOB, overwrite=True)
    staging = tmp_path / ".beam-embed-staging-new"
    _write_run(staging, "new", _shards(1))
    (staging / "beam-temp-x").mkdir()  # not listed: goes with the staging folder
    replaced = publish(str(staging), str(tmp_path), JOB, previous)
    assert sorted(os.path.basename(p) for p in replaced) == sorted(
        [*_shards(3), "errors-00000-of-00001.jsonl", "manifest.json"])
    assert _files(tmp_path) == {**USERS, "embeddings-00000-of-00001.parquet": "new",
                                "errors-00000-of-00001.jsonl": "new",
                                "manifest.json": _job_manifest("new", _shards(1))}


def test_an_unlisted_file_under_a_name_the_run_writes_is_refused_before_the_run(tmp_path):
    _write_run(tmp_path, "old", _shards(2))
    (tmp_path / "embeddings-00000-of-00001.parquet").write_text("mine")  # not the manifest's
    with pytest.raises(ValueError) as refused:
        check_output(str(tmp_path), JOB, overwrite=True)
    assert str(refused.value).startswith(
        f"--output {str(tmp_path)!r} holds embeddings-00000-of-00001.parquet, which its "
        "manifest.json does not list; a new run writes files of such names")
    assert (tmp_path / "embeddings-00000-of-00001.parquet").read_text() == "mine"


def test_a_file_that_appears_under_a_new_name_during_the_run_publishes_nothing(tmp_path):
    _write_run(tmp_path, "old", _shards(2))
    previous = check_output(str(tmp_path), JOB, overwrite=True)
    before = _files(tmp_path)
    (tmp_path / "embeddings-00000-of-00001.parquet").write_text("mine")  # while the run ran
    staging = tmp_path / ".beam-embed-staging-new"
    _write_run(staging, "new", _shards(1))
    with pytest.raises(NothingPublished) as refused:
        publish(str(staging), str(tmp_path), JOB, previous)
    assert refused.value.code == exits.FAILED
    assert str(refused.value).startswith(
        f"{tmp_path}/embeddings-00000-of-00001.parquet appeared during the run, and no manifest "
        "lists it")
    after = {k: v for k, v in _files(tmp_path).items() if not k.startswith(".beam-embed")}
    assert after == {**before, "embeddings-00000-of-00001.parquet": "mine"}


def test_a_swap_cut_short_is_replaced_by_the_next_run_and_nothing_else(tmp_path, monkeypatch):
    _write_run(tmp_path, "old", _shards(3))
    (tmp_path / "embeddings-final-v2.parquet").write_text("mine")
    previous = check_output(str(tmp_path), JOB, overwrite=True)
    killed = Path(make_staging(str(tmp_path), "killed"))
    _write_run(killed, "killed", _shards(2))
    real_rename = FileSystems.rename

    def rename_then_die(sources, destinations):  # the process dies after moving one file
        real_rename(sources[:1], destinations[:1])
        raise OSError("killed")

    monkeypatch.setattr(FileSystems, "rename", rename_then_die)
    with pytest.raises(CommandError, match="was cut short .*killed.* holds no finished run"):
        publish(str(killed), str(tmp_path), JOB, previous)
    monkeypatch.undo()
    assert not (tmp_path / "manifest.json").exists() and (killed / JOURNAL).exists()
    assert sorted(_files(tmp_path)) == [  # the killed run's first shard and the user's file
        f".beam-embed-staging-killed/{STAGING_MARKER}",
        ".beam-embed-staging-killed/embeddings-00001-of-00002.parquet",
        ".beam-embed-staging-killed/errors-00000-of-00001.jsonl",
        ".beam-embed-staging-killed/manifest.json", f".beam-embed-staging-killed/{JOURNAL}",
        "embeddings-00000-of-00002.parquet", "embeddings-final-v2.parquet"]

    # its journal says whose the files are: a run's to replace, with --overwrite
    with pytest.raises(ValueError, match="holds a previous run"):
        check_output(str(tmp_path), JOB, overwrite=False)
    previous = check_output(str(tmp_path), JOB, overwrite=True)
    remove_leftovers(str(tmp_path))
    staging = tmp_path / ".beam-embed-staging-next"
    _write_run(staging, "next", _shards(1))
    publish(str(staging), str(tmp_path), JOB, previous)
    assert _files(tmp_path) == {"embeddings-00000-of-00001.parquet": "next",
                                "errors-00000-of-00001.jsonl": "next",
                                "embeddings-final-v2.parquet": "mine",
                                "manifest.json": _job_manifest("next", _shards(1))}


@pytest.mark.parametrize("listed", ["../victim.txt", "/etc/hostname", "a/../../victim.txt"])
def test_a_manifest_naming_a_file_outside_its_folder_is_refused(tmp_path, listed):
    out = tmp_path / "out"
    _write_run(out, "old", _shards(1))
    (tmp_path / "victim.txt").write_text("mine")
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["errors_files"].append(listed)
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=re.escape(f"lists {listed!r}, which is not a file name "
                                                   "inside its folder")):
        check_output(str(out), JOB, overwrite=True)
    assert (tmp_path / "victim.txt").read_text() == "mine"


def test_a_listed_name_may_go_through_a_link_that_stays_inside_the_folder(tmp_path):
    out = tmp_path / "out"
    _write_run(out, "old", _shards(1))
    (out / "real").mkdir()
    (out / "real" / "extra.jsonl").write_text("old")
    (out / "alias").symlink_to("real")  # relative: inside the folder
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["errors_files"].append("alias/extra.jsonl")
    (out / "manifest.json").write_text(json.dumps(manifest))
    previous = check_output(str(out), JOB, overwrite=True)
    assert "alias/extra.jsonl" in previous.replaceable
    staging = out / ".beam-embed-staging-new"
    _write_run(staging, "new", _shards(1))
    publish(str(staging), str(out), JOB, previous)
    assert not (out / "real" / "extra.jsonl").exists()


def test_a_link_out_of_the_folder_that_appears_during_the_run_publishes_nothing(tmp_path):
    out, outside = tmp_path / "out", tmp_path / "outside"
    projector = ["projector/tensors.tsv", "projector/metadata.tsv",
                 "projector/projector_config.pbtxt"]
    names = ["pca.npz", "sample.parquet", "plot.html", "plot.png", *projector,
             "projections-00000-of-00001.parquet"]
    out.mkdir()
    previous = check_output(str(out), PCA_OUTPUT, overwrite=False)
    outside.mkdir()
    (out / "projector").symlink_to(outside)  # while the run ran
    staging = out / ".beam-embed-staging-new"
    for name in names:
        (staging / name).parent.mkdir(exist_ok=True)
        (staging / name).write_text("new")
    (staging / "manifest.json").write_bytes(_pca_manifest(names[-1:]))
    with pytest.raises(NothingPublished) as refused:
        publish(str(staging), str(out), PCA_OUTPUT, previous)
    assert str(refused.value) == (
        f"{out}/projector/metadata.tsv leads out of {out} through a link (projector -> "
        f"{outside}), which a run never writes or deletes through: nothing was published to "
        f"{out}; remove the link and run again")
    assert list(outside.iterdir()) == [] and not (out / "manifest.json").exists()


def test_another_commands_or_an_unreadable_manifest_is_refused(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"kind": "pca", "html": "plot.html"}))
    with pytest.raises(ValueError, match="holds a manifest.json that `beam-embed run` did not "
                                         "write"):
        check_output(str(tmp_path), JOB, overwrite=True)
    _write_run(tmp_path, "old", _shards(1))
    with pytest.raises(ValueError, match="holds a manifest.json that `beam-embed pca` did not "
                                         "write"):
        check_output(str(tmp_path), PCA_OUTPUT, overwrite=True)
    (tmp_path / "manifest.json").write_text('{"files": ')
    with pytest.raises(ValueError, match="holds a manifest.json that cannot be read"):
        check_output(str(tmp_path), JOB, overwrite=True)
    assert len(_files(tmp_path)) == 3


def test_a_read_only_folder_is_refused_naming_it(tmp_path, monkeypatch):
    out = tmp_path / "out"
    _write_run(out, "old", _shards(1))
    with read_only(out) as mounted:
        if not mounted:  # no mount(2) here: every create in the folder fails as it would
            def refuse(*args, **kwargs):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS))

            monkeypatch.setattr("tempfile.mkstemp", refuse)
            monkeypatch.setattr("beam_embed.pipeline.common.run_folder.claim_stores.open", refuse,
                                raising=False)
        with pytest.raises(ValueError) as refused:
            check_output(str(out), JOB, overwrite=True)
        assert str(refused.value) == f"--output {str(out)!r} is not writable (Read-only file system)"
        with pytest.raises(CommandError) as busy:  # the claim says the same, naming the folder
            claim_output(str(out), True, ["test"])
        assert busy.value.code == exits.BAD_CONFIG
        assert str(busy.value) == f"--output {str(out)!r} is not writable (Read-only file system)"


class _ObjectStore(FileSystem):
    """An object store in memory, like gs://: no folders, one object renamed at a time."""

    objects: dict[str, bytes] = {}

    @classmethod
    def scheme(cls):
        return "memstore"

    def join(self, base, *paths):
        return "/".join([base.rstrip("/"), *(p.strip("/") for p in paths)])

    def split(self, path):
        head, _, tail = path.rstrip("/").rpartition("/")
        return head, tail

    def mkdirs(self, path):
        pass

    def has_dirs(self):
        return False

    def _list(self, prefix):
        for name in sorted(self.objects):
            if name.startswith(prefix):
                yield FileMetadata(name, len(self.objects[name]), 0)

    def create(self, path, mime_type=None, compression_type=None):
        store = self.objects

        class Upload(io.BytesIO):
            def close(self):
                store[path] = self.getvalue()
                super().close()

        return Upload()

    def open(self, path, mime_type=None, compression_type=None):
        return io.BytesIO(self.objects[path])

    def copy(self, sources, destinations):
        for s, d in zip(sources, destinations):
            self.objects[d] = self.objects[s]

    def rename(self, sources, destinations):
        for s, d in zip(sources, destinations):
            if s not in self.objects:  # a "folder": object stores rename objects only
                raise BeamIOError("rename failed", {(s, d): FileNotFoundError(s)})
            self.objects[d] = self.objects.pop(s)

    def exists(self, path):
        return path in self.objects

    def size(self, path):
        return len(self.objects[path])

    def last_updated(self, path):
        return 0

    def checksum(self, path):
        return str(len(self.objects[path]))

    def metadata(self, path):
        return FileMetadata(path, len(self.objects[path]), 0)

    def delete(self, paths):
        for path in paths:
            if path.endswith("/"):
                for name in [n for n in self.objects if n.startswith(path)]:
                    del self.objects[name]
            elif path in self.objects:
                del self.objects[path]
            else:
                raise BeamIOError("delete failed", {path: FileNotFoundError(path)})


def _pca_manifest(projections: list[str]) -> bytes:
    return json.dumps({"kind": "pca", "fit": {"file": "pca.npz"}, "sample_file": "sample.parquet",
                       "projections": {"files": projections}, "html": "plot.html",
                       "png": "plot.png", "projector": {
                           "tensors": "projector/tensors.tsv",
                           "metadata": "projector/metadata.tsv",
                           "config": "projector/projector_config.pbtxt"}}).encode()


def test_an_object_store_swap_moves_every_file_of_a_subfolder(monkeypatch):
    objects: dict[str, bytes] = {}
    monkeypatch.setattr(_ObjectStore, "objects", objects)
    folder = "memstore://bucket/viz"
    projector = ["projector/tensors.tsv", "projector/metadata.tsv",
                 "projector/projector_config.pbtxt"]
    old = ["pca.npz", "sample.parquet", "plot.html", "plot.png", *projector,
           "projections-00000-of-00002.parquet", "projections-00001-of-00002.parquet"]
    for name in old:
        objects[f"{folder}/{name}"] = b"old"
    objects[f"{folder}/manifest.json"] = _pca_manifest(old[-2:])
    objects[f"{folder}/projector/mine.tsv"] = objects[f"{folder}/notes.txt"] = b"mine"
    previous = check_output(folder, PCA_OUTPUT, overwrite=True)
    staging = staging_folder(folder, "abc")
    new = [*old[:-2], "projections-00000-of-00001.parquet"]
    for name in new:
        objects[f"{staging}/{name}"] = b"new"
    objects[f"{staging}/manifest.json"] = _pca_manifest(new[-1:])
    objects[f"{staging}/beam-temp-projections-0f/part"] = b"temp"
    publish(staging, folder, PCA_OUTPUT, previous)
    assert objects == {**{f"{folder}/{n}": b"new" for n in new},
                       f"{folder}/manifest.json": _pca_manifest(new[-1:]),
                       f"{folder}/projector/mine.tsv": b"mine", f"{folder}/notes.txt": b"mine"}
