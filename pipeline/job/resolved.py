"""ResolvedRun: a run's settings (RunSettings, checked on construction) with what needs I/O or
the model: the encoder's spec, the input files, each pooling's width and storage, the previous
run --reuse copies from. Everything here is checked before any data is read."""

from __future__ import annotations

import dataclasses
import os

from beam_embed.models.spec import EncoderSpec
from beam_embed.models.tf_import import import_tensorflow
from beam_embed.pipeline.common.settings.sample_corpus import write_sample_corpus
from beam_embed.pipeline.job.chunking import chunking, prompt_tokens
from beam_embed.pipeline.job.formats import Fields
from beam_embed.pipeline.job.settings import RunSettings
from beam_embed.pipeline.job.threads import worker_threads

SAMPLE_CORPUS = os.path.join("output", "sample", "corpus.jsonl")


@dataclasses.dataclass(frozen=True)
class ResolvedRun:
    """Filled in as the launcher learns each part (dataclasses.replace), in this order."""

    settings: RunSettings
    encoder: EncoderSpec
    files: tuple[tuple[str, int], ...] = ()  # (path, bytes) the input patterns match
    widths: tuple[tuple[str, int], ...] = ()  # (column, width) per pooling, from the model
    stored: tuple = ()  # how each pooling is stored (calibration.py); (): float32
    previous: object = None  # --reuse's previous run, once checked (reuse.py)
    # --split chunks: the windows' sizes decided with the model (chunking.Chunking)
    chunks: object = None
    resumed: object = None  # --resume: what the killed attempts committed (resume.py)

    @property
    def output(self) -> str:
        return self.settings.output

    def fields(self) -> Fields:
        """Where the readers find each record's text, id and metadata."""
        s = self.settings
        return Fields(s.text_field, s.id_field, s.metadata_fields, s.max_text_bytes)

    def writing_to(self, folder: str) -> ResolvedRun:
        """The same run, written to `folder` (its staging folder)."""
        return dataclasses.replace(self, settings=dataclasses.replace(self.settings,
                                                                      output=folder))


def workers_run_here(options) -> bool:
    """Whether the job's workers run on this machine (and use its devices): every runner but
    Dataflow's, whose workers are VMs of their own, and Dask's, whose workers are a cluster's."""
    from apache_beam.options.pipeline_options import StandardOptions

    from beam_embed.pipeline.common.runners.choice import is_dask

    return options.view_as(StandardOptions).runner not in ("DataflowRunner", "dataflow") and \
        not is_dask(options)


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


def check_model_limits(run: ResolvedRun, positions: int | None) -> ResolvedRun:
    """Limits that need the model (its positions), checked once it is loaded, before any data
    is read: a text the model cannot hold would otherwise be dead-lettered with TensorFlow's
    shape error, text after text. An --max_seq_length given beyond the positions is refused; a
    default beyond them (a TF-Hub model without one) becomes the positions."""
    spec = run.encoder
    model = spec.name or spec.encoder
    if positions is not None and spec.max_seq_length is not None and \
            spec.max_seq_length > positions:
        if run.settings.max_seq_length is not None:
            raise ValueError(f"--max_seq_length {spec.max_seq_length} is more than the "
                             f"{positions} token positions of {model}; expected at most "
                             f"{positions}")
        spec = dataclasses.replace(spec, max_seq_length=positions)
        run = dataclasses.replace(run, encoder=spec)
    # a window the model cannot hold; the windows' sizes as decided, for the workers
    run = dataclasses.replace(run, chunks=chunking(run.settings, spec, prompt_tokens(spec)))
    batch_tokens = run.settings.batch_tokens
    if spec.max_seq_length is not None and batch_tokens < spec.max_seq_length:
        raise ValueError(f"--batch_tokens {batch_tokens} cannot hold one full-length text "
                         f"(--max_seq_length {spec.max_seq_length} tokens); expected at least "
                         f"{spec.max_seq_length}")
    return run


def with_default_input(settings: RunSettings) -> RunSettings:
    """Without --input the bundled sample corpus is the input (its id and topic fields are
    found as a user's own corpus's are: beam_embed.pipeline.job.input_fields)."""
    if settings.input:
        return settings
    return dataclasses.replace(settings, input=(write_sample_corpus(SAMPLE_CORPUS),),
                               input_format=settings.input_format or "jsonl")


def resolve(settings: RunSettings, options, encoder: EncoderSpec | None = None) -> ResolvedRun:
    """The settings and Beam's `options` (their thread pools) -> a ResolvedRun with its
    encoder's spec: `encoder`, the spec already built from these settings (the early warm-up's),
    else built here."""
    if encoder is None:
        import_tensorflow()  # the model spec may load TensorFlow: quietly
        encoder = settings.encoder_spec(worker_threads(options))
    return ResolvedRun(with_default_input(settings), encoder)


def shipped(run: ResolvedRun, cluster_path) -> ResolvedRun:
    """`run` with every local path its workers open made absolute by `cluster_path` (the
    input files, the output, the model's files when they are here, --reuse): a cluster's
    workers run in working folders of their own."""
    import os

    spec, settings = run.encoder, run.settings
    local = {h: cluster_path(h) for h in (spec.encoder, spec.preprocessor) if h and os.path.exists(h)}
    spec = dataclasses.replace(spec, encoder=local.get(spec.encoder, spec.encoder),
                               preprocessor=local.get(spec.preprocessor, spec.preprocessor))
    if settings.reuse:
        settings = dataclasses.replace(settings, reuse=cluster_path(settings.reuse))
    return dataclasses.replace(
        run, settings=settings, encoder=spec,
        files=tuple((cluster_path(path), size) for path, size in run.files)).writing_to(
        cluster_path(run.output))
