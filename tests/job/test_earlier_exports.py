"""A run whose recorded model fingerprint is not the model's now (an export made again by an
earlier version, whose exports were not deterministic) is still searched and reused when its
rows, embedded again with the model at its handles, agree with the stored vectors; another
model's weights at those handles are refused as before."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from beam_embed.pipeline.cli import main as cli
from beam_embed.process import exits
from tests.bert_reference import write_checkpoint
from tests.job_helpers import run_job, write_lines

pytestmark = pytest.mark.pipeline

TEXTS = [f"the river bank {i} and the money market {i % 7}" for i in range(40)]


def _recorded_elsewhere(output: str) -> None:
    """The manifest as an earlier version's export left it: another fingerprint."""
    path = os.path.join(output, "manifest.json")
    with open(path) as f:
        manifest = json.load(f)
    manifest["model"]["fingerprint"] = "0e" * 32
    with open(path, "w") as f:
        json.dump(manifest, f)


@pytest.fixture
def earlier_run(fresh_export, tmp_path):
    corpus = write_lines(str(tmp_path / "c.txt"), TEXTS)
    out = str(tmp_path / "run")
    run_job(out, "--input", corpus, "--model", fresh_export, "--format", "parquet")
    _recorded_elsewhere(out)
    return corpus, out


def test_a_run_of_an_earlier_export_is_searched_and_reused_when_its_rows_agree(
        earlier_run, fresh_export, tmp_path, capsys):
    corpus, out = earlier_run
    assert cli(["search", out, "river bank", "-k", "3"]) == exits.OK
    said = capsys.readouterr().err
    assert "rows embedded again agree" in said and "accepted" in said
    more = write_lines(str(tmp_path / "more.txt"), TEXTS + ["a new line about the bank"])
    again = str(tmp_path / "again")
    m = run_job(again, "--input", more, "--model", fresh_export, "--format", "parquet",
                "--reuse", out)
    assert m["counts"]["reused"] == len(TEXTS) and m["counts"]["encoded"] == 1
    assert "rows embedded again agree" in capsys.readouterr().err


def test_another_models_weights_at_the_handles_are_refused(earlier_run, fresh_export,
                                                           tmp_path, capsys):
    from beam_embed.models.export.convert import export_checkpoint

    _, out = earlier_run
    other = str(tmp_path / "other")
    write_checkpoint(str(tmp_path / "ckpt"), seed=3)
    export_checkpoint(str(tmp_path / "ckpt"), other, name="tiny-bert")
    shutil.rmtree(fresh_export)
    shutil.copytree(other, fresh_export)  # the same handle, other weights
    assert cli(["search", out, "river bank"]) == exits.BAD_CONFIG
    assert "is missing or changed since" in capsys.readouterr().err
