"""The model fingerprint through the commands: a run made before two lines of the export's
vocabulary were swapped is neither searched with the changed model nor copied into its runs by
--reuse (exit 2, naming the fingerprints); a run whose manifest holds the fingerprint an earlier
version computed for the same files is still searched and reused, and the commands say so."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from beam_embed.pipeline.cli import main as cli
from beam_embed.process import exits
from tests.job_helpers import run_job, write_lines

pytestmark = pytest.mark.pipeline  # whole runs, then search and --reuse through the commands

TEXTS = ["the cat sat on the mat", "a dog", "the river bank", "money is big"]
ARGS = ("--pooling", "mean", "--batch_tokens", "64", "--format", "parquet")


@pytest.fixture(scope="module")
def setup(tiny_export, tmp_path_factory):
    """(a copy of the export, the corpus, a run made with the copy)."""
    base = tmp_path_factory.mktemp("fingerprint")
    export = str(base / "export")
    shutil.copytree(tiny_export, export)
    corpus = write_lines(str(base / "c.txt"), TEXTS)
    out = str(base / "run")
    run_job(out, "--input", corpus, "--model", export, *ARGS)
    return export, corpus, out


def _swap_vocabulary_lines(export: str, tmp_path) -> str:
    changed = str(tmp_path / "changed")
    shutil.copytree(export, changed)
    vocab = os.path.join(changed, "preprocessor", "assets", "vocab.txt")
    with open(vocab, encoding="utf-8") as f:
        lines = f.read().splitlines()
    i, j = lines.index("cat"), lines.index("dog")
    lines[i], lines[j] = lines[j], lines[i]
    with open(vocab, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return changed


def _run(capsys, argv: list[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = cli(argv)
    return code, capsys.readouterr().err


def test_search_refuses_a_model_whose_vocabulary_changed(setup, tmp_path, capsys):
    export, _, out = setup
    changed = _swap_vocabulary_lines(export, tmp_path)
    code, err = _run(capsys, ["search", out, "a cat", "--model", changed])
    assert code == exits.BAD_CONFIG, err
    assert f"--model {changed!r} is tiny-bert (fingerprint " in err
    assert "a query must be embedded with the model of the stored vectors" in err


def test_reuse_refuses_a_run_made_before_the_vocabulary_changed(setup, tmp_path, capsys):
    export, corpus, out = setup
    changed = _swap_vocabulary_lines(export, tmp_path)
    code, err = _run(capsys, ["run", "--input", corpus, "--model", changed, *ARGS, "--output",
                              str(tmp_path / "new"), "--progress_every", "0", "--reuse", out])
    assert code == exits.BAD_CONFIG, err
    assert "it was embedded with other settings" in err and "model (fingerprint)" in err
    assert not os.path.exists(tmp_path / "new" / "manifest.json")


def _as_an_earlier_version_wrote_it(out: str, export: str, tmp_path) -> str:
    from beam_embed.models.saved_model import earlier_fingerprint

    old = str(tmp_path / "old")
    shutil.copytree(out, old)
    with open(os.path.join(old, "manifest.json")) as f:
        manifest = json.load(f)
    manifest["model"]["fingerprint"] = earlier_fingerprint(f"{export}/encoder",
                                                           f"{export}/preprocessor")
    manifest.pop("digests", None)
    with open(os.path.join(old, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    return old


def test_an_earlier_versions_fingerprint_is_accepted_and_said(setup, tmp_path, capsys):
    export, corpus, out = setup
    old = _as_an_earlier_version_wrote_it(out, export, tmp_path)
    code, err = _run(capsys, ["search", old, "a cat", "--json"])
    assert code == exits.OK, err
    assert (f"{old}: its manifest records the model's fingerprint as earlier versions of "
            "beam-embed computed it") in err
    new = str(tmp_path / "new")
    code, err = _run(capsys, ["run", "--input", corpus, "--model", export, *ARGS, "--output",
                              new, "--progress_every", "0", "--reuse", old])
    assert code == exits.OK, err
    assert f"--reuse {old}: its manifest records the model's fingerprint as earlier" in err
    with open(os.path.join(new, "manifest.json")) as f:
        assert json.load(f)["counts"]["reused"] == len(TEXTS)
