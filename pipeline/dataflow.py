"""`beam-embed run ... --dry-run --job-file PATH`: the job as it would run, described, not run.

The same `build_pipeline` as a real run, for the runner in `--runner` (Dataflow included),
offline: no credentials, no network, nothing submitted or uploaded. What a real launch does on
the launcher and a dry run does instead:

- a remote model (`gs://`, URL) is not read: its export layout (`encoder/`, `preprocessor/`) is
  assumed, `--pooling` and `--normalize` must be given, widths are left unknown (0); a local
  model is loaded once, as in a real run, which checks it and learns the widths;
- remote input patterns are not matched (local ones are); the output is not touched;
- Dataflow's job is built by `pipeline.dataflow_offline` from Beam's own pieces;
- the staged sdist is checked to hold every module the steps import (`dataflow_shipping`).
"""

from __future__ import annotations

import dataclasses
import json
import os

from apache_beam.options.pipeline_options import (DebugOptions, DirectOptions,
                                                  GoogleCloudOptions, SetupOptions,
                                                  WorkerOptions)

from pipeline import dataflow_shipping
from pipeline.dataflow_describe import ONE_SDK_PROCESS, accelerator, describe
from pipeline.dataflow_offline import build_job, is_dataflow, require
from pipeline.dataflow_options import DryRunOptions
from pipeline.options import EmbedOptions, parse
from pipeline.run import build_pipeline, configure, probe_widths
from pipeline.sources import expand_inputs, log

__all__ = ["dry_run"]


def _remote(handle: str | None) -> bool:
    return bool(handle) and "://" in handle


def offline_model_argv(argv: list[str], opts) -> tuple[list[str], str | None]:
    """For a remote `--model` export: argv naming its encoder/preprocessor, and its name."""
    if opts.encoder or not _remote(opts.model):
        return argv, None
    missing = [flag for flag, value in (("--pooling", opts.pooling),
                                        ("--normalize or --no-normalize", opts.normalize))
               if value is None]
    if missing:
        raise ValueError(f"a dry run does not read the remote model {opts.model!r} (it is "
                         f"offline); give {' and '.join(missing)} explicitly, as "
                         "configs/dataflow_*.yaml do")
    handle = opts.model.rstrip("/")
    return (argv + ["--encoder", f"{handle}/encoder", "--preprocessor", f"{handle}/preprocessor"],
            handle.rsplit("/", 1)[-1])


def unprobed_widths(cfg) -> tuple[tuple[str, int], ...]:
    from models.encoders import encoder_class
    from models.pooling import parse_poolings

    poolings = parse_poolings(list(cfg.encoder.poolings),
                              *encoder_class(cfg.model.kind).pooling_registry())
    return tuple((p.column, 0) for p in poolings)


def offline_inputs(patterns) -> tuple[list[tuple[str, int]], dict]:
    local = [p for p in patterns if not _remote(p)]
    files = expand_inputs(local) if local else []
    remote = [p for p in patterns if _remote(p)]
    return files + [(p, 0) for p in remote], {
        "patterns": list(patterns), "local_files_matched": len(files),
        "remote_patterns_not_matched": remote}


def dataflow_warnings(options, cfg) -> list[str]:
    """What would fail or waste money on Dataflow, found before submitting."""
    out = []
    for what, path in [("model handle", cfg.model.encoder), ("output", cfg.output),
                       *[("input", p) for p in cfg.inputs]]:
        if not _remote(path):
            out.append(f"{what} {path!r} is a local path: Dataflow workers cannot read it; "
                       "use gs:// (upload an export with `gcloud storage cp -r`)")
    if not options.view_as(SetupOptions).setup_file:
        out.append("no --setup_file: workers get the pipeline/models packages only if the "
                   "container image holds them")
    acc = accelerator(list(options.view_as(GoogleCloudOptions).dataflow_service_options or []))
    if acc:
        if not options.view_as(WorkerOptions).sdk_container_image:
            out.append("a GPU is requested but no --sdk_container_image: Beam's default image "
                       "has no TensorFlow GPU build; build docker/Dockerfile")
        if "install-nvidia-driver" not in acc:
            out.append(f"worker_accelerator {acc!r} lacks install-nvidia-driver")
        if ONE_SDK_PROCESS not in (options.view_as(DebugOptions).experiments or []):
            out.append(f"a GPU is requested without --experiments={ONE_SDK_PROCESS}: one SDK "
                       "process per vCPU, each loading its own model copy onto the GPU")
    return out


def model_section(cfg, widths, loaded: bool) -> dict:
    section = {"name": cfg.model.name, "kind": cfg.model.kind, "encoder": cfg.model.encoder,
               "preprocessor": cfg.model.preprocessor, "loaded": loaded,
               "poolings": list(cfg.encoder.poolings), "normalize": cfg.encoder.normalize,
               "max_seq_length": cfg.encoder.max_seq_length,
               "widths": dict(widths) if loaded else None}
    if not loaded:
        section["note"] = ("a remote handle is not read offline: widths unknown; a real launch "
                           "loads it once on the launcher to check it")
    return section


def _launcher_package_dirs() -> list[str]:
    import models
    import pipeline

    return [os.path.dirname(os.path.abspath(m.__file__)) for m in (pipeline, models)]


def dry_run(argv: list[str]) -> int:
    """Builds the job for --runner, checks it serializes and ships, writes --job-file."""
    options = parse(argv)
    job_file = options.view_as(DryRunOptions).job_file
    if not job_file or _remote(job_file):
        raise ValueError(f"--dry-run needs --job-file PATH, a local file for the job "
                         f"description (got {job_file!r})")
    argv, remote_name = offline_model_argv(argv, options.view_as(EmbedOptions))
    options, cfg = configure(argv)
    if remote_name:
        cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, name=remote_name))
    dataflow = is_dataflow(options)
    notes = require(options) if dataflow else []
    loaded = not any(_remote(h) for h in (cfg.model.encoder, cfg.model.preprocessor))
    widths = probe_widths(cfg) if loaded else unprobed_widths(cfg)
    files, inputs = offline_inputs(cfg.inputs)
    workers = options.view_as(DirectOptions).direct_num_workers or 1
    proto, job, staged = build_job(
        options, lambda p: build_pipeline(p, cfg, files, widths, workers))
    options = job.options if job is not None else options  # as the runner completed them
    checks = {"serialized": "every step pickled and read back (runner API round trip)"}
    warnings = notes + (dataflow_warnings(options, cfg) if dataflow else [])
    if dataflow and options.view_as(SetupOptions).setup_file:
        checks["worker_imports"] = dataflow_shipping.check(proto, staged,
                                                           _launcher_package_dirs())
    description = describe(options, proto, job, staged, model=model_section(cfg, widths, loaded),
                           inputs=inputs, output=cfg.output, checks=checks, warnings=warnings)
    os.makedirs(os.path.dirname(os.path.abspath(job_file)), exist_ok=True)
    with open(job_file, "w", encoding="utf-8") as f:
        json.dump(description, f, indent=2, default=str)
    for w in warnings:
        log(f"warning: {w}")
    w = description["worker"]
    log(f"dry run: {len(description['steps'])} steps for {description['runner']}"
        + (f", image {w['container_image']}, accelerator {w['accelerator']}" if dataflow else "")
        + f"; nothing was submitted -> {job_file}")
    return 0
