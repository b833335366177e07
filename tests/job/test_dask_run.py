"""`beam-embed run` and `beam-embed pca` on a dask.distributed cluster (`--runner DaskRunner`),
against a local run of the same command: the same rows, vectors, dead letters with their
reasons, counts and metadata; the encoder's work on both workers; a worker killed mid-run; a
scheduler that does not answer."""

from __future__ import annotations

import glob
import json
import os
import signal
import socket
import threading
import time

import numpy as np
import pyarrow.parquet as pq
import pytest

from beam_embed.pipeline.job.command import main
from beam_embed.pipeline.pca.command import main as pca_main
from tests.dask_cluster import LoopbackCluster
from tests.job_helpers import dead_letters, parquet_rows, run_job, tfrecord_rows

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end

TOPICS = ("river", "money", "cat", "dog")
# fields that differ from run to run (times) or by how the work was split (shards)
PER_RUN = {"started_at", "started_unix", "finished_at", "wall_time_s", "files", "rows", "digests",
           "errors_files"}
ENCODER_STEP = "RunInference"  # in the task names of the encoder's step


def write_corpus(path, n: int = 240) -> str:
    """`n` records with ids and a topic, one malformed line and one empty text among them."""
    words = "the cat sat on a mat river bank money is big small dog play".split()
    rng = np.random.default_rng(0)
    lines = []
    for i in range(n):
        text = " ".join(rng.choice(words, size=int(rng.integers(2, 30))))
        lines.append(json.dumps({"id": f"r{i:05d}", "text": text, "topic": TOPICS[i % 4]}))
    lines[7] = '{"id": "broken", "text": '
    lines[11] = json.dumps({"id": "empty", "text": "   ", "topic": "cat"})
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return str(path)


def job_args(corpus: str, model: str) -> list[str]:
    return ["--input", corpus, "--model", model, "--id_field", "id", "--metadata_fields",
            "topic", "--format", "parquet,tfrecord", "--include_text", "--pooling",
            "cls,mean", "--batch_tokens", "512"]


def on_dask(cluster: LoopbackCluster, *more: str) -> list[str]:
    return ["--runner", "DaskRunner", "--dask_client_address", cluster.address, *more]


def cosines(a, b) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


def assert_same_output(local: str, dask: str) -> None:
    """The rows (every column; vectors to cosine 0.99999, as batches may differ), the dead
    letters with their reasons, the manifest's counts and metadata, the rows per format."""
    want, got = parquet_rows(local), parquet_rows(dask)
    assert sorted(got) == sorted(want)
    for rid, row in want.items():
        other = got[rid]
        assert {k: v for k, v in other.items() if k not in ("cls", "mean")} == \
            {k: v for k, v in row.items() if k not in ("cls", "mean")}, rid
    for column in ("cls", "mean"):
        ids = sorted(want)
        a = np.array([want[i][column] for i in ids])
        b = np.array([got[i][column] for i in ids])
        assert cosines(a, b).min() >= 0.99999, column
        np.testing.assert_allclose(b, a, atol=1e-5)
    examples_local, examples_dask = tfrecord_rows(local), tfrecord_rows(dask)
    assert sorted(examples_dask) == sorted(examples_local) == sorted(want)
    np.testing.assert_array_equal(np.array([examples_dask[i]["mean"] for i in sorted(want)]),
                                  np.float32([got[i]["mean"] for i in sorted(want)]))
    assert sorted(dead_letters(dask), key=_by_id) == sorted(dead_letters(local), key=_by_id)
    with open(os.path.join(local, "manifest.json")) as f:
        m_local = json.load(f)
    with open(os.path.join(dask, "manifest.json")) as f:
        m_dask = json.load(f)
    assert {k: v for k, v in m_dask.items() if k not in PER_RUN} == \
        {k: v for k, v in m_local.items() if k not in PER_RUN}
    for fmt in ("parquet", "tfrecord"):
        assert sum(n for name, n in m_dask["rows"].items() if name.endswith(fmt)) == len(want)


def _by_id(letter: dict) -> tuple:
    return letter["id"], letter["reason"]


def encoder_workers(cluster: LoopbackCluster, since: float) -> set[str]:
    """The workers that ran a task of the encoder's step since `since` (the scheduler's task
    stream, recording since `start_task_stream`)."""
    with cluster.client() as client:
        return {t["worker"] for t in client.get_task_stream(start=since)
                if ENCODER_STEP in str(t["key"])}


def start_task_stream(cluster: LoopbackCluster) -> float:
    with cluster.client() as client:
        client.get_task_stream(start=time.time())  # installs the scheduler's recorder
    return time.time()


