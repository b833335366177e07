"""The dry run's flags (pipeline/job/dataflow/dry_run_options.py): `--dry-run`, and Beam's own spelling."""

from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions

from beam_embed.pipeline.job.dataflow.dry_run_options import dry_run_requested


def test_beam_spelling_of_dry_run_is_honoured():
    assert dry_run_requested(PipelineOptions(["--dry_run=True"]))
    assert dry_run_requested(PipelineOptions(["--dry-run"]))
    assert not dry_run_requested(PipelineOptions([]))
