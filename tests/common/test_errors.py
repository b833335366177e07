"""Errors become one line naming the file and the cause; tracebacks only when asked for."""

from __future__ import annotations

import errno
import os

import apache_beam as beam
import pytest
import yaml
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

from beam_embed.pipeline.common.settings.errors import IncompleteInput, one_line, one_line_errors
from beam_embed.process import exits


def _fill_device(x):
    with open("/dev/full", "wb") as f:  # every write fails: ENOSPC, as on a full disk
        f.write(b"x" * 65536)
        f.flush()
    return x


def _beam_error() -> BaseException:
    try:
        with beam.Pipeline(runner=FnApiRunner()) as p:
            _ = p | beam.Create([1]) | "WriteShards" >> beam.Map(_fill_device)
    except Exception as e:  # what the runner raises: its own wrapper around the step's error
        return e
    raise AssertionError("writing to /dev/full succeeded")


def test_beam_step_error_is_its_innermost_cause_and_step():
    error = _beam_error()
    assert one_line(error) == f"{os.strerror(errno.ENOSPC)} (in step WriteShards)"


def _unknown_value(x):
    raise ValueError(f"no such value: {x}")


@pytest.mark.pipeline  # worker processes start
@pytest.mark.parametrize("step, expected", [
    (_fill_device, f"{os.strerror(errno.ENOSPC)} (in step WriteShards)"),
    (_unknown_value, "ValueError: no such value: 1 (in step WriteShards)")])
def test_a_step_that_failed_in_a_worker_process_is_its_innermost_cause_and_step(step, expected):
    """There the runner gets the step's error as the text of the worker's traceback (which was
    the line: `RuntimeError: Traceback (most recent call last):`)."""
    from apache_beam.options.pipeline_options import PipelineOptions

    options = PipelineOptions(["--direct_num_workers", "1",
                               "--direct_running_mode", "multi_processing"])
    with pytest.raises(Exception) as raised:
        with beam.Pipeline(runner=FnApiRunner(), options=options) as p:
            _ = p | beam.Create([1]) | "WriteShards" >> beam.Map(step)
    assert "Traceback (most recent call last):" in str(raised.value)  # only its text came back
    assert one_line(raised.value) == expected


def test_os_yaml_and_plain_errors():
    with pytest.raises(FileNotFoundError) as missing:
        open("/nonexistent/config.yaml")
    assert one_line(missing.value) == "No such file or directory: /nonexistent/config.yaml"
    with pytest.raises(yaml.YAMLError) as bad:
        yaml.safe_load("a: [1\n")
    line = one_line(bad.value)
    assert "\n" not in line and "line 2, column 1" in line and line.startswith("ParserError")
    assert one_line(KeyError("poolings")) == "KeyError: 'poolings'"
    # a library's OSError with a number where its text goes (distributed's timeouts)
    assert one_line(TimeoutError(110, 60)) == "[Errno 110] 60"


def test_command_prints_one_line_and_returns_the_errors_code(capsys, monkeypatch):
    monkeypatch.setenv("BEAM_EMBED_VERBOSE", "0")  # restored after the test: --debug sets it
    @one_line_errors("beam-embed test")
    def main(argv):
        try:
            open(argv[0])
        except OSError as e:
            raise IncompleteInput(f"{argv[0]} is missing") from e

    assert main(["/nonexistent/shard.parquet"]) == exits.INCOMPLETE_INPUT
    err = capsys.readouterr().err
    assert err == "beam-embed test: /nonexistent/shard.parquet is missing\n"

    assert main(["--debug", "/nonexistent/shard.parquet"]) == exits.INCOMPLETE_INPUT
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "FileNotFoundError" in err
    assert err.splitlines()[-1] == "beam-embed test: /nonexistent/shard.parquet is missing"


def test_unexpected_error_is_failed(capsys, monkeypatch):
    monkeypatch.setenv("BEAM_EMBED_VERBOSE", "0")

    @one_line_errors("beam-embed test")
    def main(argv):
        return _beam_error() and [][1]

    assert main([]) == exits.FAILED
    assert capsys.readouterr().err == "beam-embed test: IndexError: list index out of range\n"