def test_a_dask_run_writes_what_a_local_run_writes_with_the_encoder_on_both_workers(
        dask_cluster, tiny_export, tmp_path, capsys):
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    local = run_job(str(tmp_path / "local"), *job_args(corpus, tiny_export))
    since = start_task_stream(dask_cluster)
    dask = run_job(str(tmp_path / "dask"), *job_args(corpus, tiny_export),
                   *on_dask(dask_cluster))
    assert dask["counts"] == local["counts"]
    assert local["counts"]["dead_lettered"] == 1 and local["counts"]["skipped_empty"] == 1
    assert_same_output(str(tmp_path / "local"), str(tmp_path / "dask"))
    assert encoder_workers(dask_cluster, since) == set(dask_cluster.worker_pids())
    assert "done: read 240, embedded 238" in capsys.readouterr().err


def test_pca_on_dask_writes_what_a_local_pca_writes(dask_cluster, tiny_export, tmp_path):
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    embeddings = str(tmp_path / "embeddings")
    run_job(embeddings, *job_args(corpus, tiny_export))
    outputs = {}
    for name, extra in (("local", []), ("dask", on_dask(dask_cluster))):
        out = str(tmp_path / name)
        assert pca_main(["--input", embeddings, "--output", out, "--components", "3",
                         "--pooling", "mean", *extra]) == 0
        with open(os.path.join(out, "manifest.json")) as f:
            manifest = json.load(f)
        rows = {r["id"]: r for path in sorted(glob.glob(os.path.join(out, "projections-*")))
                for r in pq.read_table(path).to_pylist()}
        with np.load(os.path.join(out, "pca.npz")) as fit:
            outputs[name] = manifest, rows, {k: fit[k] for k in fit.files}
    (m_local, rows_local, fit_local), (m_dask, rows_dask, fit_dask) = \
        outputs["local"], outputs["dask"]
    assert m_dask["projections"]["rows"] == m_local["projections"]["rows"] == 238
    assert sorted(rows_dask) == sorted(rows_local)
    assert json.loads(str(fit_dask.pop("meta"))) == json.loads(str(fit_local.pop("meta")))
    for key, value in fit_local.items():  # sums over the same rows, in another order
        np.testing.assert_allclose(fit_dask[key], value, rtol=1e-6, atol=1e-9, err_msg=key)
    for rid, row in rows_local.items():
        np.testing.assert_allclose([rows_dask[rid][f"pc_{i}"] for i in (1, 2, 3)],
                                   [row[f"pc_{i}"] for i in (1, 2, 3)], atol=1e-5)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_scheduler_that_does_not_answer_is_one_line_and_exit_2_before_anything_is_read(
        tiny_export, tmp_path, capsys, loads):
    corpus = write_corpus(tmp_path / "corpus.jsonl", 20)
    nobody = f"tcp://127.0.0.1:{_free_port()}"
    out = tmp_path / "out"
    code = main(["--output", str(out), *job_args(corpus, tiny_export), "--runner", "DaskRunner",
                 "--dask_client_address", nobody, "--dask_connection_timeout", "2"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith(
        f"beam-embed run: no Dask scheduler answered at {nobody}: "), err
    assert not out.exists() and loads == []  # no folder made, no model loaded
    viz = tmp_path / "viz"
    assert pca_main(["--input", str(tmp_path), "--output", str(viz), "--runner", "DaskRunner",
                     "--dask_client_address", nobody, "--dask_connection_timeout", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        f"beam-embed pca: no Dask scheduler answered at {nobody}: "), err
    assert not viz.exists()


def test_a_worker_killed_while_it_encodes_leaves_the_output_complete(tiny_export, tmp_path):
    corpus = write_corpus(tmp_path / "corpus.jsonl", 3000)
    local = run_job(str(tmp_path / "local"), *job_args(corpus, tiny_export))
    killed = []
    with LoopbackCluster(str(tmp_path / "cluster")) as cluster:
        pids = cluster.worker_pids()
        done = threading.Event()

        def kill_an_encoding_worker():
            with cluster.client() as client:
                while not done.is_set():
                    for worker, keys in client.processing().items():
                        if any(ENCODER_STEP in str(k) for k in keys) and worker in pids:
                            os.kill(pids[worker], signal.SIGKILL)
                            killed.append(worker)
                            return
                    time.sleep(0.05)

        killer = threading.Thread(target=kill_an_encoding_worker)
        killer.start()
        try:
            dask = run_job(str(tmp_path / "dask"), *job_args(corpus, tiny_export),
                           *on_dask(cluster))
        finally:
            done.set()
            killer.join()
    assert killed, "no worker was killed: the run ended before the encoder ran"
    assert dask["counts"] == local["counts"]
    rows = [r["id"] for path in sorted(glob.glob(str(tmp_path / "dask" / "*.parquet")))
            for r in pq.read_table(path, columns=["id"]).to_pylist()]
    assert len(rows) == len(set(rows)) == local["counts"]["embedded"]  # none twice, none lost
    assert_same_output(str(tmp_path / "local"), str(tmp_path / "dask"))
