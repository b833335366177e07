"""Each of Beam's private APIs in beam_embed/process/private_apis/beam.py still there,
with the signature and the behaviour relied on: an upgrade that changes one fails here, by
name."""

from __future__ import annotations

import inspect

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms.window import GlobalWindow

from beam_embed.process.private_apis import beam as apis
from beam_embed.process.private_apis.stdlib import option_strings


def _params(fn) -> list[str]:
    return list(inspect.signature(fn).parameters)


def test_beams_argument_parser_takes_value_provider_arguments():
    from apache_beam.options.pipeline_options import StandardOptions

    parser = apis.beam_argument_parser()(allow_abbrev=False)
    assert hasattr(parser, "add_value_provider_argument")
    apis.add_beam_options(StandardOptions, parser)
    assert "--runner" in option_strings(parser)


def test_sort_and_batch_dofn_sorts_its_buffer_into_batches_at_bundle_end():
    cls = apis.sort_and_batch_dofn()
    assert issubclass(cls, beam.DoFn)
    assert _params(cls.__init__) == ["self", "min_batch_size", "max_batch_size",
                                     "max_batch_weight", "element_size_fn"]
    fn = cls(1, 2, 100, len)
    fn.start_bundle()
    for element in ("ccc", "a", "bb", "dddd"):
        fn.process(element)
    assert apis.batch_buffer(fn) == ["ccc", "a", "bb", "dddd"]
    batches = [wv.value for wv in fn.finish_bundle()]
    assert batches == [["a", "bb"], ["ccc", "dddd"]]
    apis.set_batch_buffer(fn, ["eee"])  # what the job's subclass carries over
    fn.process("f")
    assert [wv.value for wv in fn.finish_bundle()] == [["f", "eee"]]


