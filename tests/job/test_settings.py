"""RunSettings (pipeline/job/settings.py): the run's settings declared once. Constructed from
Python every value is normalized and checked, with one line naming the bad value and what is
expected; the command line's flags are made from the same fields and read back into the same
settings."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from beam_embed.pipeline.common import output_formats
from beam_embed.pipeline.common.settings.setting_fields import add_flags
from beam_embed.pipeline.job.settings import RunSettings


def _parsed(argv: list[str]) -> RunSettings:
    parser = argparse.ArgumentParser(allow_abbrev=False)
    add_flags(parser, RunSettings)
    return RunSettings.from_namespace(parser.parse_args(argv))


def test_defaults_and_keywords_from_python():
    default = RunSettings()
    assert (default.model, default.format, default.input, default.pooling) == \
        ("minilm", ("parquet", "tfrecord"), (), ())
    s = RunSettings(model="m", pooling="mean, cls", format=["parquet"], input="a.txt",
                    metadata_fields=("topic", "lang"), output="out/", reuse="gs://b/prev/",
                    progress_every=2)
    assert (s.pooling, s.format, s.input, s.metadata_fields) == \
        (("mean", "cls"), ("parquet",), ("a.txt",), ("topic", "lang"))
    assert (s.output, s.reuse) == ("out", "gs://b/prev")  # a folder without its last slash
    assert s.progress_every == 2.0 and isinstance(s.progress_every, float)
    assert dataclasses.replace(s, pooling="max").pooling == ("max",)  # checked again


@pytest.mark.parametrize("given, message", [
    ({"format": "parquet,csv"}, "unknown --format 'csv'; expected one or more of ['parquet', "
                                "'tfrecord', 'lance']"),
    ({"format": ""}, "unknown --format ''; expected one or more of"),
    ({"split": "words"}, "unknown --split 'words'; expected one of ['none', 'sentences', 'chunks']"),
    ({"vector_dtype": "int4"}, "unknown --vector_dtype 'int4'; expected one of ['float32', "
                               "'float16', 'int8', 'binary']"),
    ({"input_format": "xml"}, "unknown --input_format 'xml'; expected one of ['text', 'jsonl'"),
    ({"long_text": "split"}, "unknown --long_text 'split'; expected one of ['truncate', 'chunk']"),
    ({"precision": "fp64"}, "unknown --precision 'fp64'; expected one of ['fp32', 'bf16', "
                            "'fp16']"),
    ({"accelerator": "tpuv5"}, "unknown --accelerator 'tpuv5'; expected one of ['auto'"),
    ({"batch_tokens": 0}, "--batch_tokens must be a positive integer, got 0"),
    ({"max_seq_length": -3}, "--max_seq_length must be a positive integer, got -3"),
    ({"num_shards": -1}, "--num_shards must be 0 (the runner decides) or a positive number of "
                         "shards, got -1"),
    ({"progress_every": -1}, "--progress_every must be 0 (no progress lines)"),
    ({"batch_tokens": "many"}, "--batch_tokens must be an integer, got 'many'"),
    ({"batch_tokens": True}, "--batch_tokens must be an integer, got True"),
    ({"clean": "no"}, "--clean must be true or false, got 'no'"),
    ({"pooling": ["mean", 3]}, "--pooling must be a list of strings, got ['mean', 3]"),
    ({"vector_dtype": "int8", "granularity": "token"}, "--vector_dtype int8 applies to sentence "
                                                       "vectors; token vectors take --token_dtype"),
    ({"dedupe": True, "granularity": "token"}, "--dedupe applies to sentence vectors"),
    ({"reuse": "prev", "granularity": "token"}, "--reuse applies to sentence vectors"),
])
def test_a_bad_value_is_refused_naming_it(given, message):
    with pytest.raises(ValueError) as e:
        RunSettings(**given)
    assert message in str(e.value)


def test_unset_optional_values_are_not_checked():
    s = RunSettings(max_seq_length=None, precision=None, input_format=None, normalize=None)
    assert (s.max_seq_length, s.precision, s.input_format, s.normalize) == (None,) * 4


def test_metadata_fields_unset_is_not_the_empty_list():
    """Unset (None), the input decides which fields are carried (job/input_fields.py); '' on
    the command line, or an empty list, carries none."""
    assert RunSettings().metadata_fields is None and _parsed([]).metadata_fields is None
    assert RunSettings(metadata_fields="").metadata_fields == ()
    assert RunSettings(metadata_fields=[]).metadata_fields == ()
    assert _parsed(["--metadata_fields", ""]).metadata_fields == ()
    assert _parsed(["--metadata-fields", "topic, lang"]).metadata_fields == ("topic", "lang")


def test_formats_are_checked_against_the_registry_when_checked(monkeypatch):
    entry = output_formats.output_format("parquet")
    monkeypatch.setitem(output_formats.OUTPUT_FORMATS, "later", entry)
    assert RunSettings(format="parquet,later").format == ("parquet", "later")


def test_the_command_line_reads_into_the_same_settings():
    argv = ["--pooling", "mean,cls", "--batch-tokens", "64", "--no-clean", "--input", "a",
            "--input", "b", "--max_seq_length", "32", "--dedupe", "--normalize",
            "--format", "parquet", "--progress-every", "0.5"]
    assert _parsed(argv) == RunSettings(
        pooling=["mean", "cls"], batch_tokens=64, clean=False, input=["a", "b"],
        max_seq_length=32, dedupe=True, normalize=True, format="parquet", progress_every=0.5)
    assert _parsed([]) == RunSettings()
    assert _parsed(["--no-normalize"]).normalize is False
    with pytest.raises(ValueError, match="unknown --split 'words'"):
        _parsed(["--split", "words"])


def test_every_field_is_a_flag_in_both_spellings():
    parser = argparse.ArgumentParser()
    actions = {a.dest: a for a in add_flags(parser, RunSettings)}
    assert set(actions) == {f.name for f in dataclasses.fields(RunSettings)}
    for name, action in actions.items():
        dashed = "--" + name.replace("_", "-")
        assert {"--" + name, dashed} <= set(action.option_strings)
        negatable = isinstance(action, argparse.BooleanOptionalAction)
        assert negatable == (name in ("clean", "include_text", "normalize")), name
        assert (f"--no-{name.replace('_', '-')}" in action.option_strings) == negatable


def test_input_formats_are_the_readers_registry(monkeypatch):
    """--input_format's choices are read from the readers' registry when checked: a reader
    registered there is accepted, and named in the refusal of an unknown one."""
    from beam_embed.pipeline.job import formats

    with pytest.raises(ValueError, match=r"'xml'; expected one of \['text', .*'tfrecord'\]$"):
        RunSettings(input_format="xml")
    monkeypatch.setitem(formats.READERS, "xml", formats.read_text)
    assert RunSettings(input_format="xml").input_format == "xml"


def test_the_default_formats_are_the_registrys():
    assert RunSettings().format == ("parquet", "tfrecord") == output_formats.written_by_default()
