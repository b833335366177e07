"""Which Beam runner a run gets: a local run, Beam's in-process runner; --runner DaskRunner, the
project's Dask runner (dask/), its scheduler checked before any data is read."""

from __future__ import annotations

import os

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from beam_embed.process.local_runs import tune_local_run
from beam_embed.process.private_apis.beam import in_process_runner

# --runner names of the project's Dask runner (beam_embed.pipeline.common.runners.dask). Beam's own
# DaskRunner, named by its path, loses data on this job: that name gets the project's runner too.
DASK_RUNNERS = ("daskrunner", "dask", "apache_beam.runners.dask.dask_runner.daskrunner")
PREFLIGHT_TIMEOUT_S = 10  # a scheduler's answer at start, unless --dask_connection_timeout


def is_dask(options: PipelineOptions) -> bool:
    """Whether --runner names the Dask runner (DaskRunner, any case)."""
    return (options.view_as(StandardOptions).runner or "").lower() in DASK_RUNNERS


def check_runner(options: PipelineOptions) -> None:
    """Before any data is read: a Dask run's scheduler answers (else a ValueError naming it,
    after --dask_connection_timeout, default PREFLIGHT_TIMEOUT_S). Other runners: nothing."""
    if not is_dask(options):
        return
    try:
        from beam_embed.pipeline.common.runners.dask.runner import (
            DaskOptions,
            check_partitions,
            connect,
        )
    except ImportError as e:
        from beam_embed.pipeline.common.settings.command_line import without_dask

        raise ValueError(without_dask(f"--runner {options.view_as(StandardOptions).runner}")) \
            from e
    check_partitions(options)
    timeout = options.view_as(DaskOptions).timeout
    connect(options, timeout if isinstance(timeout, int) else PREFLIGHT_TIMEOUT_S,
            workers=False).close()


def check_cluster(options: PipelineOptions, output: str, spec, fingerprint: str) -> None:
    """Before a Dask run claims `output`: the cluster has a worker (waiting as connect does),
    and each sees `output` and the model `spec` names, with this `fingerprint` (ValueError
    naming the worker and what it lacks; beam_embed.pipeline.common.runners.dask.probe)."""
    from beam_embed.pipeline.common.runners.dask.probe import check_workers
    from beam_embed.pipeline.common.runners.dask.runner import connect

    client = connect(options)
    try:
        check_workers(client, output, spec, fingerprint)
    finally:
        client.close()


def cluster_path(path: str) -> str:
    """`path` as a cluster's workers find it: a local path absolute (they do not run in this
    process's working folder; they need the same folder, a shared file system, at that path),
    any other (gs://...) as it is."""
    from apache_beam.io.filesystems import FileSystems

    return path if FileSystems.get_scheme(path) else os.path.abspath(path)


def runner_for(options: PipelineOptions):
    """The project's Dask runner for --runner DaskRunner (is_dask); another runner --runner
    names is Beam's (None); without one, Beam's in-process batch runner (FnApiRunner,
    which honours --direct_num_workers/--direct_running_mode). Plain DirectRunner in Beam 2.77
    first tries to download its Prism binary from GitHub, then falls back to the same runner:
    skipping that keeps offline runs quiet and local behaviour the same everywhere. The process
    is tuned for it (beam_embed.process.local_runs: state sampling, workers and Ctrl-C)."""
    if is_dask(options):
        from beam_embed.pipeline.common.runners.dask.runner import DaskRunner

        return DaskRunner()
    if options.view_as(StandardOptions).runner:
        return None
    tune_local_run()
    return in_process_runner()
