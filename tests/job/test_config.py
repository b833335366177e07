"""Bad configuration fails before any data is read, naming the bad value and the choices."""

from __future__ import annotations

import os

import pytest

from beam_embed.pipeline.job.command import main
from tests.job_helpers import parquet_rows, run_job, write_lines

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end


@pytest.fixture()
def corpus(tmp_path):
    return write_lines(str(tmp_path / "corpus.txt"), ["the cat sat", "a dog"])


@pytest.mark.parametrize("args, message", [
    (["--pooling", "mean,avg"], "unknown pooling 'avg'; expected one of ['cls', 'lasttoken', 'max', 'mean', 'mean_sqrt_len_tokens', 'pooled_output', 'weightedmean']"),
    (["--pooling", "mean@-9"], "asks for layer -9, but the model has 2 layers"),
    (["--pooling", "pooled_output@1"], "takes no layer"),
    (["--format", "parquet,csv"], "unknown --format 'csv'; expected one or more of ['parquet', 'tfrecord', 'lance']"),
    (["--long-text", "split"], "unknown --long_text 'split'; expected one of ['truncate', 'chunk']"),
    (["--split", "words"], "unknown --split 'words'; expected one of ['none', 'sentences', 'chunks']"),
    (["--poolng", "mean"], "unknown flag '--poolng'; did you mean --pooling?"),
    (["--max-seq-length", "0"], "--max_seq_length must be a positive integer, got 0"),
])
def test_bad_flags_fail_before_reading(tiny_export, corpus, tmp_path, capsys, args, message):
    out = tmp_path / "out"
    code = main(["--input", corpus, "--model", tiny_export, "--output", str(out), *args])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_unknown_model_names_the_presets(corpus, tmp_path, capsys):
    assert main(["--input", corpus, "--model", "bert-huge", "--output", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "unknown model 'bert-huge'" in err and "'minilm'" in err and "'elmo'" in err


@pytest.mark.parametrize("handle, message", [
    (os.path.join("no", "such", "folder"), "is not a folder"),
    ("https://nonexistent.invalid/encoder", "cannot load model handle 'https://nonexistent.invalid/encoder'"),
])
def test_unreadable_handles(corpus, tiny_export, tmp_path, capsys, handle, message):
    code = main(["--input", corpus, "--encoder", handle, "--preprocessor",
                 os.path.join(tiny_export, "preprocessor"), "--output", str(tmp_path / "o")])
    assert code == 2 and message in capsys.readouterr().err


def test_config_file_with_flag_overrides(tiny_export, corpus, tmp_path):
    cfg = tmp_path / "job.yaml"
    cfg.write_text(f"model: {tiny_export}\npooling: [cls, mean]\nformat: parquet\n"
                   f"include_text: false\ninput: [{corpus}]\n")
    out = str(tmp_path / "out")
    manifest = run_job(out, "--config", str(cfg), "--pooling", "mean")
    assert [p["column"] for p in manifest["poolings"]] == ["mean"]
    assert manifest["formats"] == ["parquet"] and manifest["text_column"] is False
    assert "text" not in next(iter(parquet_rows(out).values()))


def test_command_line_input_replaces_the_configs_list(tiny_export, corpus, tmp_path, capsys):
    """The config's own corpus is not embedded beside the one the command line names, and the
    dry run checks the one the command line names."""
    other = write_lines(str(tmp_path / "other.txt"), ["money is big", "the river bank", "a boat"])
    cfg = tmp_path / "job.yaml"
    cfg.write_text(f"model: {tiny_export}\ninput: [{corpus}]\nformat: parquet\n")
    out = str(tmp_path / "out")
    manifest = run_job(out, "--config", str(cfg), "--input", other)
    assert sorted(parquet_rows(out)) == [f"{other}:{n}" for n in (1, 2, 3)]
    assert manifest["counts"]["read"] == 3
    capsys.readouterr()
    missing = str(tmp_path / "missing.txt")
    assert main(["--config", str(cfg), "--input", missing, "--output", str(tmp_path / "o"),
                 "--dry-run"]) == 2
    assert f"--input {missing!r} matches no file" in capsys.readouterr().err


def test_command_line_model_beats_the_configs_encoder(tiny_export, corpus, tmp_path):
    """The config's encoder and preprocessor (which would override --model) are its model's:
    --model on the command line replaces them."""
    cfg = tmp_path / "job.yaml"
    cfg.write_text(f"encoder: {tmp_path / 'no-such-encoder'}\n"
                   f"preprocessor: {tmp_path / 'no-such-preprocessor'}\n"
                   f"input: [{corpus}]\nformat: parquet\n")
    manifest = run_job(str(tmp_path / "out"), "--config", str(cfg), "--model", tiny_export)
    assert manifest["model"]["encoder"] == os.path.join(tiny_export, "encoder")


def test_a_repeated_beam_flag_replaces_the_configs_list(tmp_path):
    from beam_embed.pipeline.job.beam_options import parse

    cfg = tmp_path / "job.yaml"
    cfg.write_text("extra_packages: [a.tar.gz, b.tar.gz]\nrunner: DirectRunner\n")
    options = parse(["--config", str(cfg), "--extra_package", "/c.tar.gz"]).get_all_options()
    assert options["extra_packages"] == ["/c.tar.gz"] and options["runner"] == "DirectRunner"


def test_config_file_unknown_key(tmp_path, capsys):
    cfg = tmp_path / "job.yaml"
    cfg.write_text("poolings: [mean]\n")
    assert main(["--config", str(cfg), "--output", str(tmp_path / "o")]) == 2
    assert "unknown key 'poolings'" in capsys.readouterr().err


def test_refuses_to_overwrite_without_flag(tiny_export, corpus, tmp_path, capsys):
    out = str(tmp_path / "out")
    run_job(out, "--input", corpus, "--model", tiny_export)
    assert main(["--input", corpus, "--model", tiny_export, "--output", out]) == 2
    assert "pass --overwrite" in capsys.readouterr().err
    run_job(out, "--input", corpus, "--model", tiny_export, "--overwrite", "--format", "parquet")
    assert not [f for f in os.listdir(out) if f.endswith(".tfrecord")]
