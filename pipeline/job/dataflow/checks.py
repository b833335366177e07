"""What would fail or waste money on Dataflow, found on the launcher before anything is submitted."""

from __future__ import annotations

from apache_beam.options.pipeline_options import (
    DebugOptions,
    GoogleCloudOptions,
    SetupOptions,
    WorkerOptions,
)

from beam_embed.models.hub_loader import is_remote
from beam_embed.pipeline.job.dataflow.describe import (
    ONE_SDK_PROCESS,
    accelerator,
    parse_accelerator,
)


def launch_warnings(options, model_handle: str, output: str, inputs,
                    job_accelerator: str = "auto") -> list[str]:
    """`job_accelerator`: the job's --accelerator, set against the workers' device."""
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
    tpu = bool(acc) and (parse_accelerator(acc) or {}).get("type", "").startswith("tpu")
    device = "TPU" if tpu else "GPU"
    if acc:
        if not options.view_as(WorkerOptions).sdk_container_image:
            image = "docker/Dockerfile.tpu" if tpu else "docker/Dockerfile"
            out.append(f"a {device} is requested but no --sdk_container_image: Beam's default "
                       f"image has no TensorFlow {device} build; build {image}")
        if not tpu and "install-nvidia-driver" not in acc:
            out.append(f"worker_accelerator {acc!r} lacks install-nvidia-driver")
        if ONE_SDK_PROCESS not in (options.view_as(DebugOptions).experiments or []):
            out.append(f"a {device} is requested without --experiments={ONE_SDK_PROCESS}: one "
                       f"SDK process per vCPU, each loading its own model copy onto the {device}"
                       + (" (a TPU has a single owner: all but one fail)" if tpu else ""))
    if tpu and job_accelerator != "tpu":
        out.append(f"a TPU is requested (worker_accelerator) but --accelerator is "
                   f"{job_accelerator}: the encoder would run on the workers' CPUs; add "
                   "--accelerator tpu")
    if job_accelerator == "tpu" and not tpu:
        out.append("--accelerator tpu without a TPU worker_accelerator service option: the "
                   "workers would find no TPU (configs/dataflow_tpu.yaml has one)")
    return out
