"""The install command a hint names is the one for how beam-embed was installed here."""

from __future__ import annotations

import importlib
import json
import shlex
import sys

import pytest

from beam_embed.process.versions import install_command

PIP = f"{shlex.quote(sys.executable)} -m pip install"


@pytest.mark.parametrize("direct_url, expected", [
    ({"url": "file:///home/u/beam%20embed", "dir_info": {"editable": True}},
     f"{PIP} -e '/home/u/beam embed[umap]'"),
    ({"url": "file:///home/u/beam-embed", "dir_info": {}}, f"{PIP} '/home/u/beam-embed[umap]'"),
    ({"url": "file:///tmp/beam_embed-0.1.0-py3-none-any.whl", "archive_info": {}},
     f"{PIP} '/tmp/beam_embed-0.1.0-py3-none-any.whl[umap]'"),
    ({"url": "https://github.com/x/beam-embed", "vcs_info": {"vcs": "git", "commit_id": "a1"}},
     f"{PIP} 'beam-embed[umap] @ git+https://github.com/x/beam-embed'"),
    (None, f"{PIP} 'beam-embed[umap]'"),  # from an index: no direct_url.json
])
def test_the_command_follows_the_installation(direct_url, expected, tmp_path, monkeypatch):
    info = tmp_path / "beam_embed-0.1.0.dist-info"  # found before the real one on sys.path
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: beam-embed\nVersion: 0.1.0\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    assert install_command("umap") == expected
    assert shlex.split(install_command()) == shlex.split(expected.replace("[umap]", ""))
