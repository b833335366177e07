"""What would fail or waste money on Dataflow, found on the launcher before anything is submitted."""

from __future__ import annotations

from apache_beam.options.pipeline_options import (
    DebugOptions,
    GoogleCloudOptions,
    SetupOptions,
    WorkerOptions,
)

from models.hub_loader import is_remote
from pipeline.job.dataflow.describe import ONE_SDK_PROCESS, accelerator


def launch_warnings(options, model_handle: str, output: str, inputs) -> list[str]:
    out = []
    for what, path in [("model handle", model_handle), ("output", output),
                       *[("input", p) for p in inputs]]:
        if not (path and is_remote(path)):
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
