"""The job's own settings read once without Beam (pipeline/job/argv.py, warm_start.py): the values
Beam's parser reads, the plain case told from everything else, and the warm-up it starts before
Beam's import being the one the run then uses."""

from __future__ import annotations

import argparse
import dataclasses
import os

import pytest

from beam_embed.models import warm_up
from beam_embed.pipeline.job.argv import add_job_flags, read_job_argv
from beam_embed.pipeline.job.beam_options import EmbedOptions, beam_options, parse
from beam_embed.pipeline.job.settings import RunSettings
from beam_embed.pipeline.job.warm_start import start_warm_up
from tests.job_helpers import parquet_rows, write_lines


def own_settings(argv):
    """The job's settings in the plain case, else None (an unreadable --config included)."""
    try:
        job = read_job_argv(argv, tentative=True)
    except ValueError:
        return None
    return job.settings if job.plain else None


def test_job_settings_read_what_beams_parser_reads(tmp_path):
    config = tmp_path / "job.yaml"
    config.write_text("pooling: [cls, mean]\nnormalize: false\nbatch_tokens: 4096\n"
                      "input: [a.txt, b.txt]\nclean: false\n")
    argv = ["--config", str(config), "--max-seq-length", "64", "--batch_tokens", "2048",
            "--precision", "bf16", "--output", "out/x", "-v"]
    settings, beam = own_settings(argv), parse(argv).view_as(EmbedOptions)
    assert settings is not None
    assert settings == RunSettings.from_namespace(beam)
    assert beam.verbose
    # the file's keys, the command line winning
    assert (settings.batch_tokens, settings.pooling, settings.input, settings.clean) == \
        (2048, ("cls", "mean"), ("a.txt", "b.txt"), False)


def test_the_job_flags_are_the_settings_and_verbose():
    parser = argparse.ArgumentParser(add_help=False)
    add_job_flags(parser)
    assert set(vars(parser.parse_args([]))) == \
        {f.name for f in dataclasses.fields(RunSettings)} | {"verbose"}


@pytest.mark.parametrize("argv", [
    ["--runner", "DirectRunner"],  # a runner named, even the default one
    ["--direct_num_workers=2", "--direct_running_mode=multi_processing"],
    ["--dry-run"],
    ["--poolng", "mean"],  # misspelled: the full parse says so
    ["--batch_tokens", "many"],  # a value argparse refuses
    ["--format", "csv"],  # a value the settings refuse
    ["--config", "missing.yaml"],
    ["--config", "BEAM_KEY"],
])
def test_anything_but_the_jobs_own_flags_is_not_the_plain_case(argv, tmp_path):
    beam_key = tmp_path / "beam.yaml"
    beam_key.write_text("runner: DataflowRunner\npooling: mean\n")
    argv = [str(beam_key) if a == "BEAM_KEY" else a for a in argv]
    assert own_settings(["--pooling", "mean"]) is not None
    assert own_settings(["--pooling", "mean", *argv]) is None


def test_the_early_warm_up_is_the_one_the_run_uses(fresh_export, loads, tmp_path):
    from beam_embed.pipeline.job.command import main

    corpus = write_lines(str(tmp_path / "c.txt"), ["the cat sat", "a dog ran"])
    out = str(tmp_path / "out")
    argv = ["--input", corpus, "--model", fresh_export, "--output", out, "--progress_every", "0",
            "--precision", "bf16"]
    encoder = os.path.join(fresh_export, "encoder")
    assert start_warm_up(read_job_argv(argv))
    warm_up.wait(encoder, "bf16")
    assert loads == [encoder + "_bf16"]  # the warm-up's load, before Beam's parse ran
    assert main(argv) == 0
    assert loads.count(encoder + "_bf16") == 1  # the run found it loaded and warm
    assert len(parquet_rows(out)) == 2


def test_a_run_that_will_be_refused_does_not_start_early(fresh_export, loads, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.json").write_text("{}")  # a previous run, and no --overwrite
    argv = ["--model", fresh_export, "--output", str(out)]
    assert not start_warm_up(read_job_argv(argv))
    assert loads == []
    assert start_warm_up(read_job_argv([*argv, "--overwrite"]))  # replacing it: the model is needed
    warm_up.wait(os.path.join(fresh_export, "encoder"), "fp32")
    assert loads == [os.path.join(fresh_export, "encoder")]


def test_a_bad_value_raises_what_the_full_parse_would(fresh_export, tmp_path):
    argv = ["--model", fresh_export, "--output", str(tmp_path / "o")]
    refused = read_job_argv([*argv, "--format", "csv"])  # by the settings' check: nothing starts
    assert not start_warm_up(refused)
    with pytest.raises(ValueError, match=r"unknown --format 'csv'; expected one or more of"):
        beam_options(refused)
    with pytest.raises(ValueError, match=r"unknown pooling 'avg'"):
        start_warm_up(read_job_argv([*argv, "--pooling", "avg"]))
