"""JobConfig: the parsed, validated job. Everything here is checked before any data is read."""

from __future__ import annotations

import dataclasses

from models.bert_encoder import PRECISIONS
from models.embedder import LONG_TEXT_MODES
from models.encoders.elmo import SIGNATURES
from models.tokens import TOKEN_DTYPES, TOKEN_UNITS
from models.presets import ModelSpec, resolve
from pipeline.cleaning import SPLIT_MODES
from pipeline.embed import EncoderSpec
from pipeline.formats import READERS
from pipeline.sinks import FORMATS


@dataclasses.dataclass(frozen=True)
class JobConfig:
    inputs: tuple[str, ...]
    input_format: str | None
    text_field: str
    id_field: str | None
    metadata_fields: tuple[str, ...]
    split: str
    clean: bool
    max_text_bytes: int
    model: ModelSpec
    encoder: EncoderSpec
    output: str
    formats: tuple[str, ...]
    num_shards: int
    include_text: bool
    overwrite: bool
    batch_tokens: int
    max_batch_size: int
    progress_every: float


GRANULARITIES = ("sentence", "token")


def _csv(value: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in (value or "").split(",") if v.strip())


def _choice(flag: str, value: str, choices) -> None:
    if value not in choices:
        raise ValueError(f"unknown --{flag} {value!r}; expected one of {list(choices)}")


def _positive(name: str, value: int) -> int:
    if value is None or value < 1:
        raise ValueError(f"--{name} must be a positive integer, got {value!r}")
    return value


def worker_threads(opts) -> tuple[int, int]:
    """(intra-op, inter-op) TensorFlow threads per worker process. The DirectRunner's
    multi-processing workers share this machine's cores. Dataflow runs one Python SDK process per
    vCPU unless `--experiments=no_use_multiple_sdk_containers`: each gets one thread per pool
    (TF's default, one per core in every process, would oversubscribe the VM n-fold). Anything
    else keeps TF's defaults (0: all cores)."""
    import os

    from apache_beam.options.pipeline_options import (DebugOptions, DirectOptions,
                                                      StandardOptions)

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


def model_spec(opts) -> ModelSpec:
    """--encoder with --preprocessor is a TF-Hub BERT pair; --encoder alone an ELMo module."""
    if opts.encoder:
        kind = "bert" if opts.preprocessor else "elmo"
        return ModelSpec(kind=kind, name=opts.encoder.rstrip("/").split("/")[-1] or "encoder",
                         encoder=opts.encoder, preprocessor=opts.preprocessor,
                         pooling=("cls",) if kind == "bert" else ("default",), normalize=False,
                         max_seq_length=None)
    return resolve(opts.model)


def from_options(opts, default_inputs: tuple[str, ...] = ()) -> JobConfig:
    from models.encoders import encoder_class
    from models.pooling import parse_poolings

    formats = _csv(opts.format)
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise ValueError(f"unknown format {(bad or [opts.format])[0]!r}; expected one or more of "
                         f"{list(FORMATS)}")
    _choice("long-text", opts.long_text, LONG_TEXT_MODES)
    _choice("split", opts.split, SPLIT_MODES)
    if opts.input_format is not None:
        _choice("input-format", opts.input_format, sorted(READERS))
    model = model_spec(opts)
    cls = encoder_class(model.kind)
    poolings = _csv(opts.pooling) or model.pooling or ("cls",)
    parse_poolings(list(poolings), *cls.pooling_registry())  # names checked before any load
    max_len = (opts.max_seq_length if opts.max_seq_length is not None
               else model.max_seq_length or 512)
    _positive("max-seq-length", max_len)
    if max_len < 3:
        raise ValueError(f"--max-seq-length must be at least 3 ([CLS] text [SEP]), got {max_len}")
    normalize = model.normalize if opts.normalize is None else opts.normalize
    _choice("granularity", opts.granularity, GRANULARITIES)
    _choice("token-unit", opts.token_unit, TOKEN_UNITS)
    _choice("token-dtype", opts.token_dtype, TOKEN_DTYPES)
    _choice("elmo-signature", opts.elmo_signature, SIGNATURES)
    _choice("precision", opts.precision, PRECISIONS)
    supported = getattr(cls, "precisions", ("fp32",))
    if opts.precision not in supported:
        raise ValueError(f"--precision {opts.precision} is not available for {model.kind} "
                         f"encoders; expected one of {list(supported)}")
    intra_op, inter_op = worker_threads(opts)
    if opts.granularity == "token" and opts.long_text == "chunk":
        raise ValueError("--long-text chunk applies to sentence vectors; token granularity "
                         "truncates (use --split sentences for long documents)")
    encoder = EncoderSpec(kind=model.kind, encoder=model.encoder, preprocessor=model.preprocessor,
                          max_seq_length=max_len, poolings=poolings, normalize=normalize,
                          long_text=opts.long_text,
                          options=(("signature", opts.elmo_signature),),
                          granularity=opts.granularity, token_layer=opts.token_layer,
                          token_unit=opts.token_unit, token_dtype=opts.token_dtype,
                          precision=opts.precision, intra_op_threads=intra_op,
                          inter_op_threads=inter_op)
    return JobConfig(
        inputs=tuple(opts.input or default_inputs),
        input_format=opts.input_format,
        text_field=opts.text_field,
        id_field=opts.id_field,
        metadata_fields=_csv(opts.metadata_fields),
        split=opts.split,
        clean=opts.clean,
        max_text_bytes=_positive("max-text-bytes", opts.max_text_bytes),
        model=model,
        encoder=encoder,
        output=opts.output.rstrip("/"),
        formats=formats,
        num_shards=max(opts.num_shards, 0),
        include_text=opts.include_text,
        overwrite=opts.overwrite,
        batch_tokens=_positive("batch-tokens", opts.batch_tokens),
        max_batch_size=_positive("max-batch-size", opts.max_batch_size),
        progress_every=opts.progress_every,
    )
