"""The job flags' values, checked and turned into the encoder's spec, without Beam: what the
run (config.py) and the early warm-up (early.py) both do with its JobFlags (flags.py)."""

from __future__ import annotations

from beam_embed.models.spec import EncoderSpec, check_choice, check_positive, encoder_spec
from beam_embed.pipeline.common import output_formats
from beam_embed.pipeline.common.choices import INPUT_FORMATS, SPLIT_MODES, VECTOR_DTYPES


def csv_values(value: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in (value or "").split(",") if v.strip())


def check_plain_flags(opts) -> tuple[str, ...]:
    """The checks that need neither the model nor TensorFlow; the output formats."""
    formats, known = csv_values(opts.format), output_formats.names()  # the registry, as it is now
    bad = [f for f in formats if f not in known]
    if bad or not formats:
        raise ValueError(f"unknown format {(bad or [opts.format])[0]!r}; expected one or more of "
                         f"{list(known)}")
    check_choice("split", opts.split, SPLIT_MODES)
    check_choice("vector_dtype", opts.vector_dtype, VECTOR_DTYPES)
    if opts.vector_dtype != "float32" and opts.granularity == "token":
        raise ValueError(f"--vector_dtype {opts.vector_dtype} applies to sentence vectors; token "
                         "vectors take --token_dtype (float32 or float16)")
    if opts.input_format is not None:
        check_choice("input-format", opts.input_format, sorted(INPUT_FORMATS))
    for flag in ("max_text_bytes", "batch_tokens", "max_batch_size"):
        check_positive(flag.replace("_", "-"), getattr(opts, flag))
    if (opts.dedupe or opts.reuse) and opts.granularity == "token":
        raise ValueError(f"--{'dedupe' if opts.dedupe else 'reuse'} applies to sentence vectors; "
                         "expected --granularity sentence")
    return formats


def spec_of(opts, threads: tuple[int, int]) -> EncoderSpec:
    """The encoder's spec from the job's flags (may load TensorFlow to recognize a model)."""
    return encoder_spec(
        opts.model, encoder=opts.encoder, preprocessor=opts.preprocessor,
        poolings=csv_values(opts.pooling), normalize=opts.normalize,
        max_seq_length=opts.max_seq_length, long_text=opts.long_text,
        granularity=opts.granularity, token_layer=opts.token_layer, token_unit=opts.token_unit,
        token_dtype=opts.token_dtype, precision=opts.precision,
        options=(("signature", opts.elmo_signature),), threads=threads,
        accelerator=opts.accelerator, batch=(opts.batch_tokens, opts.max_batch_size))
