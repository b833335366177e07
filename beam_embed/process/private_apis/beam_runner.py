"""Beam's runner internals behind the project's Dask runner
(beam_embed.pipeline.common.runners.dask). Beam documents none of these for use outside its own
runners ("For internal use only; no backwards-compatibility guarantees"), and a runner has no public
way to walk a pipeline, swap its transforms or run a DoFn over a bundle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable


def dask_options() -> type:
    """Beam's DaskOptions: --dask_client_address (dest `address`), --dask_connection_timeout
    (`timeout`), --dask_scheduler_file (`scheduler_file`), --dask_client_name (`name`),
    --dask_connection_limit (`connection_limit`), --dask_npartitions (`npartitions`),
    --dask_partition_size (`partition_size`). Its module imports dask.distributed."""
    from apache_beam.runners.dask.dask_runner import DaskOptions

    return DaskOptions


def leaf_transforms(pipeline) -> list:
    """The pipeline's primitive transforms (AppliedPTransform: .transform, .full_label,
    .main_inputs, .side_inputs, .outputs, .resource_hints: Beam's hints by URN, the pipeline's
    --resource_hints included), each after those it reads from."""
    from apache_beam.pipeline import PipelineVisitor

    leaves = []

    class Leaves(PipelineVisitor):
        def visit_transform(self, applied):
            leaves.append(applied)

    pipeline.visit(Leaves())
    return leaves


def replace_transforms(pipeline, replacements: dict[type, Callable]) -> None:
    """Replaces every applied transform of exactly a class in `replacements` by what its
    function makes of it (a transform with the same input and output)."""
    from apache_beam.pipeline import PTransformOverride

    class Override(PTransformOverride):
        def __init__(self, cls, make):
            self._cls, self._make = cls, make

        def matches(self, applied):
            return applied.transform.__class__ is self._cls

        def get_replacement_transform_for_applied_ptransform(self, applied):
            return self._make(applied.transform)

    pipeline.replace_all([Override(cls, make) for cls, make in replacements.items()])


def create_stand_in() -> type:
    """Beam's DaskRunner's primitive Create: `_Create(values)`, its `values` the elements."""
    from apache_beam.runners.dask.overrides import _Create

    return _Create


def reshuffle_stand_in() -> type:
    """Beam's DaskRunner's primitive Reshuffle: `_Reshuffle()`, the input as its output."""
    from apache_beam.runners.dask.overrides import _Reshuffle

    return _Reshuffle


def unsupported_dofn_features(fn) -> list[str]:
    """What of `fn` (a DoFn) a runner without state, timers or restrictions cannot run."""
    from apache_beam.runners.common import DoFnSignature

    signature = DoFnSignature(fn)
    return [name for name, has in (("state", signature.is_stateful_dofn()),
                                   ("timers", signature.has_timers()),
                                   ("a restriction (splittable DoFn)",
                                    signature.is_splittable_dofn())) if has]


def side_input_view(view) -> tuple[type, dict]:
    """(view class, view options) of a side input (AsSingleton, AsList, ...): what a worker
    needs to turn its values into what the DoFn receives, without the PCollection itself (which
    drags the whole pipeline into a pickle)."""
    return type(view), view._view_options()


def side_input_map(view: tuple[type, dict], windowed_values: Iterable):
    """Beam's SideInputMap over a side input's WindowedValues, for `dofn_runner`."""
    from apache_beam.transforms.sideinputs import SideInputMap

    view_class, options = view
    return SideInputMap(view_class, options, windowed_values)


def receiver_class() -> type:
    """Beam's Receiver: `receive(windowed_value)`, what a DoFnRunner hands each output to."""
    from apache_beam.runners.common import Receiver

    return Receiver


def dofn_runner(fn, args, kwargs, side_inputs: list, windowing, receivers, step_name: str):
    """Beam's DoFnRunner for `fn`: .setup(), .start(), .process(windowed_value), .finish()
    (what finish_bundle emits goes to the receivers too), .teardown(). `receivers` maps each
    output tag (None: the main output) to a Receiver."""
    from apache_beam.runners.common import DoFnRunner

    return DoFnRunner(fn, args, kwargs, side_inputs, windowing, tagged_receivers=receivers,
                      step_name=step_name)
