"""`--dry-run` and `--job-file`: build the job for any runner, describe it, run nothing.

A direct PipelineOptions subclass, so `beam_embed.pipeline.job.beam_options.parse` (which collects every
subclass) knows these flags as soon as this module is imported; that module imports it.

Beam already owns `--dry_run` (TestOptions, a value flag: `--dry_run=True`); it is honoured as a
synonym, so that Beam's own spelling also leads here instead of to Beam's partial dry run.
"""

from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions, TestOptions

from beam_embed.pipeline.job.dataflow.dry_run_flags import add_dry_run_flags

TRUE_WORDS = ("1", "true", "yes")


class DryRunOptions(PipelineOptions):
    @classmethod
    def _add_argparse_args(cls, parser):
        add_dry_run_flags(parser)


def dry_run_requested(options: PipelineOptions) -> bool:
    """`--dry-run`, or Beam's own `--dry_run=True`."""
    beam_flag = options.view_as(TestOptions).dry_run
    return bool(options.view_as(DryRunOptions).describe_only
                or str(beam_flag).strip().lower() in TRUE_WORDS)
