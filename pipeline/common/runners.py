"""Which Beam runner a local run gets."""

from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from beam_embed.process.local_runs import tune_local_run


def runner_for(options: PipelineOptions):
    """The runner --runner names; without one, Beam's in-process batch runner (FnApiRunner,
    which honours --direct_num_workers/--direct_running_mode). Plain DirectRunner in Beam 2.77
    first tries to download its Prism binary from GitHub, then falls back to the same runner:
    skipping that keeps offline runs quiet and local behaviour the same everywhere. The process
    is tuned for it (beam_embed.process.local_runs: state sampling, workers and Ctrl-C)."""
    if options.view_as(StandardOptions).runner:
        return None
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    tune_local_run()
    return FnApiRunner()
