"""`beam-embed run ... --dry-run [--job-file PATH]`: the job as it would run, described (in the
file, else on stdout), not run.

The same `build_pipeline` as a real run, for the runner in `--runner` (Dataflow included),
offline: no credentials, no network, nothing submitted or uploaded. What a real launch does on
the launcher and a dry run does instead:

- a remote model (`gs://`, URL) is not read: its export layout (`encoder/`, `preprocessor/`) is
  assumed, `--pooling` and `--normalize` must be given, widths are left unknown (0); a local
  model is loaded once, as in a real run, which checks it and learns the widths;
- remote input patterns are not matched (local ones are, and their fields read and checked as a
  run's are: beam_embed.pipeline.job.input_fields); the output is not touched;
- Dataflow's job is built by `beam_embed.pipeline.job.dataflow.offline` from Beam's own pieces;
- the staged sdist is checked to hold every module the steps import
  (`beam_embed.pipeline.job.dataflow.shipping`).
"""

from __future__ import annotations

import dataclasses
import json
import os

from apache_beam.options.pipeline_options import DirectOptions, SetupOptions

from beam_embed.models.hub_loader import is_remote
from beam_embed.pipeline.job.build import (
    build_pipeline,
    output_schema,
    probe_widths,
    unprobed_widths,
)
from beam_embed.pipeline.job.calibration import vector_storage
from beam_embed.pipeline.job.dataflow import shipping
from beam_embed.pipeline.job.dataflow.checks import launch_warnings
from beam_embed.pipeline.job.dataflow.describe import describe
from beam_embed.pipeline.job.dataflow.dry_run_options import DryRunOptions
from beam_embed.pipeline.job.dataflow.offline import build_job, is_dataflow, require
from beam_embed.pipeline.job.input_fields import with_input_fields
from beam_embed.pipeline.job.job_stores import described
from beam_embed.pipeline.job.resolved import resolve
from beam_embed.pipeline.job.reuse import unread_previous
from beam_embed.pipeline.job.settings import RunSettings
from beam_embed.pipeline.job.sources import expand_inputs
from beam_embed.process.log import log

__all__ = ["dry_run"]


def use_remote_export(opts: RunSettings) -> tuple[RunSettings, str | None]:
    """For a remote `--model` export: the settings with --encoder/--preprocessor pointing at its
    SavedModels (the export layout), and its name; the settings as given and None for anything
    else."""
    if opts.encoder or not (opts.model and is_remote(opts.model)):
        return opts, None
    missing = [flag for flag, value in (("--pooling", opts.pooling or None),
                                        ("--normalize or --no-normalize", opts.normalize))
               if value is None]
    if missing:
        raise ValueError(f"a dry run does not read the remote model {opts.model!r} (it is "
                         f"offline); give {' and '.join(missing)} explicitly, as "
                         "configs/dataflow_*.yaml do")
    handle = opts.model.rstrip("/")
    opts = dataclasses.replace(opts, encoder=f"{handle}/encoder",
                               preprocessor=f"{handle}/preprocessor")
    return opts, handle.rsplit("/", 1)[-1]


def refuse_remote_recognition(opts) -> None:
    """A remote handle given alone would have to be read to recognize its kind."""
    if opts.encoder and not opts.preprocessor and is_remote(opts.encoder):
        raise ValueError(f"a dry run does not read the remote handle {opts.encoder!r} (it is "
                         "offline), so it cannot recognize its kind; use a preset that names "
                         "the kind (configs/models.yaml), or run without --dry-run")


def offline_inputs(patterns) -> tuple[list[tuple[str, int]], dict]:
    local = [p for p in patterns if not is_remote(p)]
    files = expand_inputs(local) if local else []
    remote = [p for p in patterns if is_remote(p)]
    return files + [(p, 0) for p in remote], {
        "patterns": list(patterns), "local_files_matched": len(files),
        "remote_patterns_not_matched": remote}


def model_section(run, widths, loaded: bool) -> dict:
    spec = run.encoder
    section = {"name": spec.name, "kind": spec.kind, "encoder": spec.encoder,
               "preprocessor": spec.preprocessor, "loaded": loaded,
               "poolings": list(spec.poolings), "normalize": spec.normalize,
               "max_seq_length": spec.max_seq_length, "precision": spec.precision,
               "accelerator": spec.accelerator,
               "widths": dict(widths) if loaded else None}
    shapes = spec.fixed_shapes()
    if shapes is not None:  # the XLA programs a worker compiles, at most one per shape
        section["fixed_shapes"] = [list(shape) for shape in shapes.shapes()]
    if not loaded:
        section["note"] = ("a remote handle is not read offline: widths unknown; a real launch "
                           "loads it once on the launcher to check it")
    return section


