"""The project's Dask runner on tiny pipelines, on the session's loopback cluster (a scheduler and
two worker processes). Each leaf records what it receives (with the worker's pid) in a file the
test reads back. The three cases Beam's own DaskRunner gets wrong (a tagged output leaking into
the main output's consumer, leaves never run, finish_bundle's output lost) are run through it
too, so each of those tests shows that it tells the two runners apart."""

from __future__ import annotations

import json
import os
import socket
import time
import typing

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import userstate, window

from beam_embed.pipeline.common.runners.dask.bundles import held_runs
from beam_embed.pipeline.common.runners.dask.runner import DaskRunner, SchedulerUnreachable

BEAMS = "apache_beam.runners.dask.dask_runner.DaskRunner"


class Record(beam.DoFn):
    """Appends [pid, element] to `path`, a JSON document a line (an append this small is one
    write, whole, when both workers append at once)."""

    def __init__(self, path: str):
        self.path = path

    def process(self, element):
        with open(self.path, "a") as f:
            f.write(json.dumps([os.getpid(), element]) + "\n")
        yield element


def recorded(path: str) -> list:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line)[1] for line in f]


def recorded_pids(path: str) -> list[int]:
    with open(path) as f:
        return [json.loads(line)[0] for line in f]


def run(build, address: str, *flags: str, beams: bool = False) -> str:
    """Builds a pipeline with `build(p)` and runs it on the cluster: through the project's
    runner, or `beams`, through Beam's own DaskRunner."""
    options = PipelineOptions([f"--dask_client_address={address}", *flags,
                               *([f"--runner={BEAMS}"] if beams else [])])
    p = beam.Pipeline(runner=None if beams else DaskRunner(), options=options)
    build(p)
    result = p.run()
    try:
        return result.wait_until_finish()
    finally:
        if beams:
            result.client.close()


@beam.typehints.with_output_types(tuple[typing.Any, int])
class Split(beam.DoFn):
    def process(self, x):
        if x % 3 == 0:
            yield beam.pvalue.TaggedOutput("tagged", ("tagged", x))
        else:
            yield (x % 2, x)


def test_a_tagged_output_reaches_only_its_own_consumer(dask_cluster, tmp_path):
    def build(p, out):
        res = p | beam.Create(list(range(10))) | beam.ParDo(Split()).with_outputs(
            "tagged", main="main")
        res.tagged | "WriteTagged" >> beam.ParDo(Record(str(out / "tagged")))
        res.main | beam.GroupByKey() | "WriteMain" >> beam.ParDo(Record(str(out / "main")))

    ours, theirs = tmp_path / "ours", tmp_path / "beams"
    ours.mkdir(), theirs.mkdir()
    assert run(lambda p: build(p, ours), dask_cluster.address) == "DONE"
    groups = {key: sorted(values) for key, values in recorded(str(ours / "main"))}
    assert groups == {0: [2, 4, 8], 1: [1, 5, 7]}
    assert sorted(recorded(str(ours / "tagged"))) == [["tagged", x] for x in (0, 3, 6, 9)]
    # Beam's runner groups the tagged elements with the main ones, and says DONE
    assert run(lambda p: build(p, theirs), dask_cluster.address, beams=True) == "DONE"
    assert "tagged" in {key for key, _ in recorded(str(theirs / "main"))}


def test_every_leaf_runs(dask_cluster, tmp_path):
    def build(p, out):
        nums = p | beam.Create(list(range(10)))
        nums | "Double" >> beam.Map(lambda x: 2 * x) | "Leaf1" >> beam.ParDo(
            Record(str(out / "leaf1")))
        nums | "Square" >> beam.Map(lambda x: x * x) | "Leaf2" >> beam.ParDo(
            Record(str(out / "leaf2")))

    ours, theirs = tmp_path / "ours", tmp_path / "beams"
    ours.mkdir(), theirs.mkdir()
    assert run(lambda p: build(p, ours), dask_cluster.address) == "DONE"
    assert sorted(recorded(str(ours / "leaf1"))) == [2 * x for x in range(10)]
    assert sorted(recorded(str(ours / "leaf2"))) == [x * x for x in range(10)]
    assert run(lambda p: build(p, theirs), dask_cluster.address, beams=True) == "DONE"
    assert recorded(str(theirs / "leaf1")) == []  # never run


def test_what_finish_bundle_emits_is_kept(dask_cluster, tmp_path):
    def build(p, out):
        (p | beam.Create(list(range(10)))
         | beam.BatchElements(min_batch_size=4, max_batch_size=4)  # the last batch: at the end
         | beam.ParDo(Record(str(out / "batches"))))

    ours, theirs = tmp_path / "ours", tmp_path / "beams"
    ours.mkdir(), theirs.mkdir()
    # one partition: one bundle, so the batches are those of one BatchElements pass
    assert run(lambda p: build(p, ours), dask_cluster.address, "--dask_npartitions=1") == "DONE"
    assert sorted(recorded(str(ours / "batches"))) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert run(lambda p: build(p, theirs), dask_cluster.address, "--dask_npartitions=1",
               beams=True) == "DONE"
    assert sum(map(len, recorded(str(theirs / "batches")))) < 10


