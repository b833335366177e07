"""JobConfig: the parsed, validated job. Everything here is checked before any data is read."""

from __future__ import annotations

import dataclasses
import os

from beam_embed.models.spec import EncoderSpec
from beam_embed.pipeline.common.quiet import import_tensorflow
from beam_embed.pipeline.common.sample_corpus import write_sample_corpus
from beam_embed.pipeline.job.flag_values import check_plain_flags, csv_values, spec_of
from beam_embed.pipeline.job.flags import JobFlags
from beam_embed.pipeline.job.formats import Fields

SAMPLE_CORPUS = os.path.join("output", "sample", "corpus.jsonl")


@dataclasses.dataclass(frozen=True)
class JobConfig:
    inputs: tuple[str, ...]
    input_format: str | None
    text_field: str
    id_field: str | None
    metadata_fields: tuple[str, ...] | None  # None: decided from the input (input_fields.py)
    split: str
    clean: bool
    max_text_bytes: int
    encoder: EncoderSpec
    output: str
    formats: tuple[str, ...]
    num_shards: int
    include_text: bool
    overwrite: bool
    batch_tokens: int
    max_batch_size: int
    progress_every: float
    allow_incomplete_input: bool = False
    dedupe: bool = False
    reuse: str | None = None  # --reuse's folder; `previous` once it is checked (reuse.py)
    previous: object = None
    vector_dtype: str = "float32"  # how sentence vectors are stored

    def fields(self) -> Fields:
        """Where the readers find each record's text, id and metadata."""
        return Fields(self.text_field, self.id_field, self.metadata_fields, self.max_text_bytes)


def worker_threads(opts) -> tuple[int, int]:
    """(intra-op, inter-op) TensorFlow threads per worker process. The DirectRunner's
    multi-processing workers share this machine's cores. Dataflow runs one Python SDK process per
    vCPU unless `--experiments=no_use_multiple_sdk_containers`: each gets one thread per pool
    (TF's default, one per core in every process, would oversubscribe the VM n-fold). Anything
    else keeps TF's defaults (0: all cores)."""
    from apache_beam.options.pipeline_options import DebugOptions, DirectOptions, StandardOptions

    runner = opts.view_as(StandardOptions).runner
    if runner in ("DataflowRunner", "dataflow"):
        experiments = opts.view_as(DebugOptions).experiments or []
        return (0, 0) if "no_use_multiple_sdk_containers" in experiments else (1, 1)
    direct = opts.view_as(DirectOptions)
    if runner not in (None, "DirectRunner", "direct") or \
            direct.direct_running_mode != "multi_processing":
        return 0, 0
    cores = os.cpu_count() or 1
    workers = direct.direct_num_workers or cores  # Beam: 0 means one worker per core
    return (max(cores // workers, 1), 1) if workers > 1 else (0, 0)


def workers_run_here(options) -> bool:
    """Whether the job's workers run on this machine (and use its devices): every runner but
    Dataflow's, whose workers are VMs of their own."""
    from apache_beam.options.pipeline_options import StandardOptions

    return options.view_as(StandardOptions).runner not in ("DataflowRunner", "dataflow")


def check_accelerator(spec: EncoderSpec, options) -> None:
    """A run whose workers run here needs the accelerator it asks for on this machine: refused
    with one line before any data is read (a TPU is initialized here, once per process, and the
    in-process worker uses it). A TPU has one owner, so one worker process. Dataflow's workers
    bring their own device: its launcher checks the model on its CPU (`probe_widths`)."""
    from apache_beam.options.pipeline_options import DirectOptions

    if spec.accelerator == "auto" or not workers_run_here(options):
        return
    direct = options.view_as(DirectOptions)
    workers = direct.direct_num_workers or os.cpu_count() or 1
    if spec.accelerator == "tpu" and direct.direct_running_mode == "multi_processing" \
            and workers > 1:
        raise ValueError(f"--accelerator tpu runs in one process (a TPU has a single owner), "
                         f"got --direct_num_workers={workers} with multi_processing; expected "
                         "--direct_num_workers=1 or --direct_running_mode in_memory")
    from beam_embed.models.accelerators import check

    check(spec.accelerator)


def from_flags(opts: JobFlags, options, default_inputs: tuple[str, ...] = (),
               encoder: EncoderSpec | None = None) -> JobConfig:
    """The job's flags checked, with Beam's `options` (their thread pools), into a JobConfig;
    `encoder`: the spec already built from these flags (the early warm-up's), else built here."""
    formats = check_plain_flags(opts)
    if encoder is None:
        import_tensorflow()  # the model spec may load TensorFlow: quietly, after the plain checks
        encoder = spec_of(opts, worker_threads(options))
    return JobConfig(
        inputs=opts.input or default_inputs,
        input_format=opts.input_format,
        text_field=opts.text_field,
        id_field=opts.id_field,
        metadata_fields=None if opts.metadata_fields is None else csv_values(opts.metadata_fields),
        split=opts.split,
        clean=opts.clean,
        max_text_bytes=opts.max_text_bytes,
        encoder=encoder,
        output=opts.output.rstrip("/"),
        formats=formats,
        num_shards=_check_shards(opts.num_shards),
        include_text=opts.include_text,
        overwrite=opts.overwrite,
        batch_tokens=opts.batch_tokens,
        max_batch_size=opts.max_batch_size,
        progress_every=opts.progress_every,
        allow_incomplete_input=opts.allow_incomplete_input,
        dedupe=opts.dedupe,
        reuse=opts.reuse.rstrip("/") if opts.reuse else None,
        vector_dtype=opts.vector_dtype,
    )


def _check_shards(num_shards: int) -> int:
    if num_shards < 0:
        raise ValueError(f"--num_shards must be 0 (the runner decides) or a positive number of "
                         f"shards, got {num_shards}")
    return num_shards


def check_model_limits(cfg: JobConfig, positions: int | None, explicit: bool) -> JobConfig:
    """Limits that need the model (its positions), checked once it is loaded, before any data
    is read: a text the model cannot hold would otherwise be dead-lettered with TensorFlow's
    shape error, text after text. An --max_seq_length given beyond the positions is refused; a
    default beyond them (a TF-Hub model without one) becomes the positions."""
    spec = cfg.encoder
    model = spec.name or spec.encoder
    if positions is not None and spec.max_seq_length is not None and \
            spec.max_seq_length > positions:
        if explicit:
            raise ValueError(f"--max_seq_length {spec.max_seq_length} is more than the "
                             f"{positions} token positions of {model}; expected at most "
                             f"{positions}")
        spec = dataclasses.replace(spec, max_seq_length=positions)
        cfg = dataclasses.replace(cfg, encoder=spec)
    if spec.max_seq_length is not None and cfg.batch_tokens < spec.max_seq_length:
        raise ValueError(f"--batch_tokens {cfg.batch_tokens} cannot hold one full-length text "
                         f"(--max_seq_length {spec.max_seq_length} tokens); expected at least "
                         f"{spec.max_seq_length}")
    return cfg


def configure(flags: JobFlags, options, encoder: EncoderSpec | None = None) -> JobConfig:
    """The job's flags and Beam's options -> a validated JobConfig (`encoder`: see from_flags).
    Without --input the bundled sample corpus is the input."""
    default_inputs = ()
    if not flags.input:
        default_inputs = (write_sample_corpus(SAMPLE_CORPUS),)
        flags = dataclasses.replace(flags, input_format=flags.input_format or "jsonl")
    return from_flags(flags, options, default_inputs, encoder)
