"""What a dask worker runs for one partition of a ParDo: the step's DoFn over the partition as one
bundle, and what it emitted, from `process` and from `finish_bundle` alike, by output tag.

A worker process keeps the DoFns it set up for a run and hands an idle one to each partition of
the same step: a DoFn sets up once per worker process and instance, as on Beam's own workers
(the encoder loads its model once per worker process, not once per partition), and two
partitions running at once on a worker's threads never share one. `release(run_id)` tears a
run's DoFns down when the run ends (the runner calls it on every worker).
"""

from __future__ import annotations

import dataclasses
import random
import threading

from apache_beam.transforms.window import GlobalWindows

from beam_embed.process import gcs_auth
from beam_embed.process.private_apis.beam import unpickle
from beam_embed.process.private_apis.beam_runner import dofn_runner, receiver_class, side_input_map

_IDLE: dict[tuple[str, str], list[_Bundles]] = {}  # (run id, step label) -> set-up DoFns
_LOCK = threading.Lock()


@dataclasses.dataclass(frozen=True)
class Step:
    """A ParDo as its tasks carry it. `fn`: the DoFn, `args`/`kwargs` with side inputs'
    placeholders, pickled once by Beam's pickler (each worker-side copy is unpickled from it,
    so no two bundles share an instance); `tags`: the declared outputs, None (main) first;
    `sides`: (view class, view options) per side input, in the transform's order."""

    run_id: str
    label: str
    pickled: bytes
    tags: tuple
    sides: tuple
    windowing: object

    def __dask_tokenize__(self):  # the label is unique in a pipeline: no two steps merge
        return "beam-step", self.run_id, self.label


class _Collect(receiver_class()):
    def __init__(self):
        self.values = []

    def receive(self, windowed_value):
        self.values.append(windowed_value.value)


class _Drop(receiver_class()):
    def receive(self, windowed_value):
        pass


class _Receivers(dict):
    """An output the transform did not declare goes nowhere, as in Beam's direct runner."""

    def __missing__(self, tag):
        return _Drop()


class _Bundles:
    """One DoFn instance, set up, running bundle after bundle."""

    def __init__(self, step: Step, side_values: tuple):
        gcs_auth.install()  # a worker's gs:// credentials looked up as a command's are
        fn, args, kwargs = unpickle(step.pickled)
        self._tags = step.tags
        self._receivers = _Receivers({tag: _Collect() for tag in step.tags})
        sides = [side_input_map(view, [GlobalWindows.windowed_value(v) for v in values])
                 for view, values in zip(step.sides, side_values)]
        self._runner = dofn_runner(fn, args, kwargs, sides, step.windowing, self._receivers,
                                   step.label)
        self._runner.setup()

    def run(self, elements) -> tuple[list, ...]:
        for receiver in self._receivers.values():
            receiver.values = []
        self._runner.start()
        for element in elements:
            self._runner.process(GlobalWindows.windowed_value(element))
        self._runner.finish()  # what finish_bundle emits is collected with the rest
        return tuple(self._receivers[tag].values for tag in self._tags)

    def teardown(self) -> None:
        self._runner.teardown()


def run_bundle(elements, step: Step, index: int, *side_values) -> tuple[list, ...]:
    """Partition `index`'s outputs, one list per tag of `step.tags`. Python's random numbers
    are seeded by the run, step and partition: a partition that runs again (its worker was
    lost) draws the same ones on a one-thread worker (Beam's round-robin sharding draws each
    bundle's first shard), so what a shuffle after it received from the first run stays
    right."""
    key = (step.run_id, step.label)
    random.seed(f"{step.run_id}/{step.label}/{index}")
    with _LOCK:
        idle = _IDLE.get(key)
        bundles = idle.pop() if idle else None
    if bundles is None:
        bundles = _Bundles(step, side_values)
    try:
        out = bundles.run(elements)
    except BaseException:
        _quietly_teardown(bundles)  # a failed bundle's DoFn is not reused, as in Beam
        raise
    with _LOCK:
        _IDLE.setdefault(key, []).append(bundles)
    return out


def release(run_id: str) -> int:
    """Tears down this process's DoFns of the run; how many there were."""
    with _LOCK:
        keys = [k for k in _IDLE if k[0] == run_id]
        held = [b for k in keys for b in _IDLE.pop(k)]
    for bundles in held:
        _quietly_teardown(bundles)
    return len(held)


def held_runs() -> set[str]:
    """The runs whose DoFns this process holds."""
    with _LOCK:
        return {run_id for run_id, _ in _IDLE}


def _quietly_teardown(bundles: _Bundles) -> None:
    try:
        bundles.teardown()
    except Exception:  # noqa: BLE001 - Beam does not guarantee teardown either; the run decides
        pass