class Tally(beam.DoFn):
    """Main output: the element; "odd": odd elements; "count": the bundle's size, emitted from
    finish_bundle; "nobody": an output no transform declared."""

    def start_bundle(self):
        self.n = 0

    def process(self, x):
        self.n += 1
        if x % 2:
            yield beam.pvalue.TaggedOutput("odd", x)
        yield beam.pvalue.TaggedOutput("nobody", x)
        yield x

    def finish_bundle(self):
        yield beam.pvalue.TaggedOutput("count", window.GlobalWindows.windowed_value(self.n))


def test_each_output_of_a_multi_output_pardo_is_its_own(dask_cluster, tmp_path):
    def build(p):
        res = p | beam.Create(list(range(20))) | beam.ParDo(Tally()).with_outputs(
            "odd", "count", main="all")
        res.all | "All" >> beam.ParDo(Record(str(tmp_path / "all")))
        res.odd | "Odd" >> beam.ParDo(Record(str(tmp_path / "odd")))
        res.count | "Count" >> beam.ParDo(Record(str(tmp_path / "count")))

    assert run(build, dask_cluster.address, "--dask_npartitions=3") == "DONE"
    assert sorted(recorded(str(tmp_path / "all"))) == list(range(20))
    assert sorted(recorded(str(tmp_path / "odd"))) == list(range(1, 20, 2))
    counts = recorded(str(tmp_path / "count"))
    assert len(counts) == 3 and sum(counts) == 20  # one per bundle, from finish_bundle


def test_side_inputs_are_computed_in_the_same_graph(dask_cluster, tmp_path):
    def build(p):
        nums = p | "Nums" >> beam.Create(list(range(1, 11)))
        total = nums | beam.CombineGlobally(sum)
        pairs = p | "Pairs" >> beam.Create([("a", 100), ("b", 200)])
        (nums
         | beam.Map(lambda x, total, items, table: [x, total, len(items), table["b"]],
                    beam.pvalue.AsSingleton(total), beam.pvalue.AsList(nums),
                    table=beam.pvalue.AsDict(pairs))
         | beam.ParDo(Record(str(tmp_path / "out"))))

    assert run(build, dask_cluster.address) == "DONE"
    assert sorted(recorded(str(tmp_path / "out"))) == [[x, 55, 10, 200] for x in range(1, 11)]


def test_a_side_input_read_by_three_steps_is_computed_once(dask_cluster, tmp_path):
    # as Beam's sinks need: each step that reads the temporary folder InitializeWrite made
    # must read that one folder
    def build(p):
        made = p | "Once" >> beam.Create([1]) | "Make" >> beam.ParDo(Record(str(tmp_path / "made")))
        nums = p | "Nums" >> beam.Create([1, 2, 3])
        for name in ("A", "B", "C"):
            (nums | name >> beam.Map(lambda x, m: x + m, beam.pvalue.AsSingleton(made))
             | f"Write{name}" >> beam.ParDo(Record(str(tmp_path / name))))

    assert run(build, dask_cluster.address) == "DONE"
    assert recorded(str(tmp_path / "made")) == [1]
    assert all(sorted(recorded(str(tmp_path / name))) == [2, 3, 4] for name in "ABC")


def test_group_by_key_groups_string_keys_from_both_workers(dask_cluster, tmp_path):
    # each worker process hashes strings with its own seed: a key must still meet itself
    keys = [f"key-{i}" for i in range(20)]

    def build(p):
        (p | beam.Create([(k, i) for i in range(10) for k in keys])
         | beam.GroupByKey() | beam.ParDo(Record(str(tmp_path / "groups"))))

    assert run(build, dask_cluster.address, "--dask_npartitions=4") == "DONE"
    groups = recorded(str(tmp_path / "groups"))
    assert sorted(k for k, _ in groups) == sorted(keys)
    assert all(sorted(values) == list(range(10)) for _, values in groups)


def test_a_reshuffle_spreads_one_partition_over_both_workers(dask_cluster, tmp_path):
    def build(p):
        (p | beam.Create([100]) | beam.FlatMap(lambda n: list(range(n))) | beam.Reshuffle()
         | beam.ParDo(Record(str(tmp_path / "out"))))

    assert run(build, dask_cluster.address) == "DONE"
    assert sorted(recorded(str(tmp_path / "out"))) == list(range(100))
    pids = recorded_pids(str(tmp_path / "out"))
    assert set(pids) == set(dask_cluster.worker_pids().values())
    assert sorted(pids.count(pid) for pid in set(pids)) == [50, 50]


class CountSetups(beam.DoFn):
    def __init__(self, path: str):
        self.path = path

    def setup(self):
        self._note("setup")

    def process(self, x):
        yield os.getpid()

    def teardown(self):
        self._note("teardown")

    def _note(self, what: str):
        with open(self.path, "a") as f:
            f.write(json.dumps([os.getpid(), what]) + "\n")


