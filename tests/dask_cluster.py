"""A loopback dask.distributed cluster for the tests that run on one: a scheduler and two workers
of one thread each, every one a process of its own started as a user starts them (`dask
scheduler`, `dask worker`, each worker under its nanny), on 127.0.0.1 with ports the system
picks. `dask_cluster` is one for the whole session (its scheduler's address); a test that kills
a worker starts its own `LoopbackCluster`.

The workers run in the repository root with it first on their path, so they import the code
under test and the tests' own DoFns by name, as the pytest process does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
START_TIMEOUT_S = 120


class LoopbackCluster:
    """`with LoopbackCluster(folder) as cluster:` cluster.address, cluster.client(),
    cluster.worker_pids(); every process it started is ended on exit. `wrap(i)`: a command
    prefix for worker i (`ip netns exec NAME`), `host(i)`: the address it serves on,
    `worker_args(i)`: more of its flags (`--resources GPU=1`)."""

    def __init__(self, folder: str, workers: int = 2, wrap=lambda i: [],
                 host=lambda i: "127.0.0.1", scheduler_host: str = "127.0.0.1",
                 worker_args=lambda i: []):
        self._folder, self._n, self._wrap, self._host = folder, workers, wrap, host
        self._worker_args = worker_args
        self._scheduler_host = scheduler_host
        self._processes: list[subprocess.Popen] = []
        self.address = ""

    def __enter__(self) -> LoopbackCluster:
        os.makedirs(self._folder, exist_ok=True)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [ROOT, *filter(None, [os.environ.get("PYTHONPATH")])])}
        file = os.path.join(self._folder, "scheduler.json")
        try:
            self._start([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host",
                         self._scheduler_host, "--port", "0", "--no-dashboard",
                         "--scheduler-file", file], "scheduler", env)
            self.address = json.loads(_wait_for_file(file, self._processes[0]))["address"]
            for i in range(self._n):
                self._start([*self._wrap(i), sys.executable, "-m", "distributed.cli.dask_worker",
                             self.address, "--nthreads", "1", "--no-dashboard", "--name",
                             f"w{i}", "--host", self._host(i), "--local-directory",
                             os.path.join(self._folder, f"w{i}"), *self._worker_args(i)],
                            f"worker{i}", env)
            if self._n:  # a scheduler alone: nothing to wait for
                with self.client() as client:
                    client.wait_for_workers(self._n, timeout=START_TIMEOUT_S)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self, command: list[str], name: str, env: dict) -> None:
        log = open(os.path.join(self._folder, f"{name}.log"), "w")
        self._processes.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=log,
                                                stderr=subprocess.STDOUT,
                                                start_new_session=True,
                                                preexec_fn=_ends_with_its_parent))
        log.close()

    def client(self):
        from distributed import Client

        return Client(self.address, timeout=30, set_as_default=False)

    def worker_pids(self) -> dict[str, int]:
        """Worker address -> the pid of the process that runs its tasks."""
        with self.client() as client:
            return client.run(os.getpid)

    def kill_workers(self) -> None:
        """Every worker gone at once, its nanny too (no restart): SIGKILL to each group."""
        for process in self._processes[1:]:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)

    def log(self, name: str) -> str:
        with open(os.path.join(self._folder, f"{name}.log")) as f:
            return f.read()

    def __exit__(self, *exc) -> None:
        for process in reversed(self._processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)  # the nanny and its worker
        for process in self._processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self._processes.clear()


def _ends_with_its_parent() -> None:
    """In the child, before it runs: SIGTERM when the process that started it ends, so a
    killed pytest leaves no cluster behind (Linux's PR_SET_PDEATHSIG)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


def _wait_for_file(path: str, process: subprocess.Popen) -> str:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the dask scheduler exited with {process.returncode}")
        if os.path.exists(path):
            with open(path) as f:
                text = f.read()
            if text.strip():
                return text
        time.sleep(0.1)
    raise RuntimeError(f"the dask scheduler wrote no {path} in {START_TIMEOUT_S} s")


@pytest.fixture(scope="session")
def dask_cluster(tmp_path_factory) -> LoopbackCluster:
    """A scheduler and two one-thread workers on 127.0.0.1 for the whole session."""
    with LoopbackCluster(str(tmp_path_factory.mktemp("dask_cluster"))) as cluster:
        yield cluster


class WorkerNamespaces:
    """`with WorkerNamespaces(n) as net:` n network namespaces (`net.names`), each with its own
    address (`net.worker_ips`) on a veth pair whose other end is on a bridge of this one,
    which has `net.bridge_ip`: the workers reach each other and this namespace (a scheduler,
    an emulator) over the bridge, and nothing of this namespace's loopback. Made with `ip`
    (root), removed on exit."""

    def __init__(self, n: int = 2):
        tag = f"{os.getpid() % 10000:04d}"
        self._bridge = f"bebr{tag}"
        self.names = [f"bens{tag}-{i}" for i in range(n)]
        self._veths = [f"bev{tag}-{i}" for i in range(n)]
        used = subprocess.run(["ip", "-4", "addr"], capture_output=True, text=True).stdout
        subnet = next(f"10.231.{k}" for k in range(1, 255) if f"10.231.{k}." not in used)
        self.bridge_ip = f"{subnet}.1"
        self.worker_ips = [f"{subnet}.{10 + i}" for i in range(n)]

    def __enter__(self) -> WorkerNamespaces:
        try:
            _ip("link", "add", self._bridge, "type", "bridge")
            _ip("addr", "add", f"{self.bridge_ip}/24", "dev", self._bridge)
            _ip("link", "set", self._bridge, "up")
            for name, veth, address in zip(self.names, self._veths, self.worker_ips):
                inside = veth.replace("bev", "bep")
                _ip("netns", "add", name)
                _ip("link", "add", veth, "type", "veth", "peer", "name", inside)
                _ip("link", "set", inside, "netns", name)
                _ip("link", "set", veth, "master", self._bridge)
                _ip("link", "set", veth, "up")
                _ip("netns", "exec", name, "ip", "addr", "add", f"{address}/24", "dev", inside)
                _ip("netns", "exec", name, "ip", "link", "set", inside, "up")
                _ip("netns", "exec", name, "ip", "link", "set", "lo", "up")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def wrap(self, i: int) -> list[str]:
        return ["ip", "netns", "exec", self.names[i]]

    def __exit__(self, *exc) -> None:
        for name in self.names:  # a namespace's end of each veth pair goes with it
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
        subprocess.run(["ip", "link", "del", self._bridge], capture_output=True)


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
