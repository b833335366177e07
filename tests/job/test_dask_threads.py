"""A Dask worker's TensorFlow pools are its share of its machine's cores: several worker
processes on one machine split them, in proportion to their threads, instead of each taking all
of them; a lone worker takes them all, whatever its `--nthreads`."""

from __future__ import annotations

import pytest
from dask.system import CPU_COUNT

from beam_embed.models.spec import encoder_spec
from beam_embed.pipeline.common.runners.dask.cores import core_share, worker_cores
from beam_embed.pipeline.job.embed import EncoderHandler
from tests.dask_cluster import LoopbackCluster

THREADS = (3, 1)  # two workers on this host: 3/4 and 1/4 of its cores (at least one each)


def test_the_cores_are_split_in_proportion_to_the_workers_threads():
    assert core_share(16, 1, [1]) == 16  # one worker process per machine: every core
    assert core_share(16, 4, [4, 4, 4, 4]) == 4  # a LocalCluster of 4 x 4 threads
    assert core_share(16, 3, [3, 1]) == 12 and core_share(16, 1, [3, 1]) == 4
    assert core_share(2, 1, [1, 1, 1, 1]) == 1  # more workers than cores: one each
    assert worker_cores() is None  # here: no Dask worker


def _load_as_run_inference_does(handler):
    """On a worker: the model as RunInference's setup loads it, then its pools and a vector."""
    import tensorflow as tf

    model = handler.load_model()
    pools = (tf.config.threading.get_intra_op_parallelism_threads(),
             tf.config.threading.get_inter_op_parallelism_threads())
    return pools, model.embed(["the cat sat"]).vectors["mean"].shape


@pytest.mark.pipeline  # a cluster of its own, TensorFlow in its workers
def test_each_dask_workers_encoder_takes_its_share_of_the_cores(tiny_export, tmp_path):
    spec = encoder_spec(tiny_export, poolings=("mean",), max_seq_length=64)
    assert (spec.intra_op_threads, spec.inter_op_threads) == (0, 0)  # what a Dask launch sends
    handler = EncoderHandler(spec)
    with LoopbackCluster(str(tmp_path), workers=2,
                         worker_args=lambda i: ["--nthreads", str(THREADS[i])]) as cluster:
        with cluster.client() as client:
            by_threads = {w["nthreads"]: address
                          for address, w in client.scheduler_info()["workers"].items()}
            got = {n: client.submit(_load_as_run_inference_does, handler, workers=[address],
                                    pure=False).result(timeout=300)
                   for n, address in by_threads.items()}
    for n in THREADS:
        share = max(1, CPU_COUNT * n // sum(THREADS))
        assert got[n] == ((share, share), (1, 8)), n
