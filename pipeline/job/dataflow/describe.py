"""The dry run's job description: a JSON-ready dict a person can read before paying for a run.

Built from the runner API proto (every step) and, for Dataflow, the Job proto that Beam's own
`create_job_description` filled (worker pool, container images, packages, options).
"""

from __future__ import annotations

import json

import apache_beam as beam
from apache_beam.options.pipeline_options import (
    DebugOptions,
    GoogleCloudOptions,
    PipelineOptions,
    SetupOptions,
    StandardOptions,
    WorkerOptions,
)

DESCRIPTION_VERSION = 1
ACCELERATOR_OPTION = "worker_accelerator"
ONE_SDK_PROCESS = "no_use_multiple_sdk_containers"


def steps(proto) -> list[dict]:
    """Every transform, depth first from the roots, in the order it was applied."""
    transforms = proto.components.transforms
    out = []

    def walk(tid: str, depth: int) -> None:
        t = transforms[tid]
        if not t.spec.urn and t.unique_name in ("", tid):  # the pipeline's own root
            for sub in t.subtransforms:
                walk(sub, depth)
            return
        out.append({"name": t.unique_name, "urn": t.spec.urn or "composite", "depth": depth,
                    **({"environment": t.environment_id} if t.environment_id else {})})
        for sub in t.subtransforms:
            walk(sub, depth + 1)

    for root in proto.root_transform_ids:
        walk(root, 0)
    return out


def parse_accelerator(value: str | None) -> dict | None:
    """'type:nvidia-l4;count:1;install-nvidia-driver' -> {'type': ..., 'count': ..., ...: True}."""
    if not value:
        return None
    parts = (p.split(":", 1) for p in value.split(";") if p.strip())
    return {p[0].strip(): (p[1].strip() if len(p) > 1 else True) for p in parts}


def accelerator(service_options: list[str]) -> str | None:
    for option in service_options:
        if option.startswith(ACCELERATOR_OPTION + "="):
            return option.split("=", 1)[1]
    return None


def worker(options: PipelineOptions, job) -> dict:
    """The worker environment: machines, image, accelerator, process model, autoscaling."""
    gcp, workers = options.view_as(GoogleCloudOptions), options.view_as(WorkerOptions)
    experiments = options.view_as(DebugOptions).experiments or []
    service = list(gcp.dataflow_service_options or [])
    env = json.loads(job.json()).get("environment", {}) if job is not None else {}
    pool = (env.get("workerPools") or [{}])[0]
    images = [i["containerImage"] for i in pool.get("sdkHarnessContainerImages", [])]
    return {
        "machine_type": workers.machine_type,
        "accelerator": accelerator(service),
        "accelerator_parsed": parse_accelerator(accelerator(service)),
        "container_image": pool.get("workerHarnessContainerImage") or workers.sdk_container_image,
        "sdk_harness_images": images,
        "sdk_processes": ("one per worker VM (threads share one model copy)"
                          if ONE_SDK_PROCESS in experiments
                          else "one per vCPU (a model copy each)"),
        "harness_threads": options.view_as(DebugOptions).number_of_worker_harness_threads,
        "num_workers": workers.num_workers,
        "max_num_workers": workers.max_num_workers,
        "autoscaling_algorithm": workers.autoscaling_algorithm,
        "disk_size_gb": workers.disk_size_gb,
        "packages": pool.get("packages", []),
    }


def describe(options: PipelineOptions, proto, job, staged: list[dict], **extra) -> dict:
    """extra: job-specific sections (model, inputs, output, checks, warnings)."""
    gcp, setup = options.view_as(GoogleCloudOptions), options.view_as(SetupOptions)
    return {
        "description_version": DESCRIPTION_VERSION,
        "submitted": False,
        "runner": str(options.view_as(StandardOptions).runner or "DirectRunner"),
        "beam_version": beam.__version__,
        "job_name": gcp.job_name,
        "project": gcp.project,
        "region": gcp.region,
        "temp_location": gcp.temp_location,
        "staging_location": gcp.staging_location,
        "steps": steps(proto),
        "worker": worker(options, job),
        "setup_file": setup.setup_file,
        "requirements_file": setup.requirements_file,
        "sdk_location": setup.sdk_location,
        "staged": staged,
        "experiments": list(options.view_as(DebugOptions).experiments or []),
        "service_options": list(gcp.dataflow_service_options or []),
        **extra,
        "dataflow_job": json.loads(job.json()) if job is not None else None,
    }
