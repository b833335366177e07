"""Beam's private APIs the project relies on outside its Dask runner (options, batching, sinks,
TFRecord framing, pickling, staging, credentials, the offline Dataflow client, bundle outputs).
Beam's modules are imported by the functions that hand their pieces out.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable


def beam_argument_parser() -> type[argparse.ArgumentParser]:
    """The parser class Beam's PipelineOptions parse with: its options' `_add_argparse_args`
    call its `add_value_provider_argument`, which a plain ArgumentParser lacks."""
    from apache_beam.options.pipeline_options import _BeamArgumentParser

    return _BeamArgumentParser


def add_beam_options(options_class, parser: argparse.ArgumentParser) -> None:
    """Adds a PipelineOptions subclass's flags to `parser`: `_add_argparse_args` is the hook
    Beam's documentation tells options classes to override; Beam calls it the same way."""
    options_class._add_argparse_args(parser)


def sort_and_batch_dofn() -> type:
    """The DoFn behind `beam.SortAndBatchElements` for the global window:
    `(min_batch_size, max_batch_size, max_batch_weight, element_size_fn)`, buffering each
    element (batch_buffer) and, at `finish_bundle`, sorting the buffer by size and emitting
    its batches (WindowedValues), the buffer dropped until the next `start_bundle`. The job's windowed variant
    (pipeline/job/batching.py) subclasses it to sort windows of a bundle; Beam exposes only the
    whole-bundle transform."""
    from apache_beam.transforms.util import _SortAndBatchElementsDoFn

    return _SortAndBatchElementsDoFn


def batch_buffer(dofn) -> list:
    """The elements a sort_and_batch_dofn() instance holds for its next `finish_bundle` (its
    `_buffer`, appended to by `process`): the windowed variant adds to it, and cuts it early."""
    return dofn._buffer


def set_batch_buffer(dofn, elements: list) -> None:
    """Makes `elements` what a sort_and_batch_dofn() instance holds (see batch_buffer)."""
    dofn._buffer = elements


@functools.cache
def masked_crc32c():
    """TFRecord's masked CRC32C of a bytes value (Beam's, with its fast crc32c when installed):
    the framing of a TFRecord, which Beam's TFRecord sink writes a record at a time only."""
    from apache_beam.io.tfrecordio import _TFRecordUtil

    return _TFRecordUtil._masked_crc32c


class FinalizeHooks:
    """Mixed into a Beam FileBasedSink (before it): what its Write step's finalize renames, under
    public names. Beam's finalize asks the sink's private `_check_state_for_finalize_write`
    which temporary files go to which shard names, and names a shard with its private
    `_get_final_name`; no public API lets a sink say how its files are found."""

    def final_name(self, shard: int, shards: int, window=None) -> str:
        """The name of shard `shard` of `shards` (what finalize renames it to)."""
        return self._get_final_name(shard, shards, window)

    def files_to_rename(self, writer_results, num_shards: int, window=None):
        """(temporary files to rename, their shard names, files to delete, how many shards an
        earlier attempt renamed) for the temporary files `writer_results`: Beam's answer unless
        overridden."""
        return super()._check_state_for_finalize_write(writer_results, num_shards, window)

    def _check_state_for_finalize_write(self, writer_results, num_shards, window=None):
        return self.files_to_rename(writer_results, num_shards, window)


def set_state_sampling_period(period_ms: int) -> bool:
    """Makes the state samplers this process creates from now on sample every `period_ms`;
    False (nothing changed) when Beam's StateSampler no longer takes the period as its one
    default argument, Beam's DEFAULT_SAMPLING_PERIOD_MS. Beam has no option for the period."""
    from apache_beam.runners.worker import statesampler

    init = statesampler.StateSampler.__init__
    if init.__defaults__ == (period_ms,):
        return True
    if init.__defaults__ != (statesampler.DEFAULT_SAMPLING_PERIOD_MS,):
        return False
    init.__defaults__ = (period_ms,)
    return True


