"""A Dask worker's share of its machine's cores, for the TensorFlow pools of the model it loads.

The launcher cannot know a cluster's machines, so it leaves the pools to TensorFlow's defaults
(every core); the worker decides when it loads the model. Every worker process on a machine
would otherwise take all of its cores: a LocalCluster, or `dask worker --nworkers N`, would
oversubscribe it N-fold. Each gets the cores in proportion to its threads among the threads of
the workers on its host (one worker process on a machine: all its cores, whatever its
`--nthreads`). Imports dask inside functions only.
"""

from __future__ import annotations

import sys


def core_share(cores: int, threads: int, threads_on_host: list[int]) -> int:
    """`cores` split between the workers of one host in proportion to their threads: the part
    of the worker with `threads` (one of `threads_on_host`), at least one."""
    return max(1, cores * threads // max(sum(threads_on_host), threads, 1))


def worker_cores() -> int | None:
    """This Dask worker's share of the cores of its machine (dask's count: the CPUs this
    process may run on, within its cgroup's quota); None outside a Dask worker's task. Asks
    the scheduler which workers share its host."""
    distributed = sys.modules.get("distributed")  # a Dask worker has imported it
    if distributed is None:
        return None
    try:
        worker = distributed.get_worker()
    except ValueError:  # not in a worker's task
        return None
    from dask.system import CPU_COUNT

    workers = distributed.get_client().scheduler_info()["workers"]
    host = workers[worker.address]["host"]
    return core_share(CPU_COUNT, worker.state.nthreads,
                      [w["nthreads"] for w in workers.values() if w["host"] == host])
