"""A preset's export is remade the same after `beam-embed cache clear` (or on another machine):
runs keep their model. A run whose manifest holds the fingerprint of an export made before
exports were deterministic (the preprocessor's table name held a memory address, so each export
of one checkpoint had its own fingerprint) is searched and reused with the same preset's new
export, and the commands say why in one line; another model's runs are still refused
(test_model_fingerprint.py)."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import tensorflow as tf

from beam_embed.models.export.convert import export_here
from beam_embed.models.saved_model import fingerprint
from beam_embed.pipeline.cli import main as cli
from beam_embed.process import exits
from tests.job_helpers import run_job, write_lines

pytestmark = pytest.mark.pipeline  # whole runs, then search and --reuse through the commands

TEXTS = ["the cat sat on the mat", "a dog", "the river bank", "money is big"]
ARGS = ("--pooling", "mean", "--batch_tokens", "64", "--format", "parquet")


def _old_style_export(checkpoint: str, out: str, monkeypatch) -> str:
    """The export as versions before this one wrote it: a named vocabulary table, whose name
    holds the repr (and memory address) of the vocabulary's Asset."""
    named = tf.lookup.StaticHashTable

    def with_name(initializer, default_value, experimental_is_anonymous=False):
        return named(initializer, default_value)

    with monkeypatch.context() as m:
        m.setattr(tf.lookup, "StaticHashTable", with_name)
        export_here(checkpoint, out, name="tiny-bert")
    with open(os.path.join(out, "preprocessor", "saved_model.pb"), "rb") as f:
        assert b"Asset object at 0x" in f.read()
    return fingerprint(f"{out}/encoder", f"{out}/preprocessor")


def _run(capsys, argv: list[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = cli(argv)
    return code, capsys.readouterr().err


def test_runs_survive_a_cleared_cache_and_old_fingerprints_of_the_same_checkpoint(
        tiny_checkpoint, tmp_path, monkeypatch, capsys):
    presets = tmp_path / "models.yaml"
    presets.write_text(f"tiny:\n  kind: bert\n  name: tiny-bert\n"
                       f"  checkpoint: {tiny_checkpoint[0]}\n  pooling: [mean]\n")
    monkeypatch.setenv("BEAM_EMBED_PRESETS", str(presets))
    monkeypatch.setenv("BEAM_EMBED_CACHE", str(tmp_path / "cache"))
    corpus = write_lines(str(tmp_path / "c.txt"), TEXTS)
    out = str(tmp_path / "run")
    made = run_job(out, "--input", corpus, "--model", "tiny", *ARGS)["model"]

    old = str(tmp_path / "old")  # the same run, as a version with address-holding exports wrote it
    shutil.copytree(out, old)
    with open(os.path.join(old, "manifest.json")) as f:
        manifest = json.load(f)
    recorded = _old_style_export(tiny_checkpoint[0], str(tmp_path / "old-export"), monkeypatch)
    assert recorded != made["fingerprint"]
    manifest["model"]["fingerprint"] = recorded
    manifest.pop("digests", None)
    with open(os.path.join(old, "manifest.json"), "w") as f:
        json.dump(manifest, f)

    assert cli(["cache", "clear"]) == 0
    code, err = _run(capsys, ["search", out, "a cat", "--model", "tiny", "--json"])
    assert code == exits.OK, err  # the export made again is the same model, byte for byte
    assert "fingerprint" not in err
    with open(os.path.join(tmp_path / "cache", os.path.basename(os.path.dirname(
            made["encoder"])), "preprocessor", "saved_model.pb"), "rb") as f:
        assert b" object at 0x" not in f.read()

    assert cli(["cache", "clear"]) == 0
    code, err = _run(capsys, ["search", old, "a cat"])  # its model's folder is gone
    assert code == exits.BAD_CONFIG
    assert "pass --model with the model it was embedded with (e.g. --model tiny: " in err
    entry = os.path.basename(os.path.dirname(made["encoder"]))
    said = (f"its manifest's model fingerprint {recorded} was taken over an earlier export of "
            f"the same checkpoint files in the same export format (cache entry {entry}, now "
            f"{made['fingerprint']})")
    code, err = _run(capsys, ["search", old, "a cat", "--model", "tiny", "--json"])
    assert code == exits.OK, err
    assert f"{old}: {said}" in err and err.count("fingerprint") == 1
    new = str(tmp_path / "new")
    code, err = _run(capsys, ["run", "--input", corpus, "--model", "tiny", *ARGS, "--output",
                              new, "--progress_every", "0", "--reuse", old])
    assert code == exits.OK, err
    assert f"--reuse {old}: {said}" in err
    with open(os.path.join(new, "manifest.json")) as f:
        written = json.load(f)
    assert written["counts"]["reused"] == len(TEXTS)
    assert written["model"]["fingerprint"] == made["fingerprint"]
