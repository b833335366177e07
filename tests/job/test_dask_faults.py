"""A Dask run's faults as a user meets them, each one line with its exit code in bounded time:
flags refused before the output is claimed (--dask_npartitions out of range, Dask flags in an
installation without the dask extra), schedulers that are not there or not Dask, a scheduler
without workers; on a loopback cluster, a worker that does not see the output folder or finds
another model at the model's path (a mount namespace of its own), every worker lost mid-run; and
the launcher's progress line."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

import pytest

from beam_embed.pipeline.job.command import main
from tests.dask_cluster import LoopbackCluster
from tests.job.test_dask_run import ENCODER_STEP, job_args, write_corpus

pytestmark = pytest.mark.pipeline  # whole commands, end to end


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _refused(capsys, argv: list[str], out) -> str:
    """The command's one line, after it exited 2 without making `out`."""
    code = main(["--output", str(out), *argv])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert not os.path.exists(out)
    return err


@pytest.mark.parametrize("n", ["-3", "0", "1000"])
def test_npartitions_out_of_range_is_refused_before_the_claim(n, tiny_export, tmp_path, capsys):
    corpus = write_corpus(tmp_path / "corpus.jsonl", 20)
    err = _refused(capsys, [*job_args(corpus, tiny_export), "--runner", "DaskRunner",
                            "--dask_client_address", f"tcp://127.0.0.1:{_free_port()}",
                            "--dask_npartitions", n], tmp_path / "out")
    assert err == f"beam-embed run: --dask_npartitions {n} is out of range: give 1 to 256 " \
                  "(default: the cluster's threads)\n"


class _Silent:
    """A TCP server that accepts and never says a word (not a Dask scheduler)."""

    def __enter__(self):
        self._server = socket.socket()
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(8)
        self.address = f"tcp://127.0.0.1:{self._server.getsockname()[1]}"
        self._held = []
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def _accept(self):
        try:
            while True:
                self._held.append(self._server.accept()[0])
        except OSError:  # closed
            pass

    def __exit__(self, *exc):
        self._server.close()
        for c in self._held:
            c.close()


def test_schedulers_that_are_not_there_or_not_dask_are_one_line_in_bounded_time(
        tiny_export, tmp_path, capsys):
    corpus = write_corpus(tmp_path / "corpus.jsonl", 20)
    args = [*job_args(corpus, tiny_export), "--runner", "DaskRunner",
            "--dask_connection_timeout", "2"]
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    missing = tmp_path / "nowhere.json"
    with _Silent() as silent:
        cases = [(["--dask_client_address", silent.address],
                  f"no Dask scheduler answered at {silent.address}: no answer in 2 s"),
                 (["--dask_scheduler_file", str(missing)],
                  f"--dask_scheduler_file {missing} does not exist (none appeared in 2 s)"),
                 (["--dask_scheduler_file", str(empty)],
                  f"--dask_scheduler_file {empty} holds no scheduler address")]
        for more, said in cases:
            began = time.monotonic()
            err = _refused(capsys, [*args, *more], tmp_path / "out")
            assert err.startswith(f"beam-embed run: {said}"), err
            assert time.monotonic() - began < 60


def test_dask_flags_without_the_dask_extra_name_the_extra(tmp_path):
    """In a fresh process where dask cannot be imported (as without the extra)."""
    script = ("import sys\n"
              "sys.modules['distributed'] = sys.modules['dask'] = None\n"
              "from beam_embed.pipeline.cli import main\n"
              "sys.exit(main(sys.argv[1:]))\n")
    for flags, what in ((["--runner", "DaskRunner", "--dask_client_address", "tcp://h:1"],
                         "--dask_client_address"),
                        (["--runner", "DaskRunner"], "--runner DaskRunner")):
        done = subprocess.run([sys.executable, "-c", script, "run", "--input", __file__,
                               "--output", str(tmp_path / "out"), *flags],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith(f"beam-embed run: {what} needs the dask extra, which "
                                      "this installation lacks: "), done.stderr
        assert "beam-embed[dask]" in done.stderr or "[dask]" in done.stderr


def test_a_scheduler_without_workers_is_one_line_in_bounded_time(tiny_export, tmp_path,
                                                                  capsys):
    corpus = write_corpus(tmp_path / "corpus.jsonl", 20)
    with LoopbackCluster(str(tmp_path / "cluster"), workers=0) as cluster:
        began = time.monotonic()
        err = _refused(capsys, [*job_args(corpus, tiny_export), "--runner", "DaskRunner",
                                "--dask_client_address", cluster.address,
                                "--dask_connection_timeout", "3"], tmp_path / "out")
        assert time.monotonic() - began < 60
    assert err == f"beam-embed run: the Dask scheduler at {cluster.address} has no worker " \
                  "(none joined in 3 s)\n"


@pytest.fixture(scope="module")
def split_cluster(tiny_export, tmp_path_factory):
    """Two workers; the second in a mount namespace of its own where `model` holds another
    model (the same export, its normalization flipped) and `hidden` is an empty folder."""
    root = tmp_path_factory.mktemp("split_cluster")
    model, other = root / "model", root / "other"
    shutil.copytree(tiny_export, model)
    shutil.copytree(tiny_export, other)
    meta = json.loads((other / "beam_embed.json").read_text())
    meta["normalize"] = not meta["normalize"]
    (other / "beam_embed.json").write_text(json.dumps(meta))
    hidden, blank = root / "hidden", root / "blank"
    hidden.mkdir()
    blank.mkdir()
    binds = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
             'mount --bind "$1" "$2" && mount --bind "$3" "$4" && shift 4 && exec "$@"', "sh",
             str(other), str(model), str(blank), str(hidden)]
    with LoopbackCluster(str(root / "cluster"), wrap=lambda i: binds if i == 1 else []) as c:
        c.model, c.hidden = str(model), str(hidden)
        c.other_worker = next(a for a, name in c.client().run(
            lambda dask_worker: dask_worker.name).items() if name == "w1")
        yield c


