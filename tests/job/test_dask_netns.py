"""`beam-embed run` on Dask workers that share no network with the launcher but a bridge: each
worker in a network namespace of its own with its own address (made here with `ip`, as root),
the scheduler and a Cloud Storage emulator on the bridge, the job reading its corpus and model
from gs:// and writing gs:// only. What it writes equals a local run's."""

from __future__ import annotations

import os

import pytest

from beam_embed.pipeline.job.command import main
from tests.dask_cluster import LoopbackCluster, WorkerNamespaces
from tests.gcs_emulator import GcsFolder, running_emulator, use_emulator
from tests.job.test_dask_run import (
    assert_same_output,
    encoder_workers,
    job_args,
    on_dask,
    start_task_stream,
    write_corpus,
)

pytestmark = pytest.mark.pipeline  # whole jobs, end to end


def _network() -> str:
    return os.readlink("/proc/self/ns/net")


def test_workers_in_namespaces_of_their_own_run_the_job_on_gs_as_a_local_run_does(
        tiny_export, tmp_path, monkeypatch):
    with open(write_corpus(tmp_path / "corpus.jsonl")) as f:
        corpus_text = f.read()
    with WorkerNamespaces(2) as net, running_emulator(host=net.bridge_ip) as url:
        use_emulator(monkeypatch, url, str(tmp_path / "cache"))
        folder = GcsFolder.new(url, "dask-netns")
        corpus = folder.upload("in/corpus.jsonl", corpus_text)
        args = job_args(corpus, folder.upload_tree(tiny_export, "model"))
        assert main(["--output", folder.path("local"), "--progress_every", "0", *args]) == 0
        with LoopbackCluster(str(tmp_path / "cluster"), wrap=net.wrap,
                             host=lambda i: net.worker_ips[i],
                             scheduler_host=net.bridge_ip) as cluster:
            since = start_task_stream(cluster)
            assert main(["--output", folder.path("dask"), "--progress_every", "0", *args,
                         *on_dask(cluster)]) == 0
            ran = encoder_workers(cluster, since)
            with cluster.client() as client:
                networks = client.run(_network)
        local = folder.download("local", str(tmp_path / "local"))
        dask = folder.download("dask", str(tmp_path / "dask"))
    assert {address.rsplit(":", 1)[0] for address in ran} == \
        {f"tcp://{ip}" for ip in net.worker_ips}  # the encoder ran in both namespaces
    assert len(set(networks.values())) == 2 and _network() not in networks.values()
    assert_same_output(local, dask)
