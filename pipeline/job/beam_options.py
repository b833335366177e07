"""The job's own flags, as a Beam PipelineOptions subclass; runner flags stay Beam's.

`--config FILE.yaml` supplies flags as keys (underscored names); flags on the command line win.
Unknown flags or keys are errors (Beam itself only warns and drops them). The job reads its own
settings into RunSettings (argv.py, read once); Beam gets the whole argv too, so its options (and a
Dataflow job's) list the job's flags.
"""

from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions

from beam_embed.pipeline.common.settings.command_line import (
    beam_flags,
    check_beam_args,
    mentions_dask,
)
from beam_embed.pipeline.job.argv import JobArgv, add_job_flags, config_argv, read_job_argv

# DryRunOptions' flags join Beam's parser once it is imported
from beam_embed.pipeline.job.dataflow.dry_run_options import DryRunOptions  # noqa: F401

PROG = "beam-embed run"


class EmbedOptions(PipelineOptions):
    @classmethod
    def _add_argparse_args(cls, parser):
        add_job_flags(parser)


def beam_options(job: JobArgv) -> PipelineOptions:
    """The PipelineOptions of a run read by `read_job_argv`, refusing unknown flags and keys (a
    FlagError) as a single parse by Beam's parser would: the config's keys first, then the
    command line, then a value the job's parser refused."""
    if job.plain:  # nothing in it but the job's flags: nothing for Beam to refuse
        return PipelineOptions([*job.config_argv, *job.argv])
    if job.rest == () and not job.beam_keys:  # a value of the job's own refused by its check:
        raise job.error  # nothing of Beam's to refuse first
    known = beam_flags(dask=mentions_dask([*job.argv, *(job.config or {})]))[1]
    config = config_argv(job.config_path, known, job.config) if job.config_path else []
    if job.settings is None:  # Beam's parser names an unknown flag or a bad value of its own first
        check_beam_args([*config, *job.argv], {"--config"}, PROG)
        raise job.error
    beam_keys = {k: job.config[k] for k in job.beam_keys}
    check_beam_args([*config_argv(job.config_path, known, beam_keys), *job.rest], {"--config"},
                    PROG)
    return PipelineOptions([*config, *job.argv])


def parse(argv: list[str]) -> PipelineOptions:
    """argv (with an optional --config) -> PipelineOptions, refusing unknown flags."""
    return beam_options(read_job_argv(argv))
