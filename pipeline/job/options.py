"""The job's own flags, as a Beam PipelineOptions subclass; runner flags stay Beam's.

`--config FILE.yaml` supplies flags as keys (underscored names); flags on the command line win.
Unknown flags or keys are errors (Beam itself only warns and drops them).
"""

from __future__ import annotations

import argparse

import yaml
from apache_beam.options.pipeline_options import PipelineOptions

from pipeline.common.errors import one_line
from pipeline.common.flags import FlagError, beam_flags, check_beam_args, hint
from pipeline.dataflow.options import DryRunOptions  # noqa: F401  (its flags join Beam's parser)
from pipeline.job.flags import add_job_flags


class EmbedOptions(PipelineOptions):
    @classmethod
    def _add_argparse_args(cls, parser):
        add_job_flags(parser)


def _config_argv(path: str, known: set[str]) -> list[str]:
    try:
        with open(path, encoding="utf-8") as f:
            config = yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError) as e:  # missing file, bad YAML: bad configuration
        raise ValueError(f"--config {path}: {one_line(e)}") from e
    if not isinstance(config, dict):
        raise ValueError(f"{path} must hold a mapping of flag names to values")
    argv = []
    for key, value in config.items():
        flag = "--" + key.replace("-", "_")
        if flag not in known:
            raise FlagError(f"unknown key {key!r} in {path}" + (
                hint(flag, known) or "; expected a flag of `beam-embed run --help`"))
        if isinstance(value, bool):
            negative = "--no-" + flag[2:]
            if value:
                argv.append(flag)
            elif negative in known:
                argv.append(negative)
        elif isinstance(value, list):
            if flag == "--input":
                for v in value:
                    argv += [flag, str(v)]
            else:
                argv += [flag, ",".join(map(str, value))]
        else:
            argv += [flag, str(value)]
    return argv


def parse(argv: list[str]) -> PipelineOptions:
    """argv (with an optional --config) -> PipelineOptions, refusing unknown flags."""
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--config")
    pre_args, rest = pre.parse_known_args(argv)
    if pre_args.config:
        rest = _config_argv(pre_args.config, beam_flags()[1]) + rest
    return PipelineOptions(check_beam_args(rest, {"--config"}, "beam-embed run"))
