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

import apache_beam as beam
from apache_beam.runners.runner import PipelineResult, PipelineRunner, PipelineState

from beam_embed.pipeline.common.errors import one_line
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


class SchedulerUnreachable(ValueError):
    """No scheduler answered at the address given (or it has no worker): the run's
    configuration is wrong, and nothing was read."""


def scheduler_of(options) -> str:
    """Where the options point: the address, or the scheduler file."""
    dask = options.view_as(DaskOptions)
    return dask.address or dask.scheduler_file or ""


def connect(options, timeout_s: float | None = None, workers: bool = True):
    """A distributed.Client to the scheduler the options name (--dask_client_address or
    --dask_scheduler_file; --dask_connection_timeout, --dask_client_name,
    --dask_connection_limit), with at least one worker when `workers` (waiting up to
    WORKERS_WAIT_S for one); SchedulerUnreachable if not. `timeout_s`: instead of
    --dask_connection_timeout."""
    from distributed import Client

    dask = options.view_as(DaskOptions)
    where = scheduler_of(options)
    if not where:
        raise SchedulerUnreachable(
            "--runner DaskRunner needs --dask_client_address tcp://HOST:PORT (or "
            "--dask_scheduler_file PATH): it runs on a cluster that is already started")
    kwargs = {"address": dask.address, "scheduler_file": dask.scheduler_file,
              "name": dask.name, "connection_limit": dask.connection_limit,
              "set_as_default": False}
    if timeout_s is not None or isinstance(dask.timeout, int):
        kwargs["timeout"] = timeout_s if timeout_s is not None else dask.timeout
    try:
        client = Client(**kwargs)
    except (OSError, TimeoutError, ValueError) as e:
        raise SchedulerUnreachable(f"no Dask scheduler answered at {where}: {one_line(e)}") from e
    if not workers:
        return client
    try:
        client.wait_for_workers(1, timeout=WORKERS_WAIT_S)
    except (OSError, TimeoutError) as e:
        client.close()
        raise SchedulerUnreachable(f"the Dask scheduler at {where} has no worker (none joined "
                                   f"in {WORKERS_WAIT_S} s)") from e
    return client


class DaskRunner(PipelineRunner):
    def run_pipeline(self, pipeline, options):
        from beam_embed.pipeline.common.dask_runner.translate import Graph, check

        replace_transforms(pipeline, {beam.Create: lambda t: create_stand_in()(t.values),
                                      beam.Reshuffle: lambda t: reshuffle_stand_in()()})
        leaves = leaf_transforms(pipeline)
        check(leaves)  # before the cluster is contacted
        dask = options.view_as(DaskOptions)
        client = connect(options)
        try:
            from beam_embed.pipeline.common.dask_runner.translate import GPU

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
        return DaskResult(client, futures, graph.run_id)


class DaskResult(PipelineResult):
    def __init__(self, client, futures, run_id: str):
        super().__init__(PipelineState.RUNNING)
        self._client, self._futures, self._run_id = client, futures, run_id

    def wait_until_finish(self, duration=None):
        """DONE when every leaf is computed; the first failed task's error is raised (after
        the rest is cancelled). `duration` (ms): RUNNING when it passes first."""
        from distributed import as_completed

        if PipelineState.is_terminal(self._state):
            return self._state
        try:
            for future in as_completed(self._futures, loop=self._client.loop,
                                       timeout=None if duration is None else duration / 1000):
                if future.status == "error":
                    break
        except TimeoutError:
            return self._state
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
        from beam_embed.pipeline.common.dask_runner.bundles import release

        self._state = state
        try:
            self._client.cancel(self._futures)
            self._client.run(release, self._run_id)
        except Exception:  # noqa: BLE001 - a worker or the scheduler gone: nothing to release
            pass
        finally:
            self._client.close()
