"""Every private API of Beam, Python's argparse and atexit the project relies on, in one place.

Each is something no public API offers (why is said beside it), named here under a public name;
tests/process/test_private_apis.py checks that each still exists with the signature and the
behaviour relied on, so a Beam or Python upgrade that changes one fails there, by name, instead
of somewhere in a run. Nothing heavy is imported at module import time: `--help` and flag
errors import this module too (its argparse part), and Beam's pieces are imported by the
functions that hand them out.

Elsewhere, by layer: models/hub_loader.py marks a loaded TF1 Hub module as `hub.load` does
(`_is_hub_module_v1`), and beam_embed/process/gcs_auth.py reaches Beam's credential helpers; each
is tested beside its use.
"""

from __future__ import annotations

import argparse
import functools

# argparse ------------------------------------------------------------------------------------


class HelpFormatterHooks(argparse.RawDescriptionHelpFormatter):
    """argparse's help formatter with its two private hooks (a flag's spellings as shown, its
    help text) under public names: argparse documents the formatter classes, not their
    methods, and offers no other way to show one spelling of a flag or a default."""

    def shown_option_strings(self, action: argparse.Action) -> list[str]:
        return list(action.option_strings)

    def help_text(self, action: argparse.Action) -> str:
        return super()._get_help_string(action)

    def _format_action_invocation(self, action):
        shown = self.shown_option_strings(action)
        if shown != action.option_strings:
            action = argparse.Action(shown, action.dest, action.nargs, action.const,
                                     action.default, action.type, action.choices,
                                     action.required, action.help, action.metavar)
        return super()._format_action_invocation(action)

    def _get_help_string(self, action):
        return self.help_text(action)


def add_option_string(parser: argparse.ArgumentParser, action: argparse.Action,
                      flag: str) -> bool:
    """Makes `flag` one more spelling of `action` (already on `parser`); False when another
    action has it. argparse takes every spelling at add_argument time and has no public way to
    add one after (a BooleanOptionalAction makes its --no-x spellings itself)."""
    if flag in parser._option_string_actions:
        return False
    action.option_strings.append(flag)
    parser._option_string_actions[flag] = action
    return True


def option_strings(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string `parser` takes (both spellings, --no-x). argparse keeps its actions
    private, and Beam's options add theirs to the parser Beam hands them."""
    return {s for a in parser._actions for s in a.option_strings}


# atexit --------------------------------------------------------------------------------------


def run_atexit_handlers() -> None:
    """Runs (and clears) the `atexit` handlers now, as a normal exit would: for a process that
    ends through os._exit, which skips them. atexit has no public way to run them; a Python
    without the private function runs none (what os._exit alone does)."""
    import atexit

    run = getattr(atexit, "_run_exitfuncs", None)
    if run is not None:
        run()


# Beam ----------------------------------------------------------------------------------------


def beam_argument_parser() -> type[argparse.ArgumentParser]:
    """The parser class Beam's PipelineOptions parse with: its options' `_add_argparse_args`
    call its `add_value_provider_argument`, which a plain ArgumentParser lacks."""
    from apache_beam.options.pipeline_options import _BeamArgumentParser

    return _BeamArgumentParser


def add_beam_options(options_class, parser: argparse.ArgumentParser) -> None:
    """Adds a PipelineOptions subclass's flags to `parser`: `_add_argparse_args` is the hook
    Beam's documentation tells options classes to override; Beam calls it the same way."""
    options_class._add_argparse_args(parser)


def sort_and_batch_dofn() -> type:
    """The DoFn behind `beam.SortAndBatchElements` for the global window:
    `(min_batch_size, max_batch_size, max_batch_weight, element_size_fn)`, buffering each
    element in `self._buffer` and, at `finish_bundle`, sorting the buffer by size and emitting
    its batches (WindowedValues) with the buffer cleared. The job's windowed variant
    (pipeline/job/batching.py) subclasses it to sort windows of a bundle; Beam exposes only the
    whole-bundle transform."""
    from apache_beam.transforms.util import _SortAndBatchElementsDoFn

    return _SortAndBatchElementsDoFn


@functools.cache
def masked_crc32c():
    """TFRecord's masked CRC32C of a bytes value (Beam's, with its fast crc32c when installed):
    the framing of a TFRecord, which Beam's TFRecord sink writes a record at a time only."""
    from apache_beam.io.tfrecordio import _TFRecordUtil

    return _TFRecordUtil._masked_crc32c


def set_state_sampling_period(period_ms: int) -> bool:
    """Makes the state samplers this process creates from now on sample every `period_ms`;
    False (nothing changed) when Beam's StateSampler no longer takes the period as its one
    default argument, Beam's DEFAULT_SAMPLING_PERIOD_MS. Beam has no option for the period."""
    from apache_beam.runners.worker import statesampler

    init = statesampler.StateSampler.__init__
    if init.__defaults__ == (period_ms,):
        return True
    if init.__defaults__ != (statesampler.DEFAULT_SAMPLING_PERIOD_MS,):
        return False
    init.__defaults__ = (period_ms,)
    return True


def prefix_worker_command_lines(prefix: str) -> bool:
    """Makes the worker processes a local multi-process run starts (Beam's
    SubprocessSdkWorker, through `sh -c`) run `prefix` before their command line; False
    (nothing changed) when the worker no longer keeps its command line where this expects.
    Beam offers no hook on how it starts them."""
    from apache_beam.runners.portability import local_job_service

    worker = local_job_service.SubprocessSdkWorker
    if getattr(worker.run, "command_line_prefix", None) == prefix:
        return True
    if "_worker_command_line" not in worker.__init__.__code__.co_names:  # where run reads it
        return False
    start = worker.run

    @functools.wraps(start)
    def run(self):
        line = self._worker_command_line
        if isinstance(line, str) and not line.startswith(prefix):
            self._worker_command_line = prefix + line
        return start(self)

    run.command_line_prefix = prefix
    worker.run = run
    return True


def dataflow_environment_major_version() -> str:
    """The Fn API environment version Beam's Dataflow client puts in a job (set by its
    constructor, which the offline client skips: it fetches credentials)."""
    from apache_beam.runners.dataflow.internal import apiclient

    return apiclient._FNAPI_ENVIRONMENT_MAJOR_VERSION


def is_remote_path(path: str) -> bool:
    """Whether Beam's stager would download `path` rather than read it locally."""
    from apache_beam.runners.portability.stager import Stager

    return Stager._is_remote_path(path)