def test_masked_crc32c_is_tfrecords():
    crc = 0xE3069283  # CRC32C of b"123456789", the algorithm's check value
    masked = (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    assert apis.masked_crc32c()(b"123456789") == masked


def test_state_sampling_period_is_the_samplers_one_default(monkeypatch):
    from apache_beam.runners.worker import statesampler

    init = statesampler.StateSampler.__init__
    assert init.__defaults__ == (statesampler.DEFAULT_SAMPLING_PERIOD_MS,) or \
        init.__defaults__ == (20,)  # set already by a run in this process
    assert _params(init)[-1] == "sampling_period_ms"
    monkeypatch.setattr(init, "__defaults__", (statesampler.DEFAULT_SAMPLING_PERIOD_MS,))
    assert apis.set_state_sampling_period(7)
    assert init.__defaults__ == (7,)
    monkeypatch.setattr(init, "__defaults__", (150,))  # not Beam's default: left alone
    assert not apis.set_state_sampling_period(7) and init.__defaults__ == (150,)


def test_worker_command_lines_are_where_the_prefix_goes(monkeypatch):
    from apache_beam.runners.portability import local_job_service

    worker = local_job_service.SubprocessSdkWorker
    monkeypatch.setattr(worker, "run", worker.run)  # restored after the test
    assert "_worker_command_line" in worker.__init__.__code__.co_names
    assert "_worker_command_line" in inspect.getsource(inspect.unwrap(worker.run))
    seen = []
    monkeypatch.setattr(worker, "run", lambda self: seen.append(self._worker_command_line))
    assert apis.prefix_worker_command_lines(lambda: "echo; ")
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
    client = apis.offline_dataflow_client(options, "gs://a-bucket/staging",
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
    assert apis.unpickle(pickler.dumps(fn)).process(1) == [2]


@pytest.mark.parametrize("path, remote", [("gs://b/sdk.tar.gz", True), ("/tmp/sdk.tar.gz", False),
                                          ("default", False)])
def test_the_stagers_remote_paths(path, remote):
    assert apis.is_remote_path(path) is remote


# Beam's gs:// credentials look


def test_beams_credentials_look_is_replaced_where_its_lock_calls_it(monkeypatch):
    from apache_beam.internal.gcp import auth

    assert apis.BEAM_AUTH_MODULE == auth.__name__
    credentials = auth._Credentials
    assert "cls._get_service_credentials(pipeline_options)" in inspect.getsource(
        credentials.get_service_credentials)
    for name in ("_get_service_credentials", "_credentials", "_credentials_init"):
        monkeypatch.setattr(credentials, name, getattr(credentials, name))  # restored after
    monkeypatch.setattr(credentials, "_credentials_init", False)
    asked = []
    assert apis.replace_beam_credentials_look(
        auth, lambda options: asked.append(options) or "found")
    options = PipelineOptions([])
    assert auth.get_service_credentials(options) == "found"
    assert auth.get_service_credentials(options) == "found" and asked == [options]  # once


def test_beams_credentials_look_is_kept_where_beam_changed():
    import types

    changed = types.SimpleNamespace(_GOOGLE_AUTH_AVAILABLE=True,
                                    _Credentials=type("C", (), {"_get_service_credentials": 1}))
    assert not apis.replace_beam_credentials_look(changed, print)
    assert changed._Credentials._get_service_credentials == 1


def test_beams_credentials_come_in_its_adapter_impersonating_when_asked():
    from apache_beam.internal.gcp import auth
    from google.auth import credentials as ga_credentials
    from google.auth import impersonated_credentials

    plain = ga_credentials.AnonymousCredentials()
    adapted = apis.beam_credentials(plain, PipelineOptions([]))
    assert isinstance(adapted, auth._ApitoolsCredentialsAdapter)
    assert adapted.get_google_auth_credentials() is plain
    adapted = apis.beam_credentials(plain, PipelineOptions(
        ["--impersonate_service_account", "a@p.iam.gserviceaccount.com"]))
    inner = adapted.get_google_auth_credentials()
    assert isinstance(inner, impersonated_credentials.Credentials)
    assert inner.service_account_email == "a@p.iam.gserviceaccount.com"


def test_beams_finalize_renames_what_the_finalize_hooks_say(tmp_path):
    from apache_beam.io.filebasedsink import FileBasedSink

    asked = []

    class Sink(apis.FinalizeHooks, FileBasedSink):
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


def test_the_skip_requirements_cache_value_is_the_stagers():
    from apache_beam.runners.portability import stager

    assert apis.SKIP_REQUIREMENTS_CACHE == stager.SKIP_REQUIREMENTS_CACHE


@pytest.mark.parametrize("path, invalid", [("gs://a-bucket/tmp", False), ("gs://a-bucket", True),
                                           ("/tmp/local", True), ("gs://A_B/tmp", True)])
def test_beams_gcs_path_check(path, invalid):
    options = PipelineOptions([f"--temp_location={path}"])
    assert apis.invalid_gcs_path(options, "temp_location") is invalid


def test_a_pardos_pickled_dofn_is_read_from_its_runner_api_spec():
    p = beam.Pipeline()
    _ = p | beam.Create([1]) | "Double" >> beam.Map(lambda x: 2 * x)
    context, specs = apis.runner_api_context(), {}

    class Specs(beam.pipeline.PipelineVisitor):
        def visit_transform(self, node):
            specs[node.full_label] = node.transform.to_runner_api(context)

    p.visit(Specs())
    payloads = {label: apis.pickled_dofn(spec) for label, spec in specs.items()}
    (double,) = [label for label in payloads if label.startswith("Double")]
    fn, args, kwargs, _, _ = apis.unpickle(payloads[double])  # the DoFn and its arguments
    assert (fn.process(21), list(args), kwargs) == ([42], [], {})
    assert payloads["Create/Impulse"] is None  # a primitive, not a ParDo
    assert apis.pickled_dofn(None) is None


class _EmitsAtBundleEnd(beam.DoFn):
    def process(self, element):
        return []

    def finish_bundle(self):
        yield apis.bundle_output("end")


def test_a_bundle_output_is_what_finish_bundle_emits_in_the_global_window():
    value = apis.bundle_output("x")
    assert (value.value, value.timestamp, list(value.windows)) == (
        "x", GlobalWindow().max_timestamp(), [GlobalWindow()])
    from apache_beam.testing.util import assert_that, equal_to

    with beam.Pipeline(runner=apis.in_process_runner()) as p:  # one bundle: one output
        assert_that(p | beam.Create([1, 2]) | beam.ParDo(_EmitsAtBundleEnd()), equal_to(["end"]))


def test_the_in_process_runner_is_beams_portable_runner():
    from apache_beam.runners import PipelineRunner

    runner = apis.in_process_runner()
    assert isinstance(runner, PipelineRunner) and type(runner).__name__ == "FnApiRunner"
