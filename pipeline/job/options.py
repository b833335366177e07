"""The job's own flags, as a Beam PipelineOptions subclass; runner flags stay Beam's.

`--config FILE.yaml` supplies flags as keys (underscored names); flags on the command line win.
Unknown flags or keys are errors (Beam itself only warns and drops them).
"""

from __future__ import annotations

import argparse

from apache_beam.options.pipeline_options import PipelineOptions

from pipeline.common.flags import beam_flags, check_beam_args
from pipeline.dataflow.options import DryRunOptions  # noqa: F401  (its flags join Beam's parser)
from pipeline.job.flag_values import config_argv
from pipeline.job.flags import add_job_flags


class EmbedOptions(PipelineOptions):
    @classmethod
    def _add_argparse_args(cls, parser):
        add_job_flags(parser)


def parse(argv: list[str]) -> PipelineOptions:
    """argv (with an optional --config) -> PipelineOptions, refusing unknown flags."""
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--config")
    pre_args, rest = pre.parse_known_args(argv)
    if pre_args.config:
        rest = config_argv(pre_args.config, beam_flags()[1]) + rest
    return PipelineOptions(check_beam_args(rest, {"--config"}, "beam-embed run"))
