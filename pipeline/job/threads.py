"""How many threads each worker process's TensorFlow pools get: decided here, once, for every
place a run's model is sized (the launcher's resolve and its early warm-up, the Python API's
transform, a Dask worker loading the model); beam_embed.models.embedder.configure_threads applies
the answer before the model loads. Imports Beam's options inside the function only: the job's
workers import this module with the model handler.
"""

from __future__ import annotations

import os

DATAFLOW = ("DataflowRunner", "dataflow")


def worker_threads(opts=None, dask_worker_cores: int | None = None) -> tuple[int, int]:
    """(intra-op, inter-op) TensorFlow threads per worker process; 0 keeps TF's default (one per
    core) for that pool.

    - On a Dask worker (`dask_worker_cores`: its share of its machine's cores, which only the
      worker knows, as it loads the model: beam_embed.pipeline.common.runners.dask.cores), both
      pools take that share.
    - Without Beam's options (`opts` None: a plain run's early warm-up), TF's defaults.
    - Dataflow runs one Python SDK process per vCPU unless
      `--experiments=no_use_multiple_sdk_containers`: each gets one thread per pool (TF's
      default, one per core in every process, would oversubscribe the VM n-fold).
    - The DirectRunner's multi-processing workers share this machine's cores.
    - Anything else keeps TF's defaults here (a Dask launch too: its workers decide)."""
    if dask_worker_cores:
        return dask_worker_cores, dask_worker_cores
    if opts is None:
        return 0, 0
    from apache_beam.options.pipeline_options import DebugOptions, DirectOptions, StandardOptions

    runner = opts.view_as(StandardOptions).runner
    if runner in DATAFLOW:
        experiments = opts.view_as(DebugOptions).experiments or []
        return (0, 0) if "no_use_multiple_sdk_containers" in experiments else (1, 1)
    direct = opts.view_as(DirectOptions)
    if runner not in (None, "DirectRunner", "direct") or \
            direct.direct_running_mode != "multi_processing":
        return 0, 0
    cores = os.cpu_count() or 1
    workers = direct.direct_num_workers or cores  # Beam: 0 means one worker per core
    return (max(cores // workers, 1), 1) if workers > 1 else (0, 0)
