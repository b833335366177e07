"""A Beam pipeline as one dask task graph: a dask bag per PCollection, its elements the
PCollection's values (global window only).

Beam's own DaskRunner keeps a bag per producing transform, so every output of a multi-output
ParDo lands in one bag and each consumer reads all of them; here each output tag is a bag of
its own, taken from the ParDo's partitions. A side input is one more dependency of the tasks
that read it (the whole PCollection, gathered once), in the same graph. What the runner cannot
run is refused by `check` before anything is computed.
"""

from __future__ import annotations

import operator
import uuid

import apache_beam as beam
import dask
import dask.bag as db
from dask.highlevelgraph import HighLevelGraph

from beam_embed.pipeline.common.runners.dask.bundles import Step, run_bundle
from beam_embed.process.private_apis.beam import pickled
from beam_embed.process.private_apis.beam_runner import (
    create_stand_in,
    reshuffle_stand_in,
    side_input_view,
    unsupported_dofn_features,
)

SUPPORTED = "Create, Impulse, ParDo (Map, FlatMap, ...), GroupByKey, Flatten, Reshuffle"
ACCELERATOR = "beam:resources:accelerator:v1"  # Beam's resource hint (common_urns.resource_hints)
GPU = "GPU"  # the Dask worker resource a step with that hint takes one of


def check(leaves: list) -> None:
    """A ValueError naming the first transform this runner cannot run, and why."""
    for applied in leaves:
        transform, label = applied.transform, applied.full_label
        if not isinstance(transform, _KINDS):
            raise ValueError(f"the Dask runner cannot run {label!r} "
                             f"({type(transform).__name__}); it runs {SUPPORTED}")
        for pcoll in applied.outputs.values():
            if not pcoll.windowing.is_default():
                raise ValueError(
                    f"the Dask runner runs the global window only; {label!r} outputs "
                    f"{type(pcoll.windowing.windowfn).__name__} windows")
            if not pcoll.is_bounded:
                raise ValueError(f"the Dask runner runs bounded input only; {label!r} is not")
        if isinstance(transform, beam.ParDo):
            features = unsupported_dofn_features(transform.fn)
            if features:
                raise ValueError(f"the Dask runner cannot run {label!r}: its DoFn uses "
                                 f"{' and '.join(features)}")


