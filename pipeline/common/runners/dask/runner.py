"""DaskRunner: a bounded, globally windowed Beam pipeline run on a dask.distributed cluster.

Beam's own DaskRunner (apache_beam.runners.dask, 2.77) reports DONE while losing data: every
output of a multi-output ParDo goes to each consumer of any of them, what a DoFn emits from
`finish_bundle` is dropped, and only the last transform visited is computed. This one keeps its
options (--dask_client_address, --dask_npartitions, ...: DaskOptions) and its primitive stand-ins
for Create and Reshuffle, and builds its own graph (translate.py): a bag per PCollection, every
bag nothing reads computed, side inputs as dependencies in the same graph, and each ParDo
partition run as a bundle by a DoFn set up once per worker process (bundles.py).

Not supported, refused before anything runs: windows other than the global one, unbounded
input, DoFns with state, timers or restrictions. No metrics API (`metrics()` raises); the job
counts what it needs in its own outputs.
"""

from __future__ import annotations

import json
import os
import time

import apache_beam as beam
from apache_beam.runners.runner import PipelineResult, PipelineRunner, PipelineState

from beam_embed.pipeline.common.settings.errors import one_line
from beam_embed.process.private_apis.beam_runner import (
    create_stand_in,
    dask_options,
    leaf_transforms,
    replace_transforms,
    reshuffle_stand_in,
)

# Imported with the runner, so that a pipeline's options know its flags before it runs.
DaskOptions = dask_options()
WORKERS_WAIT_S = 120  # a scheduler without workers yet (an adaptive cluster starting some)
_LOOK_S = 2.0  # how often a run looks whether its cluster still has a worker


MAX_PARTITIONS = 256  # each of a step's partitions deals to each: partitions² tasks a spread


class SchedulerUnreachable(ValueError):
    """No scheduler answered at the address given (or it has no worker): the run's
    configuration is wrong, and nothing was read."""


def scheduler_of(options) -> str:
    """Where the options point: the address, or the scheduler file."""
    dask = options.view_as(DaskOptions)
    return dask.address or dask.scheduler_file or ""


def check_partitions(options) -> None:
    """--dask_npartitions and --dask_partition_size in their valid ranges (ValueError naming
    the value and the range): a negative count failed deep in dask, a thousand partitions built
    a graph of a million tasks."""
    dask = options.view_as(DaskOptions)
    n = dask.npartitions
    if n is not None and not 1 <= n <= MAX_PARTITIONS:
        raise ValueError(f"--dask_npartitions {n} is out of range: give 1 to {MAX_PARTITIONS} "
                         "(default: the cluster's threads)")
    if dask.partition_size is not None and dask.partition_size < 1:
        raise ValueError(f"--dask_partition_size {dask.partition_size} is out of range: give 1 "
                         "or more records")


def _address_in(path: str, timeout_s: float) -> str:
    """The scheduler address a scheduler file holds, waiting up to `timeout_s` for the file
    to appear (a batch job's scheduler may be starting); SchedulerUnreachable when it does not,
    or holds no address."""
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.2)
    try:
        with open(path, encoding="utf-8") as f:
            address = json.load(f).get("address")
    except FileNotFoundError:
        raise SchedulerUnreachable(f"--dask_scheduler_file {path} does not exist (none appeared "
                                   f"in {timeout_s:g} s): start the scheduler with "
                                   f"`dask scheduler --scheduler-file {path}`") from None
    except (OSError, ValueError, AttributeError) as e:
        raise SchedulerUnreachable(f"--dask_scheduler_file {path} is not a scheduler file "
                                   f"({one_line(e)})") from e
    if not isinstance(address, str) or not address:
        raise SchedulerUnreachable(f"--dask_scheduler_file {path} holds no scheduler address "
                                   "(a JSON object with \"address\", as `dask scheduler "
                                   "--scheduler-file` writes it)")
    return address


def _identity(address: str, timeout_s: float) -> dict:
    """What the server at `address` says it is, in `timeout_s`: a server that is not a Dask
    scheduler (it never answers Dask's handshake) is a TimeoutError, not a hang."""
    import asyncio

    from distributed.core import rpc
    from distributed.security import Security

    async def ask():  # TLS as dask's configuration sets it up for a Client
        remote = rpc(address, timeout=timeout_s,
                     connection_args=Security().get_connection_args("client"))
        try:
            return await asyncio.wait_for(remote.identity(), timeout_s)
        finally:
            await remote.close_rpc()

    return asyncio.run(ask())


def _timeout(options, timeout_s: float | None) -> float | None:
    given = options.view_as(DaskOptions).timeout
    return timeout_s if timeout_s is not None else given if isinstance(given, int) else None


