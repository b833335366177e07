"""Each private API of beam_embed/process/private_apis.py still there, with the signature and the
behaviour relied on: a Beam, google-auth, TF-Hub or Python upgrade that changes one fails here,
by name."""

from __future__ import annotations

import argparse
import atexit
import inspect

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import userstate
from apache_beam.transforms.window import GlobalWindow, GlobalWindows

from beam_embed.process import private_apis


def _params(fn) -> list[str]:
    return list(inspect.signature(fn).parameters)


# argparse


def test_argparse_formatter_hooks_are_the_ones_help_calls():
    for hook in ("_format_action_invocation", "_get_help_string"):
        assert _params(getattr(argparse.HelpFormatter, hook)) == ["self", "action"], hook

    class Shown(private_apis.HelpFormatterHooks):
        def shown_option_strings(self, action):
            return [s for s in action.option_strings if "_" not in s]

        def help_text(self, action):
            return "help: " + (action.help or "")

    parser = argparse.ArgumentParser(prog="p", formatter_class=Shown, add_help=False)
    parser.add_argument("--a-b", "--a_b", help="x")
    text = parser.format_help()
    assert "--a-b A_B" in text and "--a_b" not in text and "help: x" in text


def test_an_option_string_added_after_add_argument_parses():
    parser = argparse.ArgumentParser(add_help=False)
    action = parser.add_argument("--a_b", type=int)
    assert private_apis.add_option_string(parser, action, "--a-b")
    assert not private_apis.add_option_string(parser, action, "--a-b")  # taken
    assert parser.parse_args(["--a-b", "3"]).a_b == 3
    assert private_apis.option_strings(parser) == {"--a_b", "--a-b"}


