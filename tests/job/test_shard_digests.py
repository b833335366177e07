"""Each shard's size and SHA-256 in the manifest, hashed as it is written, and every reader
(`search`, `pca`, `run --reuse`, read_embeddings) reading exactly the run its manifest
describes: a shard swapped for one of a --no-normalize run with the same rows is refused, a run
replaced by another between the check and the read is named once read (nothing printed,
copied or published from it), and a run of an earlier version without digests is still read,
saying so."""

from __future__ import annotations

import hashlib
import json
import os
import shutil

import numpy as np
import pytest

from beam_embed import read_embeddings
from beam_embed.pipeline.cli import main as cli
from beam_embed.pipeline.common.finished_run import shards
from beam_embed.pipeline.common.settings.errors import IncompleteInput
from beam_embed.pipeline.job import reuse
from beam_embed.pipeline.pca import job as pca_job
from beam_embed.pipeline.search import corpus as search_corpus
from beam_embed.process import exits
from tests.job_helpers import parquet_rows, run_job, write_lines
from tests.pca.fixtures import without_digests

pytestmark = pytest.mark.pipeline  # whole runs, then each reader through its command

TEXTS = [f"the {a} {b} sat on the mat" for a in ("cat", "dog", "big", "small")
         for b in ("river", "bank", "money", "play")]
ARGS = ("--pooling", "mean", "--batch_tokens", "64", "--format", "parquet")
UNIT = (*ARGS, "--normalize")  # the settings of the run reused


@pytest.fixture(scope="module")
def runs(tiny_export, tmp_path_factory):
    """(the corpus, a normalized run of it, a --no-normalize run of the same file)."""
    base = tmp_path_factory.mktemp("digests")
    corpus = write_lines(str(base / "c.txt"), TEXTS)
    unit, raw = str(base / "unit"), str(base / "raw")
    run_job(unit, "--input", corpus, "--model", tiny_export, *UNIT)
    run_job(raw, "--input", corpus, "--model", tiny_export, *ARGS, "--no-normalize")
    return corpus, unit, raw


def _sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _manifest(folder) -> dict:
    with open(os.path.join(folder, "manifest.json")) as f:
        return json.load(f)


@pytest.mark.parametrize("flags", [(), ("--num_shards", "2")])  # written in bundles; by Beam's sink
def test_the_manifest_records_each_shard_as_it_was_written(tiny_export, runs, tmp_path, flags):
    out = str(tmp_path / "out")
    manifest = run_job(out, "--input", runs[0], "--model", tiny_export, "--pooling", "mean",
                       "--format", "parquet,tfrecord", *flags)
    shards_written = [n for names in manifest["files"].values() for n in names]
    assert sorted(manifest["digests"]) == sorted(shards_written)
    for name in shards_written:
        path = os.path.join(out, name)
        assert manifest["digests"][name] == {"bytes": os.path.getsize(path),
                                             "sha256": _sha256(path)}
    assert sorted(os.listdir(out)) == sorted([*shards_written, *manifest["errors_files"],
                                              "manifest.json"])  # nothing else left behind


@pytest.fixture
def swapped(runs, tmp_path) -> tuple[str, str]:
    """A copy of the normalized run whose shard is the --no-normalize run's: (copy, shard)."""
    _, unit, raw = runs
    copy = str(tmp_path / "swapped")
    shutil.copytree(unit, copy)
    name = _manifest(unit)["files"]["parquet"][0]
    shard = os.path.join(copy, name)
    assert os.path.getsize(os.path.join(raw, name)) == os.path.getsize(shard)  # same rows, size
    shutil.copy(os.path.join(raw, name), shard)
    norms = np.linalg.norm([r["mean"] for r in parquet_rows(copy).values()], axis=1)
    assert norms.max() > 1.5  # what a reader would take for unit vectors
    return copy, shard


