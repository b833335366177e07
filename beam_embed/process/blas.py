"""numpy's BLAS threads, limited around a block of work.

`threadpoolctl.threadpool_limits` scans every loaded shared library each time it is entered
(~5 ms: 0.45 s of a 1M-row PCA that limits the threads per block); `blas_threads` keeps one
controller for the process, so a limit per block costs next to nothing.
"""

from __future__ import annotations

import functools


@functools.cache
def _controller():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def blas_threads(count: int):
    """A context manager: numpy's BLAS on `count` threads inside it."""
    return _controller().limit(limits=count, user_api="blas")