def _launcher_package_dirs() -> list[str]:
    from beam_embed import models, pipeline

    return [os.path.dirname(os.path.realpath(m.__file__)) for m in (pipeline, models)]


def dry_run(settings: RunSettings, options) -> int:
    """Builds the job for --runner, checks it serializes and ships, writes its description to
    --job-file, or to stdout without one."""
    job_file = options.view_as(DryRunOptions).job_file
    if job_file and is_remote(job_file):
        raise ValueError(f"--job-file {job_file!r} is not a local file; expected a local path "
                         "for the job description, or no --job-file to print it")
    settings, remote_name = use_remote_export(settings)
    refuse_remote_recognition(settings)
    run = resolve(settings, options)
    if remote_name:
        run = dataclasses.replace(run, encoder=dataclasses.replace(run.encoder,
                                                                   name=remote_name))
    dataflow = is_dataflow(options)
    notes = require(options) if dataflow else []
    spec, settings = run.encoder, run.settings
    loaded = not any(h and is_remote(h) for h in (spec.encoder, spec.preprocessor))
    # offline: an accelerator's code path runs on this CPU, its device neither needed nor asked
    widths = probe_widths(run, on_host=True) if loaded else unprobed_widths(run)
    files, inputs = offline_inputs(settings.input)
    run = dataclasses.replace(run, files=tuple(files), widths=widths)
    run = with_input_fields(run, [f for f in files if not is_remote(f[0])])  # local files only
    run = dataclasses.replace(run, stored=vector_storage(run, calibrate=False))
    if settings.reuse:  # described, not read: the run checks and reads it
        run = dataclasses.replace(run, previous=unread_previous(settings.reuse, widths))
        notes = [*notes, f"--reuse {settings.reuse}: the previous run is checked (model, "
                         "poolings, shards) and read when the job runs; the dry run reads "
                         "nothing of it"]
    workers = options.view_as(DirectOptions).direct_num_workers or 1
    proto, job, staged = build_job(options, lambda p: build_pipeline(p, run, workers))
    options = job.options if job is not None else options  # as the runner completed them
    checks = {"serialized": "every step pickled and read back (runner API round trip)"}
    warnings = notes + (launch_warnings(options, spec.encoder, run.output, settings.input,
                                        spec.accelerator) if dataflow else [])
    if dataflow and options.view_as(SetupOptions).setup_file:
        checks["worker_imports"] = shipping.check(proto, staged, _launcher_package_dirs())
    stores = {"stores": described(run, output_schema(run))} if settings.store else {}
    description = describe(options, proto, job, staged, model=model_section(run, widths, loaded),
                           inputs=inputs, output=run.output, **stores, checks=checks,
                           warnings=warnings, shards=shards_section(settings))
    text = json.dumps(description, indent=2, default=str)
    if job_file:
        os.makedirs(os.path.dirname(os.path.abspath(job_file)), exist_ok=True)
        with open(job_file, "w", encoding="utf-8") as f:
            f.write(text)
    else:  # the description is the dry run's output, as a dry run's is
        print(text, flush=True)
    for w in warnings:
        log(f"warning: {w}")
    w = description["worker"]
    log(f"dry run: {len(description['steps'])} steps for {description['runner']}"
        + (f", image {w['container_image']}, accelerator {w['accelerator']}" if dataflow else "")
        + f"; nothing was submitted -> {job_file or 'stdout'}")
    return 0


def shards_section(settings) -> dict:
    """How the job writes its shards, and how a failed or killed job is continued."""
    if settings.num_shards:
        return {"written": f"{settings.num_shards} per format, by Beam's file sink at the end "
                           "(nothing is committed before: --resume keeps nothing of a failed "
                           "job)"}
    return {"bound_mb": settings.shard_mb,
            "written": "rolled at the bound and committed as each closes, in the output's "
                       "staging folder",
            "resume": ("continuing the killed or failed job in --output: its committed shards "
                       "are checked and kept when the job runs" if settings.resume else
                       "if the job fails or is cancelled, submit the same command again with "
                       "--resume (a new job over the same --output): only the records no "
                       "committed shard holds are embedded")}