def _run(capsys, argv: list[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(err: str, prog: str) -> str:
    lines = [x for x in err.splitlines() if x.startswith(f"beam-embed {prog}:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


SWAPPED = "is not the file {}/manifest.json lists: its SHA-256 differs"


def test_search_and_pca_refuse_a_swapped_shard(swapped, tmp_path, capsys):
    copy, shard = swapped
    code, out, err = _run(capsys, ["search", copy, "the cat"])
    assert code == exits.INCOMPLETE_INPUT and out == ""
    assert _one_line(err, "search") == f"beam-embed search: {shard} {SWAPPED.format(copy)} " \
        "from the one recorded as the run wrote it (it was replaced or changed since); restore " \
        "it or rerun the job"
    viz = tmp_path / "viz"
    code, _, err = _run(capsys, ["pca", "--input", copy, "--output", str(viz),
                                 "--components", "2"])
    assert code == exits.INCOMPLETE_INPUT and not viz.exists()
    assert f"{shard} {SWAPPED.format(copy)}" in _one_line(err, "pca")
    with pytest.raises(IncompleteInput, match="its SHA-256 differs"):
        read_embeddings(copy)


def test_reuse_refuses_a_swapped_shard(swapped, runs, tiny_export, tmp_path, capsys):
    copy, shard = swapped
    out = str(tmp_path / "out")
    code, _, err = _run(capsys, ["run", "--input", runs[0], "--model", tiny_export, *UNIT,
                                 "--output", out, "--progress_every", "0", "--reuse", copy])
    assert code == exits.BAD_CONFIG
    line = _one_line(err, "run")
    assert line.startswith(f"beam-embed run: --reuse {copy!r}: its shards are incomplete or "
                           f"changed: {shard} {SWAPPED.format(copy)}")
    assert not os.path.exists(os.path.join(out, "manifest.json"))


def _replace_run(folder: str, other: str) -> None:
    """`other`'s run moved into `folder` in place of the run there, each file renamed in (new
    files, as another run's --overwrite publishes them)."""
    for name in os.listdir(folder):
        os.remove(os.path.join(folder, name))
    for name in sorted(os.listdir(other), key=lambda n: n == "manifest.json"):  # manifest last
        shutil.copy(os.path.join(other, name), os.path.join(folder, name + ".new"))
        os.replace(os.path.join(folder, name + ".new"), os.path.join(folder, name))


def _replaced_after(monkeypatch, module, name: str, folder: str, other: str) -> None:
    """`module.name` runs as it is, then `folder`'s run is replaced by `other`'s: a concurrent
    --overwrite between the reader's check and its read."""
    checked = getattr(module, name)

    def then_replaced(*args, **kwargs):
        found = checked(*args, **kwargs)
        _replace_run(folder, other)
        return found

    monkeypatch.setattr(module, name, then_replaced)


def test_reuse_of_a_run_replaced_before_it_is_read_publishes_nothing(runs, tiny_export,
                                                                     tmp_path, capsys,
                                                                     monkeypatch):
    corpus, unit, raw = runs
    previous = str(tmp_path / "previous")
    shutil.copytree(unit, previous)
    _replaced_after(monkeypatch, reuse, "previous_run", previous, raw)
    out = str(tmp_path / "out")
    code, _, err = _run(capsys, ["run", "--input", corpus, "--model", tiny_export, *UNIT,
                                 "--output", out, "--progress_every", "0", "--reuse", previous])
    assert code == exits.INCOMPLETE_INPUT, err
    assert "was replaced or changed while it was read" in _one_line(err, "run")
    assert not os.path.exists(os.path.join(out, "manifest.json"))  # nothing published


def test_search_pca_and_read_embeddings_of_a_run_replaced_before_it_is_read(runs, tmp_path,
                                                                           capsys, monkeypatch):
    _, unit, raw = runs
    searched = str(tmp_path / "searched")
    shutil.copytree(unit, searched)
    _replaced_after(monkeypatch, search_corpus, "load_corpus", searched, raw)
    code, out, err = _run(capsys, ["search", searched, "the cat", "--json"])
    assert code == exits.INCOMPLETE_INPUT and out == ""
    assert "was replaced or changed while it was read" in _one_line(err, "search")

    projected, viz = str(tmp_path / "projected"), tmp_path / "viz"
    shutil.copytree(unit, projected)
    _replaced_after(monkeypatch, pca_job, "check", projected, raw)
    code, _, err = _run(capsys, ["pca", "--input", projected, "--output", str(viz),
                                 "--components", "2"])
    assert code == exits.INCOMPLETE_INPUT
    assert "was replaced or changed while it was read" in _one_line(err, "pca")
    assert not (viz / "manifest.json").exists()

    read = str(tmp_path / "read")
    shutil.copytree(unit, read)
    _replaced_after(monkeypatch, shards, "check_shards", read, raw)
    with pytest.raises(IncompleteInput, match="was replaced or changed while it was read"):
        read_embeddings(read)


def test_a_run_of_an_earlier_version_without_digests_is_read_and_said(runs, tiny_export,
                                                                      tmp_path, capsys):
    corpus, unit, _ = runs
    old = str(tmp_path / "old")
    shutil.copytree(unit, old)
    without_digests(old)
    said = (f"{old}/manifest.json records no checksums of its shards (a run of an earlier "
            "version): they are checked by their sizes and row counts only")
    code, out, err = _run(capsys, ["search", old, "the cat", "--json"])
    assert code == exits.OK and said in err and json.loads(out)[0]["hits"]
    new = str(tmp_path / "new")
    code, _, err = _run(capsys, ["run", "--input", corpus, "--model", tiny_export, *UNIT,
                                 "--output", new, "--progress_every", "0", "--reuse", old])
    assert code == exits.OK and f"--reuse {old}: {said}" in err
    assert _manifest(new)["counts"]["reused"] == len(TEXTS)
