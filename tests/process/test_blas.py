"""blas_threads: numpy's BLAS on the asked threads inside, on its own count again after, however often."""

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from beam_embed.process.blas import blas_threads


def _blas_threads() -> set[int]:
    return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


def test_limits_inside_and_restores_after():
    with threadpool_limits(2, user_api="blas"):  # a known "before", whatever the machine's
        assert _blas_threads() == {2}, "numpy's BLAS is loaded"
        for _ in range(3):  # one controller, entered again and again
            with blas_threads(1):
                assert _blas_threads() == {1}
                a = np.arange(64, dtype=np.float32).reshape(8, 8)
                np.testing.assert_allclose(a @ a.T, np.einsum("ij,kj->ik", a, a))
            assert _blas_threads() == {2}