def test_a_dofn_is_set_up_once_per_worker_process_and_torn_down_after(dask_cluster, tmp_path):
    notes = str(tmp_path / "notes")

    def build(p):
        (p | beam.Create(list(range(40))) | beam.ParDo(CountSetups(notes))
         | beam.ParDo(Record(str(tmp_path / "pids"))))

    assert run(build, dask_cluster.address, "--dask_npartitions=8") == "DONE"
    with open(notes) as f:
        events = [tuple(json.loads(line)) for line in f]
    ran_on = set(recorded(str(tmp_path / "pids")))  # 8 bundles over the processes that ran them
    assert sorted(pid for pid, what in events if what == "setup") == sorted(ran_on)
    assert sorted(pid for pid, what in events if what == "teardown") == sorted(ran_on)
    with dask_cluster.client() as client:
        assert all(not runs for runs in client.run(held_runs).values())


class Fails(beam.DoFn):
    def process(self, x):
        if x == 3:
            raise ValueError(f"no {x}")
        yield x


def test_a_failing_dofn_fails_the_run_naming_its_step(dask_cluster):
    def build(p):
        p | beam.Create(list(range(5))) | "Breaks" >> beam.ParDo(Fails())

    with pytest.raises(ValueError, match=r"no 3.*Breaks"):
        run(build, dask_cluster.address)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SEEN = beam.DoFn.StateParam(userstate.BagStateSpec("seen", beam.coders.VarIntCoder()))


class Stateful(beam.DoFn):
    def process(self, kv, seen=SEEN):
        yield kv


@pytest.mark.parametrize("build, refusal", [
    (lambda p: p | beam.Create([1]) | beam.WindowInto(window.FixedWindows(10)),
     "global window only; 'WindowInto.*FixedWindows"),
    (lambda p: p | beam.Create([(1, 2)]) | beam.ParDo(Stateful()),
     "'ParDo.Stateful.': its DoFn uses state"),
])
def test_what_it_cannot_run_is_refused_before_the_cluster_is_contacted(build, refusal):
    nobody = f"tcp://127.0.0.1:{_free_port()}"
    with pytest.raises(ValueError, match=refusal):
        run(build, nobody)


def test_a_scheduler_that_does_not_answer_is_one_error_naming_it():
    nobody = f"tcp://127.0.0.1:{_free_port()}"
    start = time.monotonic()
    with pytest.raises(SchedulerUnreachable, match=f"no Dask scheduler answered at {nobody}"):
        run(lambda p: p | beam.Create([1]), nobody, "--dask_connection_timeout=2")
    assert time.monotonic() - start < 30
    with pytest.raises(SchedulerUnreachable, match="needs --dask_client_address"):
        p = beam.Pipeline(runner=DaskRunner(), options=PipelineOptions([]))
        p | beam.Create([1])
        p.run()


class Draws(beam.DoFn):
    def process(self, x):
        import random

        yield x, random.random()


def test_a_partition_that_runs_again_draws_the_same_random_numbers():
    # as a partition does when its worker was lost: Beam's round-robin sharding draws each
    # bundle's first shard, and a shuffle after it must get the same split the second time
    from beam_embed.pipeline.common.runners.dask.bundles import Step, release, run_bundle
    from beam_embed.process.private_apis.beam import pickled

    pardo = beam.ParDo(Draws())
    step = Step("run", "Draw", pickled((pardo.fn, pardo.args, pardo.kwargs)), (None,), (),
                beam.Windowing(window.GlobalWindows()))
    try:
        first, again = run_bundle([1, 2, 3], step, 0), run_bundle([1, 2, 3], step, 0)
        other = run_bundle([1, 2, 3], step, 1)
    finally:
        release("run")
    assert first == again
    assert len({d for _, d in first[0]}) == 3 and first != other


def test_a_step_with_an_accelerator_hint_runs_only_where_a_gpu_resource_is(tmp_path):
    from tests.dask_cluster import LoopbackCluster

    def build(p):
        (p | beam.Create(list(range(20)))
         | "OnGpu" >> beam.Map(lambda x: [x, os.getpid()]).with_resource_hints(
             accelerator="type:gpu;count:1")
         | beam.ParDo(Record(str(tmp_path / "out"))))

    with LoopbackCluster(str(tmp_path / "cluster"),
                         worker_args=lambda i: ["--resources", "GPU=1"] if i else []) as cluster:
        with cluster.client() as client:
            (gpu,) = [a for a, w in client.scheduler_info()["workers"].items()
                      if w["resources"].get("GPU")]
        assert run(build, cluster.address, "--dask_npartitions=4") == "DONE"
        pids = cluster.worker_pids()
    ran = recorded(str(tmp_path / "out"))
    assert sorted(x for x, _ in ran) == list(range(20))
    assert {pid for _, pid in ran} == {pids[gpu]}


def test_an_accelerator_hint_without_a_gpu_worker_is_refused(dask_cluster):
    def build(p):
        p | beam.Create([1]) | "OnGpu" >> beam.Map(str).with_resource_hints(accelerator="gpu")

    with pytest.raises(ValueError, match=r"'OnGpu' asks for an accelerator .* no worker of the "
                                         r"cluster has a GPU resource; start GPU workers with"):
        run(build, dask_cluster.address)