def connect(options, timeout_s: float | None = None, workers: bool = True):
    """A distributed.Client to the scheduler the options name (--dask_client_address or
    --dask_scheduler_file; --dask_connection_timeout, --dask_client_name,
    --dask_connection_limit), with at least one worker when `workers` (waiting up to
    WORKERS_WAIT_S for one, or --dask_connection_timeout when given); SchedulerUnreachable if
    not. `timeout_s`: instead of --dask_connection_timeout. Every wait is bounded."""
    from distributed import Client

    dask = options.view_as(DaskOptions)
    where = scheduler_of(options)
    if not where:
        raise SchedulerUnreachable(
            "--runner DaskRunner needs --dask_client_address tcp://HOST:PORT (or "
            "--dask_scheduler_file PATH): it runs on a cluster that is already started")
    timeout = _timeout(options, timeout_s)
    address = dask.address or _address_in(dask.scheduler_file, timeout or WORKERS_WAIT_S)
    try:
        who = _identity(address, timeout or WORKERS_WAIT_S)
    except (OSError, TimeoutError, ValueError) as e:
        said = one_line(e) if str(e) else f"no answer in {timeout or WORKERS_WAIT_S:g} s"
        raise SchedulerUnreachable(f"no Dask scheduler answered at {where}: {said}") from e
    if not isinstance(who, dict) or who.get("type") != "Scheduler":
        raise SchedulerUnreachable(f"no Dask scheduler answered at {where}: the server there "
                                   f"is a Dask {who.get('type') if isinstance(who, dict) else who}")
    kwargs = {"address": address, "name": dask.name, "connection_limit": dask.connection_limit,
              "set_as_default": False}
    if timeout is not None:
        kwargs["timeout"] = timeout
    try:
        client = Client(**kwargs)
    except (OSError, TimeoutError, ValueError) as e:
        raise SchedulerUnreachable(f"no Dask scheduler answered at {where}: {one_line(e)}") from e
    if not workers:
        return client
    wait = timeout or WORKERS_WAIT_S
    try:
        client.wait_for_workers(1, timeout=wait)
    except (OSError, TimeoutError) as e:
        client.close()
        raise SchedulerUnreachable(f"the Dask scheduler at {where} has no worker (none joined "
                                   f"in {wait:g} s)") from e
    return client


class DaskRunner(PipelineRunner):
    def run_pipeline(self, pipeline, options):
        from beam_embed.pipeline.common.runners.dask.translate import Graph, check

        replace_transforms(pipeline, {beam.Create: lambda t: create_stand_in()(t.values),
                                      beam.Reshuffle: lambda t: reshuffle_stand_in()()})
        leaves = leaf_transforms(pipeline)
        check(leaves)  # before the cluster is contacted
        dask = options.view_as(DaskOptions)
        client = connect(options)
        try:
            from beam_embed.pipeline.common.runners.dask.translate import GPU

            workers = client.scheduler_info()["workers"]
            graph = Graph(dask.npartitions or max(1, sum(w["nthreads"] for w in workers.values())),
                          sorted(workers), dask.partition_size,
                          sum(1 for w in workers.values() if w.get("resources", {}).get(GPU)))
            for applied in leaves:
                graph.add(applied)
            futures = client.compute([bag.count() for bag in graph.leaves()],
                                     optimize_graph=False)
        except BaseException:
            client.close()
            raise
        return DaskResult(client, futures, graph.run_id, _timeout(options, None) or WORKERS_WAIT_S)


class WorkersLost(RuntimeError):
    """Every worker left the cluster mid-run and none joined again in time."""


class DaskResult(PipelineResult):
    def __init__(self, client, futures, run_id: str, alone_s: float = WORKERS_WAIT_S):
        super().__init__(PipelineState.RUNNING)
        self._client, self._futures, self._run_id = client, futures, run_id
        self._alone_s = alone_s  # how long the run waits without a worker before it fails

    def wait_until_finish(self, duration=None):
        """DONE when every leaf is computed; the first failed task's error is raised (after
        the rest is cancelled); WorkersLost when the cluster has had no worker for `alone_s`
        (dask would wait for one forever). `duration` (ms): RUNNING when it passes first."""
        from distributed import as_completed

        if PipelineState.is_terminal(self._state):
            return self._state
        deadline = None if duration is None else time.monotonic() + duration / 1000
        pending, alone_since = set(self._futures), None
        try:
            while pending:
                step = _LOOK_S if deadline is None else \
                    max(0.0, min(_LOOK_S, deadline - time.monotonic()))
                try:
                    for future in as_completed(list(pending), loop=self._client.loop,
                                               timeout=step):
                        pending.discard(future)
                        if future.status == "error":
                            pending.clear()
                            break
                except TimeoutError:
                    pass
                if not pending:
                    break
                if self._client.nthreads():
                    alone_since = None
                elif alone_since is None:
                    alone_since = time.monotonic()
                elif time.monotonic() - alone_since >= self._alone_s:
                    self._end(PipelineState.FAILED)
                    raise WorkersLost(f"every Dask worker left the cluster mid-run and none "
                                      f"joined in {self._alone_s:g} s")
                if deadline is not None and time.monotonic() >= deadline:
                    return self._state
        except WorkersLost:
            raise
        except BaseException:  # Ctrl-C while waiting
            self._end(PipelineState.CANCELLED)
            raise
        try:
            self._client.gather(self._futures)
        except BaseException:
            self._end(PipelineState.FAILED)
            raise
        self._end(PipelineState.DONE)
        return self._state

    def cancel(self):
        if not PipelineState.is_terminal(self._state):
            self._end(PipelineState.CANCELLED)
        return self._state

    def metrics(self):
        raise NotImplementedError("the Dask runner collects no Beam metrics")

    def _end(self, state) -> None:
        """Cancels what still runs, tears down the run's DoFns on every worker, disconnects."""
        from beam_embed.pipeline.common.runners.dask.bundles import release

        self._state = state
        try:
            self._client.cancel(self._futures)
            self._client.run(release, self._run_id)
        except Exception:  # noqa: BLE001 - a worker or the scheduler gone: nothing to release
            pass
        finally:
            self._client.close()