def prefix_worker_command_lines(prefix: Callable[[], str]) -> bool:
    """Makes the worker processes a local multi-process run starts (Beam's
    SubprocessSdkWorker, through `sh -c`) run `prefix()` (asked as each starts) before their
    command line; False (nothing changed) when the worker no longer keeps its command line
    where this expects. Beam offers no hook on how it starts them."""
    from apache_beam.runners.portability import local_job_service

    worker = local_job_service.SubprocessSdkWorker
    if getattr(worker.run, "command_line_prefix", None) is prefix:
        return True
    if "_worker_command_line" not in worker.__init__.__code__.co_names:  # where run reads it
        return False
    start = worker.run.__wrapped__ if hasattr(worker.run, "command_line_prefix") \
        else worker.run  # one prefix: another one's wrapper is replaced, not wrapped

    @functools.wraps(start)
    def run(self):
        line, added = self._worker_command_line, prefix()
        if isinstance(line, str) and not line.startswith(added):
            self._worker_command_line = added + line
        return start(self)

    run.command_line_prefix = prefix
    worker.run = run
    return True


@functools.cache
def _offline_dataflow_client_class() -> type:
    from apache_beam.options.pipeline_options import GoogleCloudOptions, StandardOptions
    from apache_beam.runners.dataflow.internal import apiclient

    class OfflineDataflowClient(apiclient.DataflowApplicationClient):
        def __init__(self, options, root_staging_location: str, stage: Callable):
            # Not super().__init__: it fetches credentials and builds the API and storage
            # clients. What create_job_description reads is set as that constructor sets it.
            self.standard_options = options.view_as(StandardOptions)
            self.google_cloud_options = options.view_as(GoogleCloudOptions)
            self._enable_caching = False  # the cache lookup is a GCS exists() call
            self._root_staging_location = root_staging_location
            self.environment_version = apiclient._FNAPI_ENVIRONMENT_MAJOR_VERSION
            self._sdk_image_overrides = self._get_sdk_image_overrides(options)
            self._stage = stage

        def stage_file_with_retry(self, gcs_or_local_path, file_name, stream_or_path,
                                  mime_type="application/octet-stream", total_size=None):
            self._stage(gcs_or_local_path, file_name, stream_or_path)

        def stage_file(self, *args, **kwargs):
            raise AssertionError("the offline Dataflow client never uploads")

    return OfflineDataflowClient


def offline_dataflow_client(options, root_staging_location: str,
                            stage: Callable[[str, str, object], None]):
    """Beam's Dataflow client (`DataflowApplicationClient`) without the network, for its own
    `create_job_description(job)`, which builds a Job's environment (worker pool, images,
    staged files): made without the constructor (credentials, API and storage clients), with
    the private attributes the constructor sets and the description reads, and each file it
    would upload handed to `stage(folder, file_name, stream_or_path)` instead (a local path or a
    readable stream). Beam has no offline description."""
    return _offline_dataflow_client_class()(options, root_staging_location, stage)


def pickled(value) -> bytes:
    """`value` pickled by Beam's own pickler, which Beam ships DoFns with and checks a ParDo
    against when it is applied (apache_beam.internal.pickler: Beam keeps it internal)."""
    from apache_beam.internal import pickler

    return pickler.dumps(value)


def unpickle(payload: bytes):
    """An object Beam pickled (a step's DoFn, say), read back with Beam's own unpickler, as a
    worker reads it (see pickled)."""
    from apache_beam.internal import pickler

    return pickler.loads(payload)


def runner_api_context():
    """A context in which one transform at a time takes its runner API form
    (`transform.to_runner_api(context)`), with stand-in coders: Beam's PipelineContext
    (apache_beam.runners.pipeline_context, internal), which Beam makes only for a whole
    pipeline's `to_runner_api`."""
    from apache_beam.runners import pipeline_context

    return pipeline_context.PipelineContext(use_fake_coders=True)


