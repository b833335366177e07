"""Every command reads its flags the same way: both spellings of its own flags, a one-line error
with a did-you-mean hint for an unknown or misspelled one, exit code 2 for bad flags, and
nothing read or loaded before that."""

from __future__ import annotations

import importlib

import pytest

from beam_embed.pipeline.cli import COMMANDS, main
from beam_embed.pipeline.common.settings.command_line import FlagError

FOLLOW_UPS = sorted(set(COMMANDS) - {"run"})
# Enough positionals and required flags for each command's parser to accept.
MINIMAL = {"pca": ["--input", "in", "--output", "out"], "search": ["out", "a query"],
           "eval": [], "tokens": ["a text", "--model", "m"],
           "similarity": ["a sentence", "--words", "a"], "export-model": ["src", "out"],
           "cache": ["list"], "store": ["out", "lancedb:x"]}
MISSPELLED = {  # command -> (bad flag, what the hint names)
    "run": ("--poolin", "--pooling"), "pca": ("--colr-by", "--color-by"),
    "search": ("--max-char", "--max-chars"), "eval": ("--triplet", "--triplets"),
    "tokens": ("--jsn", "--json"), "similarity": ("--word", "--words"),
    "export-model": ("--nme", "--name"), "cache": ("--verbos", "--verbose"),
    "store": ("--store-tabel", "--store-table"),
}


def _parser(command):
    return importlib.import_module(COMMANDS[command][0]).parser()


def _one_line_error(capsys, argv) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith(f"beam-embed {argv[0]}: ")
    return captured.err


@pytest.mark.parametrize("command", FOLLOW_UPS)
def test_every_dashed_flag_has_its_underscore_twin(command):
    flags = _parser(command).known_flags()
    dashed = [f for f in flags if f.startswith("--") and "-" in f[2:]]
    assert all("--" + f[2:].replace("-", "_") in flags for f in dashed)


@pytest.mark.parametrize("command, flag, value, dest", [
    ("pca", "color-by", "topic", "color_by"), ("search", "max-chars", "5", "max_chars"),
    ("search", "block-rows", "9", "block_rows"), ("eval", "batch-size", "3", "batch_size"),
    ("eval", "max-seq-length", "16", "max_seq_length"),
])
def test_both_spellings_set_the_same_option(command, flag, value, dest):
    parser = _parser(command)
    dashed = parser.parse(MINIMAL[command] + [f"--{flag}", value], passthrough=True)[0]
    underscored = parser.parse(MINIMAL[command] + [f"--{flag.replace('-', '_')}", value],
                               passthrough=True)[0]
    assert str(getattr(dashed, dest)) == str(getattr(underscored, dest)) == value


def test_run_takes_both_spellings():
    from beam_embed.pipeline.job.beam_options import EmbedOptions, parse

    for flag in ("--batch_tokens", "--batch-tokens"):
        assert parse([flag, "77"]).view_as(EmbedOptions).batch_tokens == 77


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_misspelled_flag_is_one_line_with_a_hint(command, capsys):
    bad, meant = MISSPELLED[command]
    err = _one_line_error(capsys, [command, *MINIMAL.get(command, []), bad, "x"])
    assert f"unknown flag '{bad}'; did you mean {meant}" in err


def test_an_unknown_flag_without_a_near_one_points_at_help(capsys):
    err = _one_line_error(capsys, ["search", "out", "q", "--zzzzzz"])
    assert "unknown flag '--zzzzzz'; see `beam-embed search --help`" in err


def test_abbreviations_are_not_flags(capsys):
    err = _one_line_error(capsys, ["pca", *MINIMAL["pca"], "--comp", "3"])
    assert "unknown flag '--comp'; did you mean --components" in err


def test_beam_options_pass_through_pca_and_run():
    from beam_embed.pipeline.job.beam_options import parse
    from beam_embed.pipeline.pca.command import parse_args

    _, beam_args = parse_args(MINIMAL["pca"] + ["--runner", "DirectRunner",
                                                "--direct_num_workers", "2"])
    assert beam_args == ["--runner", "DirectRunner", "--direct_num_workers", "2"]
    assert parse(["--direct_num_workers=2"]).get_all_options()["direct_num_workers"] == 2


@pytest.mark.parametrize("argv, message", [
    (["pca", "--input", "in"], "the following arguments are required: --output"),
    (["pca", *MINIMAL["pca"], "--dims", "4"], "argument --dims: invalid choice: 4"),
    (["search", "out", "q", "-k", "0"], "-k must be a positive integer, got 0"),
    (["eval", "--batch_size", "0"], "--batch-size must be a positive integer, got 0"),
    (["run", "--batch_tokens", "many"], "argument --batch_tokens/--batch-tokens: invalid int "
                                        "value: 'many'"),
    (["tokens", "a text"], "the following arguments are required: --model"),
    (["similarity", "s", "--words", "a", "extra", "--layer"], "argument --layer: expected one "
                                                               "argument"),
])
def test_bad_values_exit_2_with_one_line(argv, message, capsys):
    assert message in _one_line_error(capsys, argv)


def test_flag_errors_are_value_errors():
    with pytest.raises(FlagError, match="unknown flag '--nope'"):
        _parser("tokens").parse(["t", "--model", "m", "--nope"])
    assert issubclass(FlagError, ValueError)  # every command prints ValueErrors as one line