def _on(cluster, *more: str) -> list[str]:
    return ["--runner", "DaskRunner", "--dask_client_address", cluster.address,
            "--dask_connection_timeout", "10", *more]


def test_a_worker_that_does_not_see_the_output_or_finds_another_model_is_refused_up_front(
        split_cluster, tiny_export, tmp_path, capsys):
    from beam_embed.models.spec import encoder_spec

    corpus = write_corpus(tmp_path / "corpus.jsonl", 20)
    out = os.path.join(split_cluster.hidden, "out")
    err = _refused(capsys, [*job_args(corpus, tiny_export), *_on(split_cluster)], out)
    assert err == f"beam-embed run: the Dask worker {split_cluster.other_worker} does not see " \
                  f"the output folder {out}: give paths every worker sees at the same place: " \
                  "gs://, or a shared file system mounted at the same path\n"
    spec = encoder_spec(split_cluster.model, poolings=("mean",))
    ours = spec.fingerprint()
    err = _refused(capsys, [*job_args(corpus, split_cluster.model), *_on(split_cluster)],
                   tmp_path / "out")
    prefix = f"beam-embed run: the Dask worker {split_cluster.other_worker} finds another " \
             f"model at {spec.encoder}: fingerprint "
    assert err.startswith(prefix), err
    found = err[len(prefix):len(prefix) + 16]
    assert found != ours and err[len(prefix) + 16:] == \
        f", the launcher's {ours}; give every worker the same model files\n"
    # a worker that loads the model checks it too (one that joined after the probe)
    from beam_embed.pipeline.common.runners.dask.probe import ModelMismatch, check_loaded
    with split_cluster.client() as client:
        with pytest.raises(ModelMismatch, match=f"fingerprint {found}, the run's {ours}"):
            client.submit(check_loaded, spec, ours, workers=[split_cluster.other_worker],
                          allow_other_workers=False, pure=False).result()


def test_a_dask_run_shows_the_clusters_progress_line(split_cluster, tiny_export, tmp_path,
                                                     capsys):
    corpus = write_corpus(tmp_path / "corpus.jsonl", 240)
    code = main(["--output", str(tmp_path / "out"), *job_args(corpus, tiny_export),
                 *_on(split_cluster), "--progress_every", "0.001"])
    err = capsys.readouterr().err
    assert code == 0, err
    lines = [line.split("] ", 1)[1] for line in err.splitlines() if "] cluster: " in line]
    assert lines, err
    counts = [int(line.split()[1]) for line in lines]
    assert counts == sorted(counts) and counts[-1] == 238  # every record embedded, once
    assert all(" records embedded, " in line and "/s, ~" in line and "% of input, ETA ~" in line
               for line in lines), lines
    assert lines[-1].split(", ")[2] == "~100% of input"


def test_every_worker_lost_mid_run_is_one_line_not_a_hang(split_cluster, tiny_export, tmp_path,
                                                          capsys):
    """Last in the module: it ends the cluster's workers."""
    corpus = write_corpus(tmp_path / "corpus.jsonl", 1000)
    done = threading.Event()

    def kill_when_encoding():
        with split_cluster.client() as client:
            while not done.is_set():
                if any(ENCODER_STEP in str(k) for keys in client.processing().values()
                       for k in keys):
                    split_cluster.kill_workers()
                    return
                time.sleep(0.05)

    killer = threading.Thread(target=kill_when_encoding)
    killer.start()
    out = tmp_path / "out"
    try:
        code = main(["--output", str(out), *job_args(corpus, tiny_export),
                     *_on(split_cluster, "--progress_every", "0")])
    finally:
        done.set()
        killer.join()
    err = capsys.readouterr().err
    assert code == 1, err
    assert err.endswith("every Dask worker left the cluster mid-run and none joined in 10 s\n"), err
    assert not any(n.startswith("embeddings-") for n in os.listdir(out))  # nothing published