def pickled_dofn(spec) -> bytes | None:
    """The DoFn of a transform's runner API spec that is a ParDo of a Python DoFn, as Beam's
    pickler wrote it with its arguments (unpickle reads `(fn, args, kwargs, None, None)`); None
    for any other spec (or none)."""
    from apache_beam.portability import common_urns, python_urns
    from apache_beam.portability.api import beam_runner_api_pb2

    if spec is None or spec.urn != common_urns.primitives.PAR_DO.urn:
        return None
    do_fn = beam_runner_api_pb2.ParDoPayload.FromString(spec.payload).do_fn
    return do_fn.payload if do_fn.urn == python_urns.PICKLED_DOFN_INFO else None


def bundle_output(value):
    """`value` as a DoFn's `finish_bundle` emits it, in the global window at its end: Beam takes
    only WindowedValues from finish_bundle, a class it keeps internal
    (apache_beam.utils.windowed_value)."""
    from apache_beam.transforms.window import GlobalWindow
    from apache_beam.utils.windowed_value import WindowedValue

    return WindowedValue(value, GlobalWindow().max_timestamp(), [GlobalWindow()])


def in_process_runner():
    """Beam's in-process batch runner (FnApiRunner, which honours --direct_num_workers and
    --direct_running_mode): what Beam 2.77's DirectRunner falls back to after trying to download
    its Prism binary. No public module exports it."""
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    return FnApiRunner()


def invalid_gcs_path(options, flag: str) -> bool:
    """Whether Beam's own check of a GoogleCloudOptions location (`flag`: "temp_location",
    "staging_location") finds it no valid gs://bucket/path; asks no server (Beam's validator,
    apache_beam.options.pipeline_options_validator, which the runners call as a whole, bucket
    lookups included)."""
    from apache_beam.options.pipeline_options import GoogleCloudOptions
    from apache_beam.options.pipeline_options_validator import PipelineOptionsValidator

    validator = PipelineOptionsValidator(options, None)
    return bool(validator.validate_gcs_path(options.view_as(GoogleCloudOptions), flag))


# The stager's --requirements_cache value that stages the requirements file without downloading
# its packages (apache_beam.runners.portability.stager.SKIP_REQUIREMENTS_CACHE).
SKIP_REQUIREMENTS_CACHE = "skip"


def is_remote_path(path: str) -> bool:
    """Whether Beam's stager would download `path` rather than read it locally."""
    from apache_beam.runners.portability.stager import Stager

    return Stager._is_remote_path(path)


BEAM_AUTH_MODULE = "apache_beam.internal.gcp.auth"  # where Beam looks for gs:// credentials


def replace_beam_credentials_look(module, look: Callable) -> bool:
    """Makes Beam's auth `module` (BEAM_AUTH_MODULE, loaded) find credentials with
    `look(pipeline_options)` (None: anonymous), in place of its own look
    (`_Credentials._get_service_credentials`, which the public get_service_credentials calls once
    a process, under its lock); False (Beam's own kept) without google-auth or when Beam no
    longer looks the way this expects. Beam has no option for how it looks."""
    credentials = getattr(module, "_Credentials", None)
    if not getattr(module, "_GOOGLE_AUTH_AVAILABLE", False) or \
            not hasattr(credentials, "_get_service_credentials") or \
            not hasattr(credentials, "_add_impersonation_credentials"):
        return False
    credentials._get_service_credentials = staticmethod(look)
    return True


def beam_credentials(credentials, pipeline_options):
    """google-auth `credentials` as Beam's own look returns them: impersonating
    --impersonate_service_account when given, in the adapter Beam's clients take."""
    from apache_beam.internal.gcp import auth

    credentials = auth._Credentials._add_impersonation_credentials(credentials, pipeline_options)
    return auth._ApitoolsCredentialsAdapter(credentials)