class Graph:
    """Adds each primitive transform's output bags, in pipeline order (`add`), and hands out
    the bags nothing reads (`leaves`): every one is computed, not only the last."""

    def __init__(self, parallelism: int, workers: list[str], partition_size: int | None = None,
                 gpu_workers: int = 0):
        self.run_id = uuid.uuid4().hex
        self._parallelism = parallelism
        self._workers = workers
        self._gpu_workers = gpu_workers
        self._partition_size = partition_size
        self._bags: dict = {}  # PCollection -> Bag
        self._read: set = set()  # PCollections something reads

    def add(self, applied) -> None:
        transform = applied.transform
        inputs = [self._input(p) for p in applied.main_inputs.values()
                  if not isinstance(p, beam.pvalue.PBegin)]
        if isinstance(transform, beam.ParDo):
            outputs = self._pardo(applied, inputs[0])
        elif isinstance(transform, beam.Impulse):
            outputs = [db.from_sequence([b""], npartitions=1)]
        elif isinstance(transform, create_stand_in()):
            outputs = [self._create(list(transform.values))]
        elif isinstance(transform, reshuffle_stand_in()):
            outputs = [self._spread(inputs[0], applied.full_label)]
        elif isinstance(transform, beam.GroupByKey):
            outputs = [inputs[0].groupby(operator.itemgetter(0), shuffle="tasks")
                       .map(_values_only)]
        else:  # Flatten
            outputs = [db.concat(inputs) if inputs else db.from_sequence([])]
        for pcoll, bag in zip(applied.outputs.values(), outputs):
            self._bags[pcoll] = bag

    def leaves(self) -> list[db.Bag]:
        return [bag for pcoll, bag in self._bags.items() if pcoll not in self._read]

    def _input(self, pcoll):
        self._read.add(pcoll)
        return self._bags[pcoll]

    def _pardo(self, applied, main: db.Bag) -> list[db.Bag]:
        transform = applied.transform
        tags = tuple(applied.outputs)  # the main output (None) first
        views = [side_input_view(view) for view in applied.side_inputs]
        sides = [self._input(view.pvalue).reduction(list, _concatenated, split_every=False)
                 for view in applied.side_inputs]
        main_input = next(iter(applied.main_inputs.values()))
        step = Step(self.run_id, applied.full_label,
                    pickled((transform.fn, transform.args, transform.kwargs)), tags,
                    tuple(views), main_input.windowing)
        # by hand, not map_partitions: dask gives a collection passed as an argument a copy
        # of its graph under new names, so a side input's steps would run once per reader
        name = f"{_name(applied.full_label)}-{dask.base.tokenize(step, main.name)}"
        dsk = {(name, i): (run_bundle, (main.name, i), step, i, *[side.key for side in sides])
               for i in range(main.npartitions)}
        with dask.annotate(**self._resources(applied)):
            graph = HighLevelGraph.from_collections(name, dsk, dependencies=[main, *sides])
        bundles = db.Bag(graph, name, main.npartitions)
        return [bundles.map_partitions(operator.itemgetter(i), token=f"{_name(tag)}-of")
                for i, tag in enumerate(tags)]

    def _resources(self, applied) -> dict:
        """A step with Beam's accelerator resource hint runs on workers started with a GPU
        resource (`dask worker --resources GPU=1`), each task taking one."""
        if ACCELERATOR not in applied.resource_hints:
            return {}
        if not self._gpu_workers:
            raise ValueError(f"{applied.full_label!r} asks for an accelerator (Beam's resource "
                             f"hint) and no worker of the cluster has a {GPU} resource; start "
                             f"GPU workers with `dask worker ... --resources {GPU}=1`")
        return {"resources": {GPU: 1}}

    def _create(self, values: list) -> db.Bag:
        if self._partition_size:
            return db.from_sequence(values, partition_size=self._partition_size)
        return db.from_sequence(values, npartitions=max(1, min(len(values),
                                                              self._parallelism)))

    def _spread(self, bag: db.Bag, label: str) -> db.Bag:
        """The bag dealt round-robin into `parallelism` partitions, partition j kept on worker
        j mod workers when it is there: without that, dask runs every partition where the
        input is (one file read by one worker), and the encoder's work stays on one worker."""
        n = self._parallelism
        name = f"{_name(label)}-{uuid.uuid4().hex}"
        dealt, piece = f"deal-{name}", f"piece-{name}"
        dsk = {}
        for i in range(bag.npartitions):
            dsk[dealt, i] = (_deal, (bag.name, i), n, i)
            for j in range(n):
                dsk[piece, i, j] = (operator.getitem, (dealt, i), j)
        for j in range(n):
            dsk[name, j] = (_concatenated, [(piece, i, j) for i in range(bag.npartitions)])
        workers = self._workers

        def pinned(key):
            return [workers[key[1] % len(workers)]] if key[0] == name else workers

        with dask.annotate(workers=pinned, allow_other_workers=True):
            graph = HighLevelGraph.from_collections(name, dsk, dependencies=[bag])
        return db.Bag(graph, name, n)


_KINDS = (beam.ParDo, beam.Impulse, beam.GroupByKey, beam.Flatten, create_stand_in(),
          reshuffle_stand_in())


def _name(label) -> str:
    """A task name prefix from a step label (dask's dashboard splits keys on '-')."""
    return "".join(c if c.isalnum() else "_" for c in str(label))


def _values_only(group):
    key, pairs = group
    return key, [value for _, value in pairs]


def _concatenated(parts) -> list:
    return [value for part in parts for value in part]


def _deal(partition, n: int, first: int) -> list[list]:
    """The partition's values dealt into n hands, starting at hand `first` mod n (partitions
    smaller than n would otherwise all fill the first hands)."""
    hands = [[] for _ in range(n)]
    for i, value in enumerate(partition, first):
        hands[i % n].append(value)
    return hands
