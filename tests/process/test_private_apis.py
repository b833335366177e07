"""Each private API of beam_embed/process/private_apis.py still there, with the signature and the
behaviour relied on: a Beam or Python upgrade that changes one fails here, by name."""

from __future__ import annotations

import argparse
import atexit
import inspect

import apache_beam as beam
import pytest

from beam_embed.process import private_apis


def _params(fn) -> list[str]:
    return list(inspect.signature(fn).parameters)


# argparse


def test_argparse_formatter_hooks_are_the_ones_help_calls():
    for hook in ("_format_action_invocation", "_get_help_string"):
        assert _params(getattr(argparse.HelpFormatter, hook)) == ["self", "action"], hook

    class Shown(private_apis.HelpFormatterHooks):
        def shown_option_strings(self, action):
            return [s for s in action.option_strings if "_" not in s]

        def help_text(self, action):
            return "help: " + (action.help or "")

    parser = argparse.ArgumentParser(prog="p", formatter_class=Shown, add_help=False)
    parser.add_argument("--a-b", "--a_b", help="x")
    text = parser.format_help()
    assert "--a-b A_B" in text and "--a_b" not in text and "help: x" in text


def test_an_option_string_added_after_add_argument_parses():
    parser = argparse.ArgumentParser(add_help=False)
    action = parser.add_argument("--a_b", type=int)
    assert private_apis.add_option_string(parser, action, "--a-b")
    assert not private_apis.add_option_string(parser, action, "--a-b")  # taken
    assert parser.parse_args(["--a-b", "3"]).a_b == 3
    assert private_apis.option_strings(parser) == {"--a_b", "--a-b"}


def test_atexit_handlers_run_now_and_once():
    # In a child process: running this process's handlers would run TensorFlow's and Keras's
    # clean-ups too, and break the tests that use them afterwards.
    import subprocess
    import sys

    assert callable(getattr(atexit, "_run_exitfuncs", None)), "atexit._run_exitfuncs is gone"
    script = ("import atexit\n"
              "from beam_embed.process import private_apis\n"
              "ran = []\n"
              "atexit.register(ran.append, 1)\n"
              "private_apis.run_atexit_handlers()\n"
              "first = list(ran)\n"
              "private_apis.run_atexit_handlers()\n"
              "print(first, ran)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.split("\n")[0] == "[1] [1]"  # ran now, then cleared as an exit leaves them


# Beam


def test_beams_argument_parser_takes_value_provider_arguments():
    from apache_beam.options.pipeline_options import StandardOptions

    parser = private_apis.beam_argument_parser()(allow_abbrev=False)
    assert hasattr(parser, "add_value_provider_argument")
    private_apis.add_beam_options(StandardOptions, parser)
    assert "--runner" in private_apis.option_strings(parser)


def test_sort_and_batch_dofn_sorts_its_buffer_into_batches_at_bundle_end():
    cls = private_apis.sort_and_batch_dofn()
    assert issubclass(cls, beam.DoFn)
    assert _params(cls.__init__) == ["self", "min_batch_size", "max_batch_size",
                                     "max_batch_weight", "element_size_fn"]
    fn = cls(1, 2, 100, len)
    fn.start_bundle()
    for element in ("ccc", "a", "bb", "dddd"):
        fn.process(element)
    assert fn._buffer == ["ccc", "a", "bb", "dddd"]  # the job's subclass reads and sets it
    batches = [wv.value for wv in fn.finish_bundle()]
    assert batches == [["a", "bb"], ["ccc", "dddd"]]


def test_masked_crc32c_is_tfrecords():
    crc = 0xE3069283  # CRC32C of b"123456789", the algorithm's check value
    masked = (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    assert private_apis.masked_crc32c()(b"123456789") == masked


def test_state_sampling_period_is_the_samplers_one_default(monkeypatch):
    from apache_beam.runners.worker import statesampler

    init = statesampler.StateSampler.__init__
    assert init.__defaults__ == (statesampler.DEFAULT_SAMPLING_PERIOD_MS,) or \
        init.__defaults__ == (20,)  # set already by a run in this process
    assert _params(init)[-1] == "sampling_period_ms"
    monkeypatch.setattr(init, "__defaults__", (statesampler.DEFAULT_SAMPLING_PERIOD_MS,))
    assert private_apis.set_state_sampling_period(7)
    assert init.__defaults__ == (7,)
    monkeypatch.setattr(init, "__defaults__", (150,))  # not Beam's default: left alone
    assert not private_apis.set_state_sampling_period(7) and init.__defaults__ == (150,)


def test_worker_command_lines_are_where_the_prefix_goes(monkeypatch):
    from apache_beam.runners.portability import local_job_service

    worker = local_job_service.SubprocessSdkWorker
    monkeypatch.setattr(worker, "run", worker.run)  # restored after the test
    assert "_worker_command_line" in worker.__init__.__code__.co_names
    assert "_worker_command_line" in inspect.getsource(inspect.unwrap(worker.run))
    seen = []
    monkeypatch.setattr(worker, "run", lambda self: seen.append(self._worker_command_line))
    assert private_apis.prefix_worker_command_lines("echo; ")
    fake = worker.__new__(worker)
    fake._worker_command_line = "python -m worker"
    worker.run(fake)
    assert seen == ["echo; python -m worker"]


def test_dataflow_client_pieces_the_offline_client_sets():
    from apache_beam.runners.dataflow.internal import apiclient

    assert isinstance(private_apis.dataflow_environment_major_version(), str)
    source = inspect.getsource(apiclient.DataflowApplicationClient.__init__)
    for name in ("standard_options", "google_cloud_options", "_enable_caching",
                 "_root_staging_location", "environment_version", "_sdk_image_overrides"):
        assert f"self.{name}" in source, name  # what pipeline/job/dataflow/offline.py sets
    assert callable(apiclient.DataflowApplicationClient._get_sdk_image_overrides)


@pytest.mark.parametrize("path, remote", [("gs://b/sdk.tar.gz", True), ("/tmp/sdk.tar.gz", False),
                                          ("default", False)])
def test_the_stagers_remote_paths(path, remote):
    assert private_apis.is_remote_path(path) is remote