def test_atexit_handlers_run_now_and_once():
    # In a child process: running this process's handlers would run TensorFlow's and Keras's
    # clean-ups too, and break the tests that use them afterwards.
    import subprocess
    import sys

    assert callable(getattr(atexit, "_run_exitfuncs", None)), "atexit._run_exitfuncs is gone"
    script = ("import atexit\n"
              "from beam_embed.process import private_apis\n"
              "ran = []\n"
              "atexit.register(ran.append, 1)\n"
              "private_apis.run_atexit_handlers()\n"
              "first = list(ran)\n"
              "private_apis.run_atexit_handlers()\n"
              "print(first, ran)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.split("\n")[0] == "[1] [1]"  # ran now, then cleared as an exit leaves them


# Beam


def test_beams_argument_parser_takes_value_provider_arguments():
    from apache_beam.options.pipeline_options import StandardOptions

    parser = private_apis.beam_argument_parser()(allow_abbrev=False)
    assert hasattr(parser, "add_value_provider_argument")
    private_apis.add_beam_options(StandardOptions, parser)
    assert "--runner" in private_apis.option_strings(parser)


def test_sort_and_batch_dofn_sorts_its_buffer_into_batches_at_bundle_end():
    cls = private_apis.sort_and_batch_dofn()
    assert issubclass(cls, beam.DoFn)
    assert _params(cls.__init__) == ["self", "min_batch_size", "max_batch_size",
                                     "max_batch_weight", "element_size_fn"]
    fn = cls(1, 2, 100, len)
    fn.start_bundle()
    for element in ("ccc", "a", "bb", "dddd"):
        fn.process(element)
    assert private_apis.batch_buffer(fn) == ["ccc", "a", "bb", "dddd"]
    batches = [wv.value for wv in fn.finish_bundle()]
    assert batches == [["a", "bb"], ["ccc", "dddd"]]
    private_apis.set_batch_buffer(fn, ["eee"])  # what the job's subclass carries over
    fn.process("f")
    assert [wv.value for wv in fn.finish_bundle()] == [["f", "eee"]]


def test_masked_crc32c_is_tfrecords():
    crc = 0xE3069283  # CRC32C of b"123456789", the algorithm's check value
    masked = (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    assert private_apis.masked_crc32c()(b"123456789") == masked


def test_state_sampling_period_is_the_samplers_one_default(monkeypatch):
    from apache_beam.runners.worker import statesampler

    init = statesampler.StateSampler.__init__
    assert init.__defaults__ == (statesampler.DEFAULT_SAMPLING_PERIOD_MS,) or \
        init.__defaults__ == (20,)  # set already by a run in this process
    assert _params(init)[-1] == "sampling_period_ms"
    monkeypatch.setattr(init, "__defaults__", (statesampler.DEFAULT_SAMPLING_PERIOD_MS,))
    assert private_apis.set_state_sampling_period(7)
    assert init.__defaults__ == (7,)
    monkeypatch.setattr(init, "__defaults__", (150,))  # not Beam's default: left alone
    assert not private_apis.set_state_sampling_period(7) and init.__defaults__ == (150,)


def test_worker_command_lines_are_where_the_prefix_goes(monkeypatch):
    from apache_beam.runners.portability import local_job_service

    worker = local_job_service.SubprocessSdkWorker
    monkeypatch.setattr(worker, "run", worker.run)  # restored after the test
    assert "_worker_command_line" in worker.__init__.__code__.co_names
    assert "_worker_command_line" in inspect.getsource(inspect.unwrap(worker.run))
    seen = []
    monkeypatch.setattr(worker, "run", lambda self: seen.append(self._worker_command_line))
    assert private_apis.prefix_worker_command_lines(lambda: "echo; ")
    fake = worker.__new__(worker)
    fake._worker_command_line = "python -m worker"
    worker.run(fake)
    assert seen == ["echo; python -m worker"]


def test_dataflow_client_pieces_the_offline_client_sets():
    from apache_beam.runners.dataflow.internal import apiclient

    source = inspect.getsource(apiclient.DataflowApplicationClient.__init__)
    for name in ("standard_options", "google_cloud_options", "_enable_caching",
                 "_root_staging_location", "environment_version", "_sdk_image_overrides"):
        assert f"self.{name}" in source, name  # what the offline client sets in its place
    assert "_FNAPI_ENVIRONMENT_MAJOR_VERSION" in source
    assert _params(apiclient.DataflowApplicationClient.stage_file_with_retry)[:4] == [
        "self", "gcs_or_local_path", "file_name", "stream_or_path"]


def test_the_offline_dataflow_client_describes_a_job_and_uploads_nothing():
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.portability.api import beam_runner_api_pb2
    from apache_beam.runners.dataflow.internal import apiclient
    from apache_beam.transforms import environments

    options = PipelineOptions([
        "--project=p", "--region=us-central1", "--temp_location=gs://a-bucket/tmp",
        "--staging_location=gs://a-bucket/staging", "--sdk_location=container",
        "--sdk_harness_container_image_overrides=.*beam_python.*,example.com/beam:x"])
    p = beam.Pipeline()  # the launcher's own runner: nothing validated online
    _ = p | beam.Create([1, 2]) | beam.Map(str)
    job = apiclient.Job(options, p.to_runner_api(
        default_environment=environments.DockerEnvironment.from_container_image(
            "apache/beam_python3.11_sdk:2.77.0")))
    staged = []
    client = private_apis.offline_dataflow_client(options, "gs://a-bucket/staging",
                                                  lambda *upload: staged.append(upload))
    client.create_job_description(job)
    assert [name for _, name, _ in staged] == ["pipeline.pb"]
    folder, _, stream = staged[0]
    assert folder.startswith("gs://a-bucket/staging/")
    assert beam_runner_api_pb2.Pipeline.FromString(stream.getvalue()) == job.proto_pipeline
    images = [beam_runner_api_pb2.DockerPayload.FromString(e.payload).container_image
              for e in job.proto_pipeline.components.environments.values()]
    assert images == ["example.com/beam:x"]  # the overrides the offline constructor read
    assert dict(job.proto.environment.version)["major"]
    with pytest.raises(AssertionError, match="never uploads"):
        client.stage_file("gs://a-bucket/x", "f", b"")


def test_beams_unpickler_reads_what_beam_pickled():
    from apache_beam.internal import pickler

    fn = beam.Map(lambda x: x + 1).fn
    assert private_apis.unpickle(pickler.dumps(fn)).process(1) == [2]


@pytest.mark.parametrize("path, remote", [("gs://b/sdk.tar.gz", True), ("/tmp/sdk.tar.gz", False),
                                          ("default", False)])
def test_the_stagers_remote_paths(path, remote):
    assert private_apis.is_remote_path(path) is remote


# Beam's runner internals: the project's Dask runner
def test_dask_options_flags_and_where_they_land():
    options = PipelineOptions([
        "--dask_client_address=tcp://h:1", "--dask_connection_timeout=7",
        "--dask_scheduler_file=/f", "--dask_client_name=n", "--dask_connection_limit=3",
        "--dask_npartitions=5"]).view_as(private_apis.dask_options())
    assert (options.address, options.timeout, options.scheduler_file, options.name,
            options.connection_limit, options.npartitions, options.partition_size) == \
        ("tcp://h:1", 7, "/f", "n", 3, 5, None)
    assert PipelineOptions(["--dask_partition_size=9"]).view_as(
        private_apis.dask_options()).partition_size == 9


def _pipeline():
    p = beam.Pipeline()
    nums = p | "Nums" >> beam.Create([1, 2])
    side = p | "Side" >> beam.Create([10])
    both = nums | "Add" >> beam.Map(lambda x, s: x + s, beam.pvalue.AsSingleton(side))
    return p, nums, side, both


def test_leaf_transforms_are_the_primitives_in_order_with_their_inputs_and_outputs():
    p, nums, side, both = _pipeline()
    leaves = private_apis.leaf_transforms(p)
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
             for a in private_apis.leaf_transforms(p)}
    assert hints["One"] == b"one" and hints["Create/Map(decode)"] == b"all"


def test_replace_transforms_swaps_exactly_the_class_named():
    p, nums, side, both = _pipeline()
    private_apis.replace_transforms(p, {beam.Create: lambda t: private_apis.create_stand_in()(t.values)})
    stand_ins = [a for a in private_apis.leaf_transforms(p) if isinstance(a.transform,
                                                                private_apis.create_stand_in())]
    assert sorted(list(a.transform.values) for a in stand_ins) == [[1, 2], [10]]
    assert not [a for a in private_apis.leaf_transforms(p) if isinstance(a.transform, beam.Impulse)]


def test_the_reshuffle_stand_in_is_a_primitive_between_its_input_and_its_consumer():
    p = beam.Pipeline()
    made = p | beam.Create([1])
    made | beam.Reshuffle() | "Next" >> beam.Map(str)
    private_apis.replace_transforms(p, {beam.Reshuffle: lambda t: private_apis.reshuffle_stand_in()()})
    leaves = private_apis.leaf_transforms(p)
    (leaf,) = [a for a in leaves if isinstance(a.transform, private_apis.reshuffle_stand_in())]
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
    assert private_apis.unsupported_dofn_features(beam.Map(str).fn) == []
    assert private_apis.unsupported_dofn_features(_Stateful()) == ["state"]
    assert "timers" in private_apis.unsupported_dofn_features(_Timed())
    assert private_apis.unsupported_dofn_features(_Restricted()) == ["a restriction (splittable DoFn)"]


def test_a_side_input_view_turns_windowed_values_into_what_the_dofn_receives():
    p = beam.Pipeline()
    pcoll = p | beam.Create([("a", 1)])
    values = [GlobalWindows.windowed_value(v) for v in [("a", 1), ("b", 2)]]
    for view, expected in [(beam.pvalue.AsList(pcoll), [("a", 1), ("b", 2)]),
                           (beam.pvalue.AsDict(pcoll), {"a": 1, "b": 2}),
                           (beam.pvalue.AsIter(pcoll), [("a", 1), ("b", 2)])]:
        shape = private_apis.side_input_view(view)
        assert shape[0] is type(view) and isinstance(shape[1], dict)
        got = private_apis.side_input_map(private_apis.unpickle(private_apis.pickled(shape)), values)[GlobalWindow()]
        assert (list(got) if isinstance(view, beam.pvalue.AsIter) else got) == expected
    single = private_apis.side_input_view(beam.pvalue.AsSingleton(pcoll, default_value=7))
    assert private_apis.side_input_map(single, [])[GlobalWindow()] == 7


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
    class Collect(private_apis.receiver_class()):
        def __init__(self):
            self.values = []

        def receive(self, windowed_value):
            self.values.append(windowed_value.value)

    p = beam.Pipeline()
    side_pcoll = p | beam.Create([1000])
    pardo = beam.ParDo(_Emits(), 10, beam.pvalue.AsSingleton(side_pcoll))
    receivers = {None: Collect(), "odd": Collect(), "end": Collect()}
    fn, args, kwargs = private_apis.unpickle(private_apis.pickled((pardo.fn, pardo.args, pardo.kwargs)))
    side = private_apis.side_input_map(private_apis.side_input_view(pardo.side_inputs[0]),
                             [GlobalWindows.windowed_value(1000)])
    runner = private_apis.dofn_runner(fn, args, kwargs, [side], beam.Windowing(GlobalWindows()),
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


# Beam's gs:// credentials look


def test_beams_credentials_look_is_replaced_where_its_lock_calls_it(monkeypatch):
    from apache_beam.internal.gcp import auth
    from apache_beam.options.pipeline_options import PipelineOptions

    assert private_apis.BEAM_AUTH_MODULE == auth.__name__
    credentials = auth._Credentials
    assert "cls._get_service_credentials(pipeline_options)" in inspect.getsource(
        credentials.get_service_credentials)
    for name in ("_get_service_credentials", "_credentials", "_credentials_init"):
        monkeypatch.setattr(credentials, name, getattr(credentials, name))  # restored after
    monkeypatch.setattr(credentials, "_credentials_init", False)
    asked = []
    assert private_apis.replace_beam_credentials_look(
        auth, lambda options: asked.append(options) or "found")
    options = PipelineOptions([])
    assert auth.get_service_credentials(options) == "found"
    assert auth.get_service_credentials(options) == "found" and asked == [options]  # once


def test_beams_credentials_look_is_kept_where_beam_changed():
    import types

    changed = types.SimpleNamespace(_GOOGLE_AUTH_AVAILABLE=True,
                                    _Credentials=type("C", (), {"_get_service_credentials": 1}))
    assert not private_apis.replace_beam_credentials_look(changed, print)
    assert changed._Credentials._get_service_credentials == 1


def test_beams_credentials_come_in_its_adapter_impersonating_when_asked():
    from apache_beam.internal.gcp import auth
    from apache_beam.options.pipeline_options import PipelineOptions
    from google.auth import credentials as ga_credentials
    from google.auth import impersonated_credentials

    plain = ga_credentials.AnonymousCredentials()
    adapted = private_apis.beam_credentials(plain, PipelineOptions([]))
    assert isinstance(adapted, auth._ApitoolsCredentialsAdapter)
    assert adapted.get_google_auth_credentials() is plain
    adapted = private_apis.beam_credentials(plain, PipelineOptions(
        ["--impersonate_service_account", "a@p.iam.gserviceaccount.com"]))
    inner = adapted.get_google_auth_credentials()
    assert isinstance(inner, impersonated_credentials.Credentials)
    assert inner.service_account_email == "a@p.iam.gserviceaccount.com"


# google-auth


def test_google_auths_gce_check_is_replaced_for_the_block_only():
    from google.auth import _default
    from google.auth.compute_engine import _metadata

    assert "_metadata.is_on_gce(request=request)" in inspect.getsource(_default)
    own = _metadata.is_on_gce
    seen = []
    with private_apis.gce_check_replaced(lambda request, check: seen.append(check) or True):
        assert _metadata.is_on_gce(request="r") is True
    assert _metadata.is_on_gce is own and seen == [own]


def test_the_firmware_is_read_and_the_metadata_server_asked_once():
    import types

    from google.auth import exceptions
    from google.auth.compute_engine import _metadata

    assert isinstance(private_apis.gce_by_firmware(), bool)  # reads a file, asks no one
    assert _params(_metadata.ping) == ["request", "timeout", "retry_count"]
    tried = []

    def refused(**kwargs):  # google-auth's transport, where no metadata server listens
        tried.append(kwargs["timeout"])
        raise exceptions.TransportError("connection refused")

    assert private_apis.metadata_server_answers(refused, 0.25) is False
    assert tried == [0.25]  # one try, for the time given

    def answers(**kwargs):
        return types.SimpleNamespace(status=200, headers={"metadata-flavor": "Google"})

    assert private_apis.metadata_server_answers(answers, 0.25) is True


# TF-Hub


def test_tf_hub_marks_and_reads_the_same_attribute():
    """Read from TF-Hub's sources: importing tensorflow_hub imports all of Keras 2."""
    import importlib.util
    from pathlib import Path

    folder = Path(importlib.util.find_spec("tensorflow_hub").submodule_search_locations[0])
    assert "obj._is_hub_module_v1 = is_hub_module_v1" in (folder / "module_v2.py").read_text()
    assert 'getattr(self._func, "_is_hub_module_v1", False)' in (
        folder / "keras_layer.py").read_text()
    loaded = type("Loaded", (), {})()
    private_apis.mark_hub_module_v1(loaded, True)
    assert loaded._is_hub_module_v1 is True


def test_beams_finalize_renames_what_the_finalize_hooks_say(tmp_path):
    from apache_beam.io.filebasedsink import FileBasedSink

    asked = []

    class Sink(private_apis.FinalizeHooks, FileBasedSink):
        def files_to_rename(self, writer_results, num_shards, window=None):
            asked.append((list(writer_results), num_shards))
            sources, destinations, deleted, skipped = super().files_to_rename(
                writer_results, num_shards, window)
            return sources[:1], destinations[:1], deleted, skipped  # the first shard only

    sink = Sink(str(tmp_path / "part"), coder=None, file_name_suffix=".txt",
                shard_name_template="-SSSSS-of-NNNNN")
    init = sink.initialize_write()
    temps = [f"{init}/{uid}.txt" for uid in ("a", "b")]
    for path in temps:
        with open(path, "w") as f:
            f.write(path)
    assert list(sink.finalize_write(init, temps, None)) == [str(tmp_path / "part-00000-of-00002.txt")]
    assert asked == [(temps, 2)]
    assert sink.final_name(1, 2) == str(tmp_path / "part-00001-of-00002.txt")
    assert (tmp_path / "part-00000-of-00002.txt").read_text() == temps[0]
    assert not (tmp_path / "part-00001-of-00002.txt").exists()
