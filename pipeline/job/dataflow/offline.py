"""Building a Dataflow job offline, from Beam's own pieces, with every network call kept out.

Beam 2.77's `--dry_run=True` stops before the job's environment (worker pool, container images,
staged packages) is built, and the normal submission path talks to Google services from the
launcher. Each of those calls is kept out here, and how:

- default-bucket creation and region lookup (PipelineOptions validation): `--temp_location`
  must be a valid `gs://` path and `--project`/`--region` given, checked first (`require`);
- soft-delete checks on the buckets (same validation): skipped by Beam when
  `TestOptions.dry_run` is set, which `build_job` sets;
- pip downloads for `--requirements_file` (the stager): `--requirements_cache=skip`;
- credentials, the Dataflow API client and GCS uploads (`DataflowApplicationClient`): Beam's
  client without its constructor's clients (beam_embed.process.private_apis.beam's
  offline_dataflow_client), uploads recorded instead of made, so its own
  `create_job_description` builds the environment proto.

What is not skipped: `DataflowRunner.run_pipeline` (overrides, the runner API round trip that
pickles and unpickles every step, environments, the setup-file sdist, the Job proto).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable

import apache_beam as beam
from apache_beam.options.pipeline_options import (
    GoogleCloudOptions,
    PipelineOptions,
    SetupOptions,
    StandardOptions,
    TestOptions,
)

from beam_embed.pipeline.common.runners.choice import runner_for
from beam_embed.process.library_noise import stderr_held
from beam_embed.process.log import is_verbose
from beam_embed.process.private_apis.beam import (
    SKIP_REQUIREMENTS_CACHE,
    invalid_gcs_path,
    is_remote_path,
    offline_dataflow_client,
    pickled_dofn,
    runner_api_context,
    unpickle,
)

DATAFLOW_RUNNERS = ("DataflowRunner", "TestDataflowRunner")


def _recorded(folder: str, file_name: str, stream_or_path) -> dict:
    """What would be uploaded: name, location, local path (None for a stream), size, sha256."""
    if isinstance(stream_or_path, str):
        local = stream_or_path
        with open(local, "rb") as f:
            data = f.read()
    else:
        local, data = None, stream_or_path.read()
    return {"name": file_name, "location": f"{folder.rstrip('/')}/{file_name}",
            "local_path": local, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def is_dataflow(options: PipelineOptions) -> bool:
    runner = options.view_as(StandardOptions).runner or ""
    name = runner if isinstance(runner, str) else type(runner).__name__
    return name.split(".")[-1] in DATAFLOW_RUNNERS


def require(options: PipelineOptions) -> list[str]:
    """Fails (ValueError) on what would make Beam go online; returns notes on what was changed."""
    gcp = options.view_as(GoogleCloudOptions)
    missing = [f"--{name}" for name in ("project", "region", "temp_location")
               if not getattr(gcp, name)]
    if missing:
        raise ValueError(f"a Dataflow dry run needs {', '.join(missing)} (offline, Beam cannot "
                         "look up the default region or create a default bucket)")
    for name in ("temp_location", "staging_location"):
        if getattr(gcp, name) is not None and invalid_gcs_path(options, name):
            raise ValueError(f"--{name} {getattr(gcp, name)!r} is not a valid gs://bucket/path")
    if gcp.update:
        raise ValueError("--update looks up the running job; a dry run cannot")
    setup = options.view_as(SetupOptions)
    if setup.prebuild_sdk_container_engine:
        raise ValueError(f"--prebuild_sdk_container_engine {setup.prebuild_sdk_container_engine!r}"
                         " builds and pushes an image; build docker/Dockerfile instead")
    if setup.sdk_location and is_remote_path(setup.sdk_location):
        raise ValueError(f"--sdk_location {setup.sdk_location!r} would be downloaded; a dry run "
                         "accepts 'default', 'container' or a local file")
    notes = []
    if setup.requirements_file and setup.requirements_cache != SKIP_REQUIREMENTS_CACHE:
        setup.requirements_cache = SKIP_REQUIREMENTS_CACHE
        notes.append("--requirements_cache=skip: the requirements file is staged, its packages "
                     "are not downloaded into the staging cache")
    return notes


def build_job(options: PipelineOptions, build: Callable[[beam.Pipeline], None]):
    """(pipeline proto, Dataflow Job with its environment or None, staged files)."""
    if is_dataflow(options):
        options.view_as(TestOptions).dry_run = True  # Beam: skip soft-delete checks, no submit
    p = beam.Pipeline(runner=runner_for(options), options=options)
    try:
        build(p)  # Beam pickles each DoFn once as it is applied
    except RuntimeError as e:
        if "pickle" not in str(e).lower():
            raise
        raise NotSerializable(f"a step cannot be serialized for the workers: "
                              f"{str(e).splitlines()[0][:400]}") from e
    try:
        if not is_dataflow(options):
            proto = p.to_runner_api()
            beam.Pipeline.from_runner_api(proto, p.runner, options)  # unpickles every step
            return proto, None, []
        with _staging_quiet():  # DataflowRunner.run_pipeline, stopping at the Job (dry_run)
            job = p.run().job
    except Exception as e:
        step = unserializable_step(p)
        if step is None:
            raise
        raise NotSerializable(
            f"step {step[0]!r} cannot be serialized for the workers ({type(step[1]).__name__}: "
            f"{str(step[1]).strip()[:300]}); load models and open clients in DoFn.setup() or "
            "ModelHandler.load_model, never on the launcher") from e
    staged: list[dict] = []
    client = offline_dataflow_client(options, job.root_staging_location,
                                     lambda *upload: staged.append(_recorded(*upload)))
    with _staging_quiet():
        client.create_job_description(job)  # Beam's own: image overrides, staging, Environment
    return job.proto_pipeline, job, staged


def _staging_quiet():
    """Beam builds the setup file's sdist in subprocesses that write to stderr: its `python -m
    build` try, which fails where the `build` package is missing, then setuptools' manifest
    lines. Library noise unless the build fails (then it is shown), or with -v."""
    return contextlib.nullcontext() if is_verbose() else stderr_held()


class NotSerializable(ValueError):
    """A step that cannot be pickled (or unpickled) as Dataflow ships it."""


def unserializable_step(p: beam.Pipeline):
    """(label, error) of the first step whose runner API form cannot be made or read back."""
    context = runner_api_context()
    found = []

    class Probe(beam.pipeline.PipelineVisitor):
        def visit_transform(self, node):
            if found or node.transform is None:
                return
            try:
                payload = pickled_dofn(node.transform.to_runner_api(context))
                if payload is not None:
                    unpickle(payload)
            except Exception as e:  # noqa: BLE001 - any failure is the answer
                found.append((node.full_label, e))

    p.visit(Probe())
    return found[0] if found else None

