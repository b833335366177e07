"""Each of Beam's runner internals in beam_embed/process/private_apis/beam_runner.py still there,
with the signature and the behaviour relied on: an upgrade that changes one fails here, by
name."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import userstate
from apache_beam.transforms.window import GlobalWindow, GlobalWindows

from beam_embed.process.private_apis import beam as beam_apis
from beam_embed.process.private_apis import beam_runner as apis


def test_dask_options_flags_and_where_they_land():
    options = PipelineOptions([
        "--dask_client_address=tcp://h:1", "--dask_connection_timeout=7",
        "--dask_scheduler_file=/f", "--dask_client_name=n", "--dask_connection_limit=3",
        "--dask_npartitions=5"]).view_as(apis.dask_options())
    assert (options.address, options.timeout, options.scheduler_file, options.name,
            options.connection_limit, options.npartitions, options.partition_size) == \
        ("tcp://h:1", 7, "/f", "n", 3, 5, None)
    assert PipelineOptions(["--dask_partition_size=9"]).view_as(
        apis.dask_options()).partition_size == 9


def _pipeline():
    p = beam.Pipeline()
    nums = p | "Nums" >> beam.Create([1, 2])
    side = p | "Side" >> beam.Create([10])
    both = nums | "Add" >> beam.Map(lambda x, s: x + s, beam.pvalue.AsSingleton(side))
    return p, nums, side, both


def test_leaf_transforms_are_the_primitives_in_order_with_their_inputs_and_outputs():
    p, nums, side, both = _pipeline()
    leaves = apis.leaf_transforms(p)
    labels = [a.full_label for a in leaves]
    assert labels[-1] == "Add"
    assert labels.index("Nums/Impulse") < labels.index("Nums/Map(decode)") < labels.index("Add")
    add = leaves[-1]
    assert isinstance(add.transform, beam.ParDo)
    assert list(add.main_inputs.values()) == [nums]
    assert [v.pvalue for v in add.side_inputs] == [side]
    assert list(add.outputs.items()) == [(None, both)]


def test_leaf_transforms_carry_their_resource_hints_and_the_pipelines():
    from apache_beam.portability.common_urns import resource_hints

    accelerator = resource_hints.ACCELERATOR.urn
    p = beam.Pipeline(options=PipelineOptions(["--resource_hints", "accelerator=all"]))
    p | beam.Create([1]) | "One" >> beam.Map(str).with_resource_hints(accelerator="one")
    hints = {a.full_label: a.resource_hints.get(accelerator)
             for a in apis.leaf_transforms(p)}
    assert hints["One"] == b"one" and hints["Create/Map(decode)"] == b"all"


def test_replace_transforms_swaps_exactly_the_class_named():
    p, nums, side, both = _pipeline()
    apis.replace_transforms(p, {beam.Create: lambda t: apis.create_stand_in()(t.values)})
    stand_ins = [a for a in apis.leaf_transforms(p) if isinstance(a.transform,
                                                                apis.create_stand_in())]
    assert sorted(list(a.transform.values) for a in stand_ins) == [[1, 2], [10]]
    assert not [a for a in apis.leaf_transforms(p) if isinstance(a.transform, beam.Impulse)]


def test_the_reshuffle_stand_in_is_a_primitive_between_its_input_and_its_consumer():
    p = beam.Pipeline()
    made = p | beam.Create([1])
    made | beam.Reshuffle() | "Next" >> beam.Map(str)
    apis.replace_transforms(p, {beam.Reshuffle: lambda t: apis.reshuffle_stand_in()()})
    leaves = apis.leaf_transforms(p)
    (leaf,) = [a for a in leaves if isinstance(a.transform, apis.reshuffle_stand_in())]
    (after,) = [a for a in leaves if a.full_label == "Next"]
    assert list(leaf.main_inputs.values()) == [made]
    assert list(after.main_inputs.values()) == list(leaf.outputs.values())


SEEN = userstate.BagStateSpec("seen", beam.coders.VarIntCoder())
TIMER = userstate.TimerSpec("t", beam.TimeDomain.WATERMARK)
SEEN_PARAM, TIMER_PARAM = beam.DoFn.StateParam(SEEN), beam.DoFn.TimerParam(TIMER)
RESTRICTION_PARAM = beam.DoFn.RestrictionParam()


class _Stateful(beam.DoFn):
    def process(self, kv, seen=SEEN_PARAM):
        yield kv


class _Timed(beam.DoFn):
    def process(self, kv, t=TIMER_PARAM):
        yield kv

    @userstate.on_timer(TIMER)
    def fire(self):
        yield 1


class _Restricted(beam.DoFn, beam.transforms.core.RestrictionProvider):
    def process(self, x, tracker=RESTRICTION_PARAM):
        yield x

    def initial_restriction(self, element):
        from apache_beam.io.restriction_trackers import OffsetRange

        return OffsetRange(0, 1)

    def create_tracker(self, restriction):
        from apache_beam.io.restriction_trackers import OffsetRestrictionTracker

        return OffsetRestrictionTracker(restriction)

    def restriction_size(self, element, restriction):
        return 1


def test_unsupported_dofn_features_are_named():
    assert apis.unsupported_dofn_features(beam.Map(str).fn) == []
    assert apis.unsupported_dofn_features(_Stateful()) == ["state"]
    assert "timers" in apis.unsupported_dofn_features(_Timed())
    assert apis.unsupported_dofn_features(_Restricted()) == ["a restriction (splittable DoFn)"]


def test_a_side_input_view_turns_windowed_values_into_what_the_dofn_receives():
    p = beam.Pipeline()
    pcoll = p | beam.Create([("a", 1)])
    values = [GlobalWindows.windowed_value(v) for v in [("a", 1), ("b", 2)]]
    for view, expected in [(beam.pvalue.AsList(pcoll), [("a", 1), ("b", 2)]),
                           (beam.pvalue.AsDict(pcoll), {"a": 1, "b": 2}),
                           (beam.pvalue.AsIter(pcoll), [("a", 1), ("b", 2)])]:
        shape = apis.side_input_view(view)
        assert shape[0] is type(view) and isinstance(shape[1], dict)
        got = apis.side_input_map(beam_apis.unpickle(beam_apis.pickled(shape)), values)[GlobalWindow()]
        assert (list(got) if isinstance(view, beam.pvalue.AsIter) else got) == expected
    single = apis.side_input_view(beam.pvalue.AsSingleton(pcoll, default_value=7))
    assert apis.side_input_map(single, [])[GlobalWindow()] == 7


class _Emits(beam.DoFn):
    def setup(self):
        self.state = ["setup"]

    def process(self, x, extra, side):
        yield x + extra + side
        yield beam.pvalue.TaggedOutput("odd", x) if x % 2 else x * 100

    def finish_bundle(self):
        yield beam.pvalue.TaggedOutput("end", GlobalWindows.windowed_value("finished"))

    def teardown(self):
        self.state.append("teardown")


def test_the_dofn_runner_sends_every_output_by_tag_finish_bundle_included():
    class Collect(apis.receiver_class()):
        def __init__(self):
            self.values = []

        def receive(self, windowed_value):
            self.values.append(windowed_value.value)

    p = beam.Pipeline()
    side_pcoll = p | beam.Create([1000])
    pardo = beam.ParDo(_Emits(), 10, beam.pvalue.AsSingleton(side_pcoll))
    receivers = {None: Collect(), "odd": Collect(), "end": Collect()}
    fn, args, kwargs = beam_apis.unpickle(beam_apis.pickled((pardo.fn, pardo.args, pardo.kwargs)))
    side = apis.side_input_map(apis.side_input_view(pardo.side_inputs[0]),
                             [GlobalWindows.windowed_value(1000)])
    runner = apis.dofn_runner(fn, args, kwargs, [side], beam.Windowing(GlobalWindows()),
                            receivers, "Emits")
    runner.setup()
    runner.start()
    for x in (1, 2):
        runner.process(GlobalWindows.windowed_value(x))
    runner.finish()
    runner.teardown()
    assert receivers[None].values == [1011, 1012, 200]
    assert receivers["odd"].values == [1]
    assert receivers["end"].values == ["finished"]
    assert fn.state == ["setup", "teardown"]
